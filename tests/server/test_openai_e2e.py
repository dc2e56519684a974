"""End to end on the OpenAI Realtime path: real uvicorn, ADK's runner, our
``OpenAIRealtime`` model and the ``openai`` package's realtime client over
TLS, against the local endpoint (tests/openai_realtime), which validates
every event it gets and records them.

The browser side is a real WebSocket client streaming 48 kHz float32 in
20 ms frames at real-time pace, as the demo page does. Tests synchronise on
what the client and the endpoint have seen, never on sleeps.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gemini_helpers import clean_env, free_port
from openai_helpers import MODEL, openai_settings, use_openai_key
from scipy.signal import resample_poly
from server_helpers import Collector, check_padded, serve_ws, stream_realtime
from test_e2e import RATE, START_F32, aligned_correlation, connect, silence

from server.pacer import OutputPacer
from tests.openai_realtime import EndpointConfig, LocalOpenAIRealtime
from tests.openai_realtime.conversation import describe

REPO = Path(__file__).resolve().parents[2]
FRAME_24K = 960  # the pacer's 40 ms frames at the default output rate


@pytest.fixture
def endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalOpenAIRealtime]:
    # The whole answer at once: a sample-exact echo must not depend on how
    # fast this machine relays a real-time stream.
    with LocalOpenAIRealtime(EndpointConfig(speed=1000.0), cert_dir=tmp_path / "cert") as live:
        use_openai_key(monkeypatch, live.api_key)
        yield live


@pytest.fixture
def openai_server(endpoint: LocalOpenAIRealtime, tmp_path: Path) -> Iterator[str]:
    with serve_ws(openai_settings(endpoint, tmp_path / "data")) as url:
        yield url


async def open_session(
    url: str, endpoint: LocalOpenAIRealtime, **start: Any
) -> tuple[Any, Collector]:
    """A client session whose realtime session is configured (so no audio
    waits for it)."""
    before = len(endpoint.records)
    ws, col, _ = await connect(url, {**START_F32, **start})
    await endpoint.wait_for_async(lambda rs: len(rs) > before and rs[-1].updates)
    return ws, col


async def say(ws: Any, text: str) -> None:
    await ws.send(json.dumps({"type": "text", "text": text}))


def said(col: Collector, turn: int = -1) -> str:
    """The agent's words in a turn (its text deltas)."""
    turns: list[list[str]] = [[]]
    for _, m in col.messages:
        if m["type"] == "text-delta":
            turns[-1].append(m["delta"])
        elif m["type"] == "finish":
            turns.append([])
    return "".join([t for t in turns if t][turn])


def errors(col: Collector) -> list[str]:
    return [m["errorText"] for _, m in col.messages if m["type"] == "error"]


def received(endpoint: LocalOpenAIRealtime, kind: str, index: int = 0) -> list[dict[str, Any]]:
    return [e for e in endpoint.records[index].received if e["type"] == kind]


# ---------------------------------------------------------------- turns


