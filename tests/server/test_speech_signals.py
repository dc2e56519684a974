"""Speech started / stopped (the seed's ``SpeechStarted`` / ``SpeechStopped``)
as ``data-speech`` parts on every live surface.

Two sources: the model's voice detection (Gemini's ``voiceActivity``; here the
offline model's energy detector, which tells its onsets and ends the same
way) with automatic turn detection, and the client's ``activity_start`` /
``activity_end`` with manual turns. Real app, real ADK runner, real SQLite.
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

from audiocore_server.turns.events import TurnTranslator
from audiocore_server.wire import chunks

RATE = 16_000
FRAME = 640  # 20 ms of 16 kHz PCM16


def tone(seconds: float, level: float = 0.3) -> bytes:
    t = np.arange(int(seconds * RATE)) / RATE
    ramp = np.minimum(1, np.minimum(t, t[::-1]) / 0.01)
    return np.rint(level * 32767 * ramp * np.sin(2 * np.pi * 330 * t)).astype("<i2").tobytes()


def silence(seconds: float) -> bytes:
    return bytes(2 * int(seconds * RATE))


def send_audio(ws: Any, pcm: bytes) -> None:
    for i in range(0, len(pcm), FRAME):  # as fast as they go: the detector counts samples
        ws.send_bytes(pcm[i : i + FRAME])


def speech_of(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (m["data"]["state"], m["data"]["source"]) for m in messages if m["type"] == "data-speech"
    ]


def test_the_chunk_is_a_transient_data_part() -> None:
    assert chunks.Speech("started", "model").to_json() == {
        "type": "data-speech",
        "data": {"state": "started", "source": "model"},
        "transient": True,
    }


def test_the_translator_tells_voice_activity_without_opening_a_turn() -> None:
    translator = TurnTranslator()

    def activity(kind: types.VoiceActivityType) -> Event:
        return Event(author="model", voice_activity=types.VoiceActivity(voice_activity_type=kind))

    assert translator.translate(activity(types.VoiceActivityType.ACTIVITY_START)) == [
        chunks.Speech("started", "model")
    ]
    assert translator.translate(activity(types.VoiceActivityType.ACTIVITY_END)) == [
        chunks.Speech("stopped", "model")
    ]
    assert translator.translate(activity(types.VoiceActivityType.TYPE_UNSPECIFIED)) == []
    assert not translator.in_turn and translator.message_id is None


def test_ws_voice_detection_tells_started_then_stopped_before_the_answer(
    client: TestClient,
) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws, input={"sampleRate": RATE, "format": "s16"})
        send_audio(ws, silence(0.2) + tone(0.8) + silence(1.0))
        turn = receive_until(ws, "finish")
    assert speech_of(turn) == [("started", "model"), ("stopped", "model")]
    kinds = [m["type"] for m in turn]
    started, stopped = (i for i, k in enumerate(kinds) if k == "data-speech")
    assert started < stopped < kinds.index("data-transcript") < kinds.index("data-pcm")


def test_ws_a_click_too_short_for_a_turn_is_started_and_stopped(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws, input={"sampleRate": RATE, "format": "s16"})
        send_audio(ws, silence(0.2) + tone(0.02) + silence(1.0))
        ws.send_text(json.dumps({"type": "text", "text": "after the click"}))
        seen = receive_until(ws, "finish")
    # Speech began and ended; no spoken turn came of it: the typed one answers.
    assert speech_of(seen) == [("started", "model"), ("stopped", "model")]
    assert not any(m["type"] == "data-transcript" for m in seen)
    assert next(m for m in seen if m["type"] == "text-delta")["delta"].startswith("You said: after")


def test_ws_manual_turns_tell_the_clients_edges(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual", input={"sampleRate": RATE, "format": "s16"})
        ws.send_text(json.dumps({"type": "activity_start"}))
        assert ws.receive_json() == {
            "type": "data-speech",
            "data": {"state": "started", "source": "client"},
            "transient": True,
        }
        send_audio(ws, tone(0.5))
        ws.send_text(json.dumps({"type": "activity_end"}))
        turn = receive_until(ws, "finish")
    # Only the client's edges: the model's detection is off.
    assert speech_of(turn) == [("stopped", "client")]
    assert turn[0]["type"] == "data-speech"
    assert any(m["type"] == "data-transcript" for m in turn)


def test_live_seed_dialect_tells_speech_as_sse_data_parts(client: TestClient) -> None:
    pcm = silence(0.2) + tone(0.6)
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        for i in range(0, len(pcm), FRAME):
            chunk = base64.b64encode(pcm[i : i + FRAME]).decode()
            send(ws, {"type": "audio_chunk", "chunk": chunk, "sampleRate": RATE})
        # The microphone stops: the utterance (and the speech) ends at once.
        send(ws, {"type": "audio_control", "action": "stop"})
        seen = stream.read()
    assert speech_of(seen) == [("started", "model"), ("stopped", "model")]
    kinds = [c["type"] for c in seen]
    assert kinds.index("data-speech") < kinds.index("data-transcript")
