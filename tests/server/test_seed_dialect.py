"""``/live``: the seed project's BIDI transport, written from its wire format.

The seed (hironow/adk-stream-protocol, ``lib/bidi``) connects to
``<base>/live`` and reads only text frames that start with ``data: ``, one
Server-Sent Event each; ``data: [DONE]`` ends a stream, and so does the
``finish-step`` after a ``tool-approval-request``. It sends its whole chat
history in ``message`` events, approvals and browser results inside the tool
parts of the last assistant message, pings every 2 s (answered with a plain
JSON pong), and flat ``tool_result`` / ``audio_chunk`` / ``audio_control`` /
``interrupt`` messages (older versions nest some of them in ``data``).
Its code is never committed; this test speaks its format.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from audiocore_server import Settings, create_app
from audiocore_server.wire.chunks import client_executes

VERSION = {"version": "1.0", "timestamp": 1764547200000}


class SeedStream:
    """One seed-side stream: frames up to ``[DONE]`` (or the finish-step
    that closes an approval), parsed the way the seed client parses them."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.pongs: list[dict[str, Any]] = []

    def read(self, limit: int = 500, until: str | None = None) -> list[dict[str, Any]]:
        """The stream's chunks up to its end, or (``until``) up to the first
        chunk of that type, the stream still open."""
        chunks: list[dict[str, Any]] = []
        armed = False
        for _ in range(limit):
            frame = self.ws.receive_text()
            if not frame.startswith("data: "):
                self.pongs.append(json.loads(frame))  # the seed's JSON (pong) path
                continue
            assert frame.endswith("\n\n") and frame.count("data: ") == 1, frame
            body = frame[len("data: ") :].strip()
            if body == "[DONE]":
                return chunks
            chunk = json.loads(body)
            chunks.append(chunk)
            if chunk["type"] == until:
                return chunks
            if chunk["type"] == "tool-approval-request":
                armed = True
            elif chunk["type"] == "finish-step" and armed:
                return chunks
        raise AssertionError(f"no end of stream in {limit} frames: {[c['type'] for c in chunks]}")


def send(ws: Any, message: dict[str, Any]) -> None:
    ws.send_text(json.dumps({**message, **VERSION}))


def user(text: str, msg_id: str = "u1") -> dict[str, Any]:
    return {"parts": [{"type": "text", "text": text}], "id": msg_id, "role": "user"}


def submit(ws: Any, messages: list[dict[str, Any]], message_id: str | None = None) -> None:
    body: dict[str, Any] = {
        "type": "message",
        "id": "chat-adk-bidi-ws---127-0-0-1-8000-live",
        "messages": messages,
        "trigger": "submit-message",
    }
    if message_id is not None:
        body["messageId"] = message_id
    send(ws, body)


def test_text_turn_framing_and_done(client: TestClient) -> None:
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        submit(ws, [user("hi")])
        chunks = stream.read()
    kinds = [c["type"] for c in chunks]
    assert kinds[:4] == ["start", "text-start", "text-delta", "text-end"]
    assert kinds[-1] == "finish" and chunks[-1]["finishReason"] == "stop"
    assert "data-session" not in kinds
    audio = [c for c in chunks if c["type"] == "data-pcm"]
    assert audio and {c["data"]["sampleRate"] for c in audio} == {24000}
    assert chunks[2]["delta"] == "You said: hi"


def test_ping_gets_a_plain_json_pong(client: TestClient) -> None:
    with client.websocket_connect("/live") as ws:
        send(ws, {"type": "ping"})
        pong = json.loads(ws.receive_text())
    assert pong == {"type": "pong", "timestamp": VERSION["timestamp"]}


def test_approved_server_tool_and_its_continuation(client: TestClient) -> None:
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        history = [user("pay 200 USD to Jiro")]
        submit(ws, history)
        first = stream.read()
        kinds = [c["type"] for c in first]
        assert kinds[-3:] == ["tool-input-available", "tool-approval-request", "finish-step"]
        assert "finish" not in kinds
        call = next(c for c in first if c["type"] == "tool-input-available")
        request = first[-2]
        assistant = {
            "id": first[0]["messageId"],
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {
                    "type": "tool-process_payment",
                    "toolCallId": call["toolCallId"],
                    "state": "approval-responded",
                    "input": call["input"],
                    "approval": {
                        "id": request["approvalId"],
                        "approved": True,
                        "reason": "User approved the tool execution.",
                    },
                },
            ],
        }
        submit(ws, [*history, assistant], message_id=assistant["id"])
        second = stream.read()
    kinds = [c["type"] for c in second]
    assert "start" not in kinds  # the same assistant message goes on
    output = next(c for c in second if c["type"] == "tool-output-available")
    assert output["toolCallId"] == call["toolCallId"] and output["output"]["success"] is True
    assert kinds[-1] == "finish"


def test_browser_tool_approval_and_result_in_one_message(client: TestClient) -> None:
    """The seed's client approves, runs the tool, and sends both at once: the
    part is output-available and still carries its approval."""
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        history = [user("where am I")]
        submit(ws, history)
        first = stream.read()
        call = next(c for c in first if c["type"] == "tool-input-available")
        request = next(c for c in first if c["type"] == "tool-approval-request")
        position = {"latitude": 35.6762, "longitude": 139.6503, "accuracy": 20}
        assistant = {
            "id": first[0]["messageId"],
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-get_location",
                    "toolCallId": call["toolCallId"],
                    "state": "output-available",
                    "input": {},
                    "output": position,
                    "approval": {"id": request["approvalId"], "approved": True},
                }
            ],
        }
        submit(ws, [*history, assistant], message_id=assistant["id"])
        second = stream.read()
    kinds = [c["type"] for c in second]
    assert "tool-input-available" not in kinds  # not asked to run it again
    output = next(c for c in second if c["type"] == "tool-output-available")
    assert output["output"] == position
    assert "35.6762" in next(c for c in second if c["type"] == "text-delta")["delta"]