def test_spoken_turn_echo_transcripts_and_exact_samples(
    openai_server: str, endpoint: LocalOpenAIRealtime, speech_48k
) -> None:
    sent = np.concatenate([silence(0.4), speech_48k, silence(1.2)])

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await stream_realtime(ws, sent, RATE)
        finish = await col.wait_for("finish", timeout=20)
        assert finish["finishReason"] == "stop"
        usage = finish["messageMetadata"]["usage"]  # the endpoint's response.done usage
        assert usage["totalTokens"] == usage["promptTokens"] + usage["completionTokens"] > 0
        assert finish["messageMetadata"]["model"] == MODEL
        await col.close()
        return col

    col = asyncio.run(scenario())
    record = endpoint.records[0]
    assert not record.errors and not errors(col)
    (utterance,) = record.echoed  # what the endpoint's VAD cut, at 24 kHz
    n = len(utterance) // 2
    heard = [m["data"] for _, m in col.messages if m["type"] == "data-transcript"]
    assert heard[-1]["text"] == describe(utterance) and heard[-1]["final"]
    assert said(col) == f"I heard {n / 24000:.2f} seconds of audio. Here it is back."
    # Exactly the utterance back (24 kHz both ways: no resampling on the way
    # out), then silence to a whole frame.
    echo = check_padded(col.pcm(), n, FRAME_24K)
    assert echo.tobytes() == utterance
    # The mic path: 48 kHz → 24 kHz in one pass, as the endpoint got it.
    reference = resample_poly(sent.astype(np.float64), 1, 2)
    assert aligned_correlation(echo / 32768, reference) >= 0.99
    session = record.session
    assert session["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert session["audio"]["output"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert session["audio"]["input"]["turn_detection"]["type"] == "server_vad"
    assert session["audio"]["input"]["transcription"]["model"]
    assert record.query["model"] == [MODEL] and record.path == "/v1/realtime"
    assert "openai-beta" not in record.headers  # the GA interface
    assert {t["name"] for t in session["tools"]} >= {"get_current_time", "process_payment"}


def test_the_mic_goes_to_24_khz_directly_never_through_16_khz(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """A 10 kHz tone survives 48 → 24 kHz (Nyquist 12 kHz); through a 16 kHz
    stage (Nyquist 8 kHz) it would be gone."""
    t = np.arange(int(1.0 * RATE)) / RATE
    tone = (0.3 * np.sin(2 * np.pi * 10_000 * t)).astype(np.float32)

    async def scenario() -> None:
        ws, col = await open_session(openai_server, endpoint, turnDetection="manual")
        await ws.send(json.dumps({"type": "activity_start"}))
        await stream_realtime(ws, tone, RATE)
        await ws.send(json.dumps({"type": "activity_end"}))
        await col.wait_for("finish", timeout=20)
        await col.close()

    asyncio.run(scenario())
    (utterance,) = endpoint.records[0].echoed
    got = np.frombuffer(utterance, "<i2").astype(np.float64) / 32768
    middle = got[len(got) // 4 : -len(got) // 4]
    rms = float(np.sqrt(np.mean(middle**2)))
    assert rms > 0.3 / np.sqrt(2) * 0.9, rms  # the tone, at its level
    spectrum = np.abs(np.fft.rfft(middle))
    assert abs(np.argmax(spectrum) * 24000 / len(middle) - 10_000) < 50


def test_answers_in_bursts_faster_than_real_time_arrive_whole(
    tmp_path: Path, speech_48k, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint's default delivery (200 ms bursts at twice real time):
    everything arrives. On a starved machine the pacer may conceal a stall
    with silence, so only "nothing missing" is asserted."""
    with LocalOpenAIRealtime(EndpointConfig(), cert_dir=tmp_path / "cert") as endpoint:
        use_openai_key(monkeypatch, endpoint.api_key)

        async def scenario(url: str) -> Collector:
            ws, col = await open_session(url, endpoint)
            await stream_realtime(ws, np.concatenate([speech_48k, silence(1.0)]), RATE)
            await col.wait_for("finish", timeout=20)
            await col.close()
            return col

        with serve_ws(openai_settings(endpoint, tmp_path / "data")) as url:
            col = asyncio.run(scenario(url))
        record = endpoint.records[0]
    (utterance,) = record.echoed
    n = len(utterance) // 2
    assert len(col.pcm()) // 2 >= n and not errors(col)
    assert record.sent.count("response.output_audio.delta") == -(-n // FRAME_24K)  # 40 ms each


def test_typed_turns(openai_server: str, endpoint: LocalOpenAIRealtime) -> None:
    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await say(ws, "hello there")
        await col.wait_for("finish")
        await say(ws, "and again")
        await col.wait_for("finish", count=2)
        await col.close()
        return col

    col = asyncio.run(scenario())
    assert said(col, 0) == "You said: hello there"
    assert said(col, 1) == "You said: and again"
    assert col.pcm() and not errors(col)
    items = [e["item"] for e in received(endpoint, "conversation.item.create")]
    assert items == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
        for t in ("hello there", "and again")
    ]
    kinds = [k for k in endpoint.records[0].received_types() if k != "input_audio_buffer.append"]
    assert kinds == ["session.update"] + ["conversation.item.create", "response.create"] * 2


def test_push_to_talk_commits_the_bracketed_audio_and_asks_for_the_answer(
    openai_server: str, endpoint: LocalOpenAIRealtime, speech_48k
) -> None:
    speech = speech_48k[: len(speech_48k) // 2 * 2]

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint, turnDetection="manual")
        await ws.send(json.dumps({"type": "activity_start"}))
        await stream_realtime(ws, speech, RATE)
        await ws.send(json.dumps({"type": "activity_end"}))
        await col.wait_for("finish", timeout=20)
        await col.close()
        return col

    col = asyncio.run(scenario())
    record = endpoint.records[0]
    assert record.session["audio"]["input"]["turn_detection"] is None
    kinds = [k for k in record.received_types() if k != "input_audio_buffer.append"]
    assert kinds == [
        "session.update",
        "input_audio_buffer.clear",
        "input_audio_buffer.commit",
        "response.create",
    ]
    (utterance,) = record.echoed  # the whole bracket, as committed
    assert len(utterance) // 2 == record.audio_in
    echo = check_padded(col.pcm(), record.audio_in, FRAME_24K)
    assert echo.tobytes() == utterance and not errors(col) and not record.errors
    reference = resample_poly(speech.astype(np.float64), 1, 2)
    assert aligned_correlation(echo / 32768, reference) >= 0.99


def test_the_mic_stopped_mid_utterance_ends_the_turn(
    openai_server: str, endpoint: LocalOpenAIRealtime, speech_48k
) -> None:
    """No silence follows for the service's VAD: the server commits the
    speech so far and asks for the answer."""
    speech = speech_48k[: len(speech_48k) * 3 // 4]  # cut mid-word

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await stream_realtime(ws, speech, RATE)
        await ws.send(json.dumps({"type": "audio_control", "action": "stop"}))
        await col.wait_for("finish", timeout=20)
        await col.close()
        return col

    col = asyncio.run(scenario())
    record = endpoint.records[0]
    kinds = [k for k in record.received_types() if k != "input_audio_buffer.append"]
    assert kinds == ["session.update", "input_audio_buffer.commit", "response.create"]
    (utterance,) = record.echoed
    assert check_padded(col.pcm(), len(utterance) // 2, FRAME_24K).tobytes() == utterance
    assert not record.errors and not errors(col)


def test_a_typed_turn_while_an_answer_is_generated_cancels_it_first(
    tmp_path: Path, speech_48k, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One response at a time: the answer being generated is cancelled, then
    the typed turn is answered (the endpoint refuses a second response)."""
    with LocalOpenAIRealtime(EndpointConfig(speed=1.0), cert_dir=tmp_path / "cert") as endpoint:
        use_openai_key(monkeypatch, endpoint.api_key)

        async def scenario(url: str) -> Collector:
            ws, col = await open_session(url, endpoint, turnDetection="manual")
            await ws.send(json.dumps({"type": "activity_start"}))
            await stream_realtime(ws, speech_48k, RATE)
            await ws.send(json.dumps({"type": "activity_end"}))
            await col.wait_for("data-pcm", timeout=20)  # the echo is being generated
            await say(ws, "hello")
            await col.wait_for("finish", count=2, timeout=20)
            await col.close()
            return col

        with serve_ws(openai_settings(endpoint, tmp_path / "data")) as url:
            col = asyncio.run(scenario(url))
        record = endpoint.records[0]
    kinds = [k for k in record.received_types() if k != "input_audio_buffer.append"]
    assert kinds[-3:] == ["response.cancel", "conversation.item.create", "response.create"]
    assert not record.errors and not errors(col)
    assert said(col) == "You said: hello"


def test_barge_in_truncates_the_spoken_item_at_the_played_position(
    tmp_path: Path, speech_48k, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user speaks over an answer that arrived whole (faster than real
    time) and is still playing: the endpoint is told to truncate that item
    at exactly the position the pacer says was played (read through a spy on
    it), which is less than what the client received of it, and the
    client's turn ends there with nothing more of its audio."""
    positions: list[float] = []
    played_seconds = OutputPacer.played_seconds

    def spy(pacer: OutputPacer) -> float:
        positions.append(played_seconds(pacer))
        return positions[-1]

    monkeypatch.setattr(OutputPacer, "played_seconds", spy)
    with LocalOpenAIRealtime(EndpointConfig(speed=1000.0), cert_dir=tmp_path / "cert") as endpoint:
        use_openai_key(monkeypatch, endpoint.api_key)

        async def scenario(url: str) -> tuple[Collector, int]:
            ws, col = await open_session(url, endpoint)
            await stream_realtime(ws, np.concatenate([speech_48k, silence(0.8)]), RATE)
            await col.wait_for("data-pcm", count=5, timeout=20)
            await stream_realtime(ws, speech_48k[: RATE // 2], RATE)  # barge in
            await col.wait_for("data-interrupted", timeout=10)
            await endpoint.wait_for_async(lambda rs: rs[0].truncations)
            await col.close()
            kinds = col.types()
            before = col.messages[: kinds.index("data-interrupted")]
            return col, sum(len(m["data"]["content"]) for _, m in before if m["type"] == "data-pcm")

        with serve_ws(openai_settings(endpoint, tmp_path / "data")) as url:
            col, b64_chars = asyncio.run(scenario(url))
        record = endpoint.records[0]
    ((item_id, end_ms),) = record.truncations
    (utterance,) = record.echoed
    (played,) = positions  # asked once: at the barge-in (the first turn had no answer yet)
    assert end_ms == round(played * 24000) * 1000 // 24000  # the only item: it starts at 0
    received_ms = b64_chars * 3 // 4 // 2 * 1000 // 24000  # base64 → bytes → samples → ms
    assert 0 < end_ms <= received_ms < len(utterance) // 2 * 1000 // 24000
    assert not record.errors  # the endpoint found the truncation valid
    interrupted = next(m for _, m in col.messages if m["type"] == "data-interrupted")
    assert interrupted["data"]["source"] == "model"
    assert "data-pcm" not in col.types()[col.types().index("data-interrupted") :]


def test_the_users_stop_truncates_at_the_played_position_and_cancels(
    tmp_path: Path, speech_48k, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's Stop (`interrupt`) while the answer is still generated (at
    real time here): the endpoint gets the truncation at what the pacer says
    was played at that moment, then response.cancel; the client's turn ends
    with the cancelled response."""
    positions: list[float] = []
    played_seconds = OutputPacer.played_seconds

    def spy(pacer: OutputPacer) -> float:
        positions.append(played_seconds(pacer))
        return positions[-1]

    monkeypatch.setattr(OutputPacer, "played_seconds", spy)
    with LocalOpenAIRealtime(EndpointConfig(speed=1.0), cert_dir=tmp_path / "cert") as endpoint:
        use_openai_key(monkeypatch, endpoint.api_key)

        async def scenario(url: str) -> Collector:
            ws, col = await open_session(url, endpoint, turnDetection="manual")
            await ws.send(json.dumps({"type": "activity_start"}))
            await stream_realtime(ws, speech_48k, RATE)
            await ws.send(json.dumps({"type": "activity_end"}))
            await col.wait_for("data-pcm", count=5, timeout=20)
            await ws.send(json.dumps({"type": "interrupt"}))
            await col.wait_for("finish", timeout=20)
            await col.close()
            return col

        with serve_ws(openai_settings(endpoint, tmp_path / "data")) as url:
            col = asyncio.run(scenario(url))
        record = endpoint.records[0]
    (played,) = positions  # asked once: at the user's stop
    ((item_id, end_ms),) = record.truncations
    assert end_ms == round(played * 24000) * 1000 // 24000 > 0
    kinds = [k for k in record.received_types() if k != "input_audio_buffer.append"]
    assert kinds[-2:] == ["conversation.item.truncate", "response.cancel"]
    assert "response.done" in record.sent and not record.errors
    interrupted = next(m for _, m in col.messages if m["type"] == "data-interrupted")
    assert interrupted["data"]["source"] == "client" and not errors(col)


def test_push_to_talk_over_the_answer_interrupts_it_at_the_played_position(
    tmp_path: Path, speech_48k, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Manual turns: the next activity_start while the answer plays and is
    still generated truncates it, cancels it, and the client's turn ends
    (interrupted) once the service confirms; the next turn is answered."""
    with LocalOpenAIRealtime(EndpointConfig(speed=1.0), cert_dir=tmp_path / "cert") as endpoint:
        use_openai_key(monkeypatch, endpoint.api_key)

        async def scenario(url: str) -> Collector:
            ws, col = await open_session(url, endpoint, turnDetection="manual")
            await ws.send(json.dumps({"type": "activity_start"}))
            await stream_realtime(ws, speech_48k, RATE)
            await ws.send(json.dumps({"type": "activity_end"}))
            await col.wait_for("data-pcm", count=5, timeout=20)
            await ws.send(json.dumps({"type": "activity_start"}))  # over the answer
            await col.wait_for("data-interrupted", timeout=10)
            await stream_realtime(ws, speech_48k[: RATE // 2], RATE)
            await ws.send(json.dumps({"type": "activity_end"}))
            await col.wait_for("finish", count=2, timeout=20)
            await col.close()
            return col

        with serve_ws(openai_settings(endpoint, tmp_path / "data")) as url:
            col = asyncio.run(scenario(url))
        record = endpoint.records[0]
    kinds = [k for k in record.received_types() if k != "input_audio_buffer.append"]
    assert kinds[4:] == [
        "conversation.item.truncate",
        "response.cancel",
        "input_audio_buffer.clear",
        "input_audio_buffer.commit",
        "response.create",
    ]
    ((item_id, end_ms),) = record.truncations
    assert end_ms > 0 and not record.errors and not errors(col)
    interrupted = next(m for _, m in col.messages if m["type"] == "data-interrupted")
    assert interrupted["data"]["source"] == "model"
    assert len(record.echoed) == 2  # the second turn was heard and answered


# ---------------------------------------------------------------- tools


def test_server_tool_round_trip(openai_server: str, endpoint: LocalOpenAIRealtime) -> None:
    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await say(ws, "what is the weather in Paris")
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    call = next(m for _, m in col.messages if m["type"] == "tool-input-available")
    output = next(m for _, m in col.messages if m["type"] == "tool-output-available")
    assert (call["toolName"], call["input"]) == ("get_weather", {"location": "Paris"})
    (item,) = [e["item"] for e in received(endpoint, "conversation.item.create")][1:]
    # ADK ran the tool and answered the endpoint's call by its call_id.
    assert item["type"] == "function_call_output" and item["call_id"] == call["toolCallId"]
    assert json.loads(item["output"]) == output["output"]
    assert said(col) == f"get_weather returned {item['output']}."
    assert col.types().count("finish") == 1 and not endpoint.records[0].errors


def _approve(request: dict[str, Any]) -> str:
    return json.dumps(
        {"type": "tool_approval", "approvalId": request["approvalId"], "approved": True}
    )


def test_approval_tool_answer_goes_back_as_function_call_output(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await say(ws, "pay 5 EUR to Alice")
        await ws.send(_approve(await col.wait_for("tool-approval-request")))
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    output = next(m for _, m in col.messages if m["type"] == "tool-output-available")
    assert output["output"]["success"] is True
    outputs = [e["item"] for e in received(endpoint, "conversation.item.create")][1:]
    assert [(o["type"], o["call_id"]) for o in outputs] == [
        ("function_call_output", output["toolCallId"])
    ]
    assert json.loads(outputs[0]["output"])["transactionId"] == output["output"]["transactionId"]
    assert said(col).startswith("process_payment returned")


def test_two_calls_in_one_step_get_one_response_create(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """A server tool and an approval tool in one response: both outputs go
    back, then one response.create — not one per call."""

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await say(ws, "pay 5 EUR to Alice and what time is it")
        await ws.send(_approve(await col.wait_for("tool-approval-request")))
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    calls = [m for _, m in col.messages if m["type"] == "tool-input-available"]
    assert {c["toolName"] for c in calls} == {"process_payment", "get_current_time"}
    events = [e for e in endpoint.records[0].received if e["type"] != "input_audio_buffer.append"]
    kinds = [e["type"] for e in events]
    assert kinds == [
        "session.update",
        "conversation.item.create",
        "response.create",
        "conversation.item.create",
        "conversation.item.create",
        "response.create",
    ]
    answered = {e["item"]["call_id"] for e in events[3:5]}
    assert answered == {c["toolCallId"] for c in calls}
    assert col.types().count("finish") == 1 and not endpoint.records[0].errors
    assert "process_payment returned" in said(col) and "get_current_time returned" in said(col)


def test_browser_tool_result_goes_back_as_function_call_output(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """change_bgm runs in the browser: the client's result is the output."""

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await say(ws, "play jazz")
        call = await col.wait_for("tool-input-available")
        assert call["toolName"] == "change_bgm"
        assert call["providerMetadata"] == {"audiocore": {"clientExecutes": True}}
        result = {"playing": "jazz", "volume": 0.4}
        await ws.send(
            json.dumps({"type": "tool_result", "toolCallId": call["toolCallId"], "output": result})
        )
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    call = next(m for _, m in col.messages if m["type"] == "tool-input-available")
    (output,) = [e["item"] for e in received(endpoint, "conversation.item.create")][1:]
    assert output["call_id"] == call["toolCallId"]
    assert json.loads(output["output"]) == {"playing": "jazz", "volume": 0.4}
    assert said(col).startswith("change_bgm returned") and not endpoint.records[0].errors


def test_an_image_goes_with_the_turn_as_an_input_image(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    image = base64.b64encode(b"\xff\xd8\xff" + b"\x00" * 64).decode()

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await ws.send(json.dumps({"type": "image", "mediaType": "image/jpeg", "data": image}))
        await say(ws, "what do you see")
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    items = [e["item"] for e in received(endpoint, "conversation.item.create")]
    assert items == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_image", "image_url": f"data:image/jpeg;base64,{image}"}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "what do you see"}],
        },
    ]
    assert said(col) == "You said: what do you see" and not endpoint.records[0].errors


def test_the_openai_path_remembers_and_is_told_at_connect(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """user_memory runs on this path unchanged; the next session's
    session.update carries the fact in its instructions."""
    key = "openai-user-key-0123456789"

    async def scenario() -> list[Collector]:
        cols = []
        for text in (
            'call user_memory {"action": "remember", "text": "my tea has no sugar"}',
            'call user_memory {"action": "recall", "query": "tea"}',
        ):
            ws, col = await open_session(openai_server, endpoint, userKey=key)
            await say(ws, text)
            await col.wait_for("finish")
            await col.close()
            cols.append(col)
        return cols

    told, asked = asyncio.run(scenario())

    def output(col: Collector) -> dict[str, Any]:
        return next(m["output"] for _, m in col.messages if m["type"] == "tool-output-available")

    fact = output(told)["remembered"]
    assert [(m["id"], m["text"]) for m in output(asked)["memories"]] == [
        (fact["id"], "my tea has no sugar")
    ]
    first, second = endpoint.records[0].updates[0], endpoint.records[-1].updates[0]
    assert f"[{fact['id']}] my tea has no sugar" in second["instructions"]
    assert "my tea has no sugar" not in first["instructions"]


def test_a_background_tasks_outcome_is_told_on_the_openai_path(
    endpoint: LocalOpenAIRealtime, tmp_path: Path
) -> None:
    """start_task answers at once; the task runs on, and its outcome is
    handed to the model as a turn of its own when the line is free."""
    objective = "sum the amount column of sales.csv"

    async def scenario(url: str) -> Collector:
        ws, col = await open_session(url, endpoint)
        await say(ws, f"start a task to {objective}")
        await col.wait_for("finish")
        await col.wait_for("finish", count=2, timeout=30)  # the outcome, told
        await col.close()
        return col

    settings = openai_settings(endpoint, tmp_path / "data", task_offline_delay_s=0.0)
    with serve_ws(settings) as url:
        col = asyncio.run(scenario(url))
    started = next(m for _, m in col.messages if m["type"] == "tool-output-available")["output"]
    told = said(col, 1)
    assert told.startswith(f"You said: [background task {started['taskId']} completed]")
    texts = [
        p["text"]
        for e in received(endpoint, "conversation.item.create")
        if e["item"]["type"] == "message"
        for p in e["item"]["content"]
    ]
    assert texts[0] == f"start a task to {objective}" and objective in texts[1]
    assert not errors(col) and not endpoint.records[0].errors


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize("refuse_with", ["http", "close"])
def test_a_refused_key_is_a_clear_error_without_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refuse_with: str
) -> None:
    config = EndpointConfig(refuse_with=refuse_with)
    with LocalOpenAIRealtime(config, cert_dir=tmp_path / "cert") as endpoint:
        wrong = "sk-not-the-key-0123456789"
        use_openai_key(monkeypatch, wrong)

        async def scenario(url: str) -> Collector:
            ws, col, _ = await connect(url, START_F32)
            await say(ws, "hello")
            await col.task  # the server closes the socket
            assert ws.close_code == 1011
            return col

        with serve_ws(openai_settings(endpoint, tmp_path / "data")) as url:
            col = asyncio.run(asyncio.wait_for(scenario(url), 30))
    (error,) = errors(col)
    expected = {
        "http": "the model service refused the connection: HTTP 401",
        "close": "the model service closed the live session: 3000 "
        "invalid_request_error.invalid_api_key",
    }[refuse_with]
    assert error.startswith(expected), error
    assert wrong not in json.dumps(col.messages)


def test_a_rate_limit_is_an_error_with_the_reason_and_the_next_turn_works(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        endpoint.rate_limited_answers = 1
        await say(ws, "hello")
        await col.wait_for("error")
        await say(ws, "hello again")
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    (error,) = errors(col)
    assert error.startswith("model error rate_limit_exceeded: Rate limit reached for requests")
    assert said(col) == "You said: hello again"
    # The failed answer never started a turn: the error alone, then the next turn.
    assert col.types()[:3] == ["data-session", "error", "start"]


def test_the_endpoint_dying_mid_turn_ends_the_socket(
    openai_server: str, endpoint: LocalOpenAIRealtime, speech_48k
) -> None:
    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint, turnDetection="manual")
        endpoint.drop_next_answer = True
        await ws.send(json.dumps({"type": "activity_start"}))
        await stream_realtime(ws, speech_48k, RATE)
        await ws.send(json.dumps({"type": "activity_end"}))
        await col.task  # the model is gone: the server ends the socket
        assert ws.close_code == 1011
        return col

    col = asyncio.run(asyncio.wait_for(scenario(), 40))
    (error,) = errors(col)
    assert error.startswith("the model service closed the live session: 1006"), error
    kinds = col.types()
    assert kinds[-1] == "error" and "data-interrupted" in kinds  # the turn ended first


def test_session_expired_ends_the_socket_and_the_next_one_replays_the_history(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """At the service's time limit (error session_expired, close 1001) the
    socket ends with the service's reason; the session is kept, and the
    client's next socket opens a new realtime session seeded with the
    history as text items, as OpenAI documents."""

    async def scenario() -> tuple[Collector, Collector]:
        ws, col = await open_session(openai_server, endpoint)
        session_id = next(m for _, m in col.messages if m["type"] == "data-session")["data"]
        await say(ws, "remember this")
        await col.wait_for("finish")
        endpoint.expire_sessions()
        await col.task
        assert ws.close_code == 1011
        ws, again = await open_session(openai_server, endpoint, sessionId=session_id["sessionId"])
        await say(ws, "are you back?")
        await again.wait_for("finish")
        await again.close()
        return col, again

    col, again = asyncio.run(asyncio.wait_for(scenario(), 40))
    (error,) = errors(col)
    assert error.startswith(
        "the model service ended the live session: session_expired: Your session hit the "
        "maximum duration of 60 minutes."
    )
    assert not errors(again) and said(again) == "You said: are you back?"
    first, second = endpoint.records
    assert first.errors[-1]["code"] == "session_expired"
    replayed = [e["item"] for e in second.received if e["type"] == "conversation.item.create"]
    assert replayed[:2] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
        if role == "user"
        else {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": t}],
        }
        for role, t in (("user", "remember this"), ("assistant", "You said: remember this"))
    ]
    assert not second.errors


# ---------------------------------------------------------------- python -m server


def test_python_m_server_runs_the_openai_path(
    endpoint: LocalOpenAIRealtime, tmp_path: Path
) -> None:
    """Exactly what a user runs, with the endpoint's key and CA."""
    port = free_port()
    env = {**clean_env(), "OPENAI_API_KEY": endpoint.api_key, "NO_PROXY": "127.0.0.1,localhost"}
    command = [
        sys.executable, "-m", "server", "--port", str(port), "--data-dir", str(tmp_path),
        "--model", f"openai:{MODEL}", "--openai-base-url", endpoint.base_url,
        "--openai-ca-file", str(endpoint.ca_file), "--voice", "Marin",
    ]  # fmt: skip
    proc = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    try:
        health = None
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    health = json.loads(r.read())
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                threading.Event().wait(0.1)  # polling for the port, bounded
        assert health == {"status": "ok", "model": MODEL, "connections": 0, "liveRuns": 0}

        async def scenario() -> Collector:
            ws, col = await open_session(f"ws://127.0.0.1:{port}/ws", endpoint)
            await say(ws, "hello")
            await col.wait_for("finish")
            await col.close()
            return col

        col = asyncio.run(scenario())
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=10)
    assert said(col) == "You said: hello"
    assert endpoint.records[0].session["audio"]["output"]["voice"] == "marin"
    assert endpoint.api_key not in stderr  # the key is never logged


def test_python_m_server_refuses_the_openai_path_without_a_key(tmp_path: Path) -> None:
    env = {k: v for k, v in clean_env().items() if k != "OPENAI_API_KEY"}
    command = [sys.executable, "-m", "server", "--data-dir", str(tmp_path), "--model", "openai:x"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--model openai:x: expected OPENAI_API_KEY" in done.stderr
