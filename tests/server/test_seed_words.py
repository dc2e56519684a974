"""``/live``: the user's words as a text part, in the seed's shape.

The seed's server streams the input transcription as ``text-start`` /
``text-delta`` / ``text-end`` with the id ``<messageId>_input_text`` inside the
message it is sending, and its client renders every text part; ours does the
same on ``/live`` (``audiocore_server/turns/seed.py``). On ``/ws`` only the transient
``data-transcript`` comes (our transport builds the user message from it).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
from google.adk.events import Event
from google.genai import types
from server_helpers import receive_until, start
from starlette.testclient import TestClient
from test_seed_dialect import SeedStream, send

from audiocore_server.turns.seed import SeedTurnTranslator
from audiocore_server.wire import chunks

RATE = 16_000


def tone(seconds: float) -> bytes:
    t = np.arange(int(seconds * RATE)) / RATE
    return np.rint(0.3 * 32767 * np.sin(2 * np.pi * 300 * t)).astype("<i2").tobytes()


def speak(ws: Any, pcm: bytes) -> None:
    """The seed client's microphone: audio_chunk messages, then stop."""
    for i in range(0, len(pcm), 640):
        chunk = base64.b64encode(pcm[i : i + 640]).decode()
        send(ws, {"type": "audio_chunk", "chunk": chunk, "sampleRate": RATE, "channels": 1})
    send(ws, {"type": "audio_control", "action": "stop"})


def words_part(turn: list[dict[str, Any]], message_id: str) -> list[dict[str, Any]]:
    part_id = f"{message_id}_input_text"
    return [c for c in turn if c.get("id") == part_id]


def started(turn: list[dict[str, Any]]) -> str:
    """The turn's message id (transient parts such as ``data-speech`` may
    come before its ``start``)."""
    return next(c for c in turn if c["type"] == "start")["messageId"]


def test_a_spoken_turn_carries_the_words_heard_as_a_text_part(client: TestClient) -> None:
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        speak(ws, tone(0.5))
        turn = stream.read()
    message_id = started(turn)
    heard = next(c for c in turn if c["type"] == "data-transcript")["data"]
    assert heard["final"] and "8000 samples" in heard["text"]
    words = words_part(turn, message_id)
    part_id = f"{message_id}_input_text"
    assert words == [
        {"type": "text-start", "id": part_id},
        {"type": "text-delta", "id": part_id, "delta": heard["text"]},
        {"type": "text-end", "id": part_id},
    ]
    kinds = [c["type"] for c in turn]
    # The user's words come first, closed before the agent's words begin.
    assert turn.index(words[-1]) < kinds.index("text-start", turn.index(words[-1]))
    agents = [c for c in turn if c["type"] == "text-delta" and c["id"] != part_id]
    assert agents  # the agent answered in a part of its own
    assert kinds[-1] == "finish"


def test_a_typed_turn_has_no_words_part(client: TestClient) -> None:
    """The seed's client already holds a typed message: nothing is repeated."""
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        send(
            ws,
            {
                "type": "message",
                "messages": [
                    {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
                ],
            },
        )
        turn = stream.read()
    assert words_part(turn, started(turn)) == []


def test_on_ws_only_the_transient_transcript(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        ws.send_text(json.dumps({"type": "activity_start"}))
        ws.send_bytes(tone(0.5))
        ws.send_text(json.dumps({"type": "activity_end"}))
        turn = receive_until(ws, "finish")
    assert any(c["type"] == "data-transcript" for c in turn)
    assert words_part(turn, started(turn)) == []


def _event(**fields: Any) -> Event:
    return Event(author=fields.pop("author", "voice_agent"), **fields)


def test_partial_words_stream_as_deltas_and_the_aggregate_is_not_repeated() -> None:
    """Gemini sends the words in pieces, then the whole: the pieces are the
    deltas; a turn that ends with the part open closes it before finish."""
    t = SeedTurnTranslator()
    out = t.translate(
        _event(author="user", input_transcription=types.Transcription(text="what "), partial=True)
    )
    out += t.translate(
        _event(author="user", input_transcription=types.Transcription(text="time"), partial=True)
    )
    out += t.translate(
        _event(
            author="user", input_transcription=types.Transcription(text="what time", finished=True)
        )
    )
    out += t.translate(
        _event(author="user", input_transcription=types.Transcription(text="again"), partial=True)
    )
    out += t.translate(_event(turn_complete=True))
    part_id = f"{out[0].message_id}_input_text"
    words = [i for i in out if getattr(i, "part_id", None) == part_id]
    assert [(type(i).__name__, getattr(i, "delta", None)) for i in words] == [
        ("TextStart", None),
        ("TextDelta", "what "),
        ("TextDelta", "time"),
        ("TextEnd", None),
        ("TextStart", None),
        ("TextDelta", "again"),
        ("TextEnd", None),
    ]
    kinds = [i.type for i in out if isinstance(i, chunks.Chunk)]
    assert kinds[-2:] == ["text-end", "finish"]