def test_flat_tool_result_after_an_approval(client: TestClient) -> None:
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        history = [user("where am I")]
        submit(ws, history)
        first = stream.read()
        call = next(c for c in first if c["type"] == "tool-input-available")
        request = next(c for c in first if c["type"] == "tool-approval-request")
        part = {
            "type": "tool-get_location",
            "toolCallId": call["toolCallId"],
            "state": "approval-responded",
            "input": call["input"],
            "approval": {"id": request["approvalId"], "approved": True},
        }
        submit(ws, [*history, {"id": "a1", "role": "assistant", "parts": [part]}], "a1")
        # Asked to run it now; the stream stays open for the result.
        run = stream.read(until="finish-step")
        assert [c["type"] for c in run] == ["tool-input-available", "finish-step"]
        assert client_executes(run[0])
        position = {"latitude": 35.6762, "longitude": 139.6503}
        send(ws, {"type": "tool_result", "toolCallId": call["toolCallId"], "result": position})
        rest = stream.read()
    assert next(c for c in rest if c["type"] == "tool-output-available")["output"] == position
    assert rest[-1]["type"] == "finish"


def test_change_bgm_runs_at_once_and_its_tool_result_ends_the_turn(client: TestClient) -> None:
    """The seed's client runs change_bgm as soon as it sees the call (no
    approval, seed 003) and sends a flat ``tool_result``; its stream stays
    open (a [DONE] would make it drop the rest): the output, the model's
    answer and ``finish`` come in the same stream."""
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        submit(ws, [user("play lofi")])
        first = stream.read(until="finish-step")
        kinds = [c["type"] for c in first]
        assert "tool-approval-request" not in kinds
        assert kinds[-3:] == ["tool-input-start", "tool-input-available", "finish-step"]
        call = first[-2]
        assert call["toolName"] == "change_bgm" and call["input"] == {"track": "lofi"}
        assert client_executes(call)
        send(
            ws,
            {"type": "tool_result", "toolCallId": call["toolCallId"], "result": {"track": "lofi"}},
        )
        rest = stream.read()
    kinds = [c["type"] for c in rest]
    assert "error" not in kinds and kinds[-1] == "finish"
    output = next(c for c in rest if c["type"] == "tool-output-available")
    assert output == {
        "type": "tool-output-available",
        "toolCallId": call["toolCallId"],
        "output": {"track": "lofi"},
    }
    answer = next(c for c in rest if c["type"] == "text-delta")["delta"]
    assert answer == 'change_bgm returned {"track": "lofi"}.'


def test_denied_tool_in_the_seed_dialect(client: TestClient) -> None:
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        history = [user("pay 1 EUR to Eve")]
        submit(ws, history)
        first = stream.read()
        call = next(c for c in first if c["type"] == "tool-input-available")
        request = next(c for c in first if c["type"] == "tool-approval-request")
        part = {
            "type": "tool-process_payment",
            "toolCallId": call["toolCallId"],
            "state": "approval-responded",
            "input": call["input"],
            "approval": {"id": request["approvalId"], "approved": False, "reason": "no"},
        }
        submit(ws, [*history, {"id": "a", "role": "assistant", "parts": [part]}], "a")
        rest = stream.read()
    assert {"type": "tool-output-denied", "toolCallId": call["toolCallId"]} in rest
    assert rest[-1]["type"] == "finish"


@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested-data"])
def test_audio_chunk_and_audio_control_stop_end_a_spoken_turn(
    client: TestClient, nested: bool
) -> None:
    rate = 16000
    t = np.arange(int(0.6 * rate)) / rate
    tone = np.rint(0.3 * 32767 * np.sin(2 * np.pi * 300 * t)).astype("<i2").tobytes()
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        for i in range(0, len(tone), 640):
            fields = {
                "chunk": base64.b64encode(tone[i : i + 640]).decode(),
                "sampleRate": rate,
                "channels": 1,
                "bitDepth": 16,
            }
            send(ws, {"type": "audio_chunk", **({"data": fields} if nested else fields)})
        # The microphone stops: the utterance ends without waiting for silence.
        send(ws, {"type": "audio_control", "action": "stop"})
        chunks = stream.read()
    transcript = next(c for c in chunks if c["type"] == "data-transcript")
    assert "0.60 s" in transcript["data"]["text"] or "0.6" in transcript["data"]["text"]
    assert any(c["type"] == "data-pcm" for c in chunks) and chunks[-1]["type"] == "finish"


def test_interrupt_with_a_reason(client: TestClient) -> None:
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        send(ws, {"type": "interrupt", "reason": "user_abort"})
        submit(ws, [user("still here")])
        chunks = stream.read()
    kinds = [c["type"] for c in chunks]
    assert kinds[0] == "data-interrupted" and kinds[-1] == "finish"


def test_older_nested_message_shape(client: TestClient) -> None:
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        send(ws, {"type": "message", "data": {"messages": [user("nested hello")]}})
        chunks = stream.read()
    assert next(c for c in chunks if c["type"] == "text-delta")["delta"] == "You said: nested hello"


def test_no_binary_frames_even_if_asked(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/live") as ws:
        ws.send_text(json.dumps({"type": "start", "output": {"binary": True}}))
        stream = SeedStream(ws)
        submit(ws, [user("hello")])
        chunks = stream.read()  # receive_text fails on a binary frame
    assert any(c["type"] == "data-pcm" for c in chunks)
