"""End to end on the OpenAI Realtime path — turns, audio and interruptions: real
uvicorn, ADK's runner, our ``OpenAIRealtime`` model and the ``openai``
package's realtime client over TLS, against the local endpoint
(tests/openai_realtime), which validates every event it gets and records
them. Tools are in test_openai_tools.py, failures and ``python -m server``
in test_openai_failures.py.

The browser side is a real WebSocket client streaming 48 kHz float32 in
20 ms frames at real-time pace, as the demo page does. Tests synchronise on
what the client and the endpoint have seen, never on sleeps.

What every model must do (typed and spoken turns, barge-in, tools, images,
memory, a refused key, the session's end) is test_provider_contract.py's,
run on this path too; here is what only the OpenAI path does.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websockets
from live_helpers import FRAME_24K, errors, push_to_talk, said, say, spy_on_played_seconds
from openai_helpers import (
    keyed_endpoint,
    open_session,
    openai_endpoint,  # noqa: F401 (a fixture)
    openai_settings,
    run_on_server,
    serve_openai,  # noqa: F401 (a fixture)
)
from scipy.signal import resample_poly
from server_helpers import Collector, check_padded, serve_ws, stream_realtime
from test_e2e import RATE, aligned_correlation
from test_run_live import APP, audio_of, blob, create_session, live_url, read_turn, texts

from tests.openai_realtime import EndpointConfig, LocalOpenAIRealtime

# A 300 Hz tone at −10 dBFS for 0.8 s, 16 kHz PCM16: ADK's clients' rate.
TONE_16K = (
    (0.3 * np.sin(2 * np.pi * 300 * np.arange(12_800) / 16_000) * 32767).astype("<i2").tobytes()
)


# ---------------------------------------------------------------- turns


def test_the_mic_goes_to_24_khz_directly_never_through_16_khz(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """A 10 kHz tone survives 48 → 24 kHz (Nyquist 12 kHz); through a 16 kHz
    stage (Nyquist 8 kHz) it would be gone."""
    t = np.arange(int(1.0 * RATE)) / RATE
    tone = (0.3 * np.sin(2 * np.pi * 10_000 * t)).astype(np.float32)

    async def scenario() -> None:
        ws, col = await open_session(openai_server, endpoint, turnDetection="manual")
        await push_to_talk(ws, tone, RATE)
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


def test_push_to_talk_commits_the_bracketed_audio_and_asks_for_the_answer(
    openai_server: str, endpoint: LocalOpenAIRealtime, speech_48k
) -> None:
    speech = speech_48k[: len(speech_48k) // 2 * 2]

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint, turnDetection="manual")
        await push_to_talk(ws, speech, RATE)
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


def test_the_services_speech_started_and_stopped_are_data_speech(
    openai_server: str, endpoint: LocalOpenAIRealtime, speech_48k
) -> None:
    """The service's VAD (``input_audio_buffer.speech_started`` /
    ``speech_stopped``) reaches the client as the model's ``data-speech``
    started, then stopped, before the answer."""
    pause = np.zeros(RATE, np.float32)  # 1 s: the service's VAD hears the end

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await stream_realtime(ws, np.concatenate([speech_48k, pause]), RATE)
        await col.wait_for("finish", timeout=20)
        await col.close()
        return col

    col = asyncio.run(scenario())
    sent = [k for k in endpoint.records[0].sent if k.startswith("input_audio_buffer.")]
    assert sent[:2] == ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped"]
    kinds = [m["type"] for _, m in col.messages]
    speech = [m for _, m in col.messages if m["type"] == "data-speech"]
    assert [(m["data"]["state"], m["data"]["source"]) for m in speech][:2] == [
        ("started", "model"),
        ("stopped", "model"),
    ]
    assert all(m["transient"] is True for m in speech)
    assert kinds.index("data-speech") < kinds.index("text-delta") < kinds.index("finish")
    assert not errors(col)


def test_a_typed_turn_while_an_answer_is_generated_cancels_it_first(
    tmp_path: Path, speech_48k, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One response at a time: the answer being generated is cancelled, then
    the typed turn is answered (the endpoint refuses a second response)."""
    with keyed_endpoint(EndpointConfig(speed=1.0), tmp_path, monkeypatch) as endpoint:

        async def scenario(url: str) -> Collector:
            ws, col = await open_session(url, endpoint, turnDetection="manual")
            await push_to_talk(ws, speech_48k, RATE)
            await col.wait_for("data-pcm", timeout=20)  # the echo is being generated
            await say(ws, "hello")
            await col.wait_for("finish", count=2, timeout=20)
            await col.close()
            return col

        col = run_on_server(endpoint, tmp_path / "data", scenario)
        record = endpoint.records[0]
    kinds = [k for k in record.received_types() if k != "input_audio_buffer.append"]
    assert kinds[-3:] == ["response.cancel", "conversation.item.create", "response.create"]
    assert not record.errors and not errors(col)
    assert said(col) == "You said: hello"


def test_the_users_stop_truncates_at_the_played_position_and_cancels(
    tmp_path: Path, speech_48k, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's Stop (`interrupt`) while the answer is still generated (at
    real time here): the endpoint gets the truncation at what the pacer says
    was played at that moment, then response.cancel; the client's turn ends
    with the cancelled response."""
    positions = spy_on_played_seconds(monkeypatch)
    with keyed_endpoint(EndpointConfig(speed=1.0), tmp_path, monkeypatch) as endpoint:

        async def scenario(url: str) -> Collector:
            ws, col = await open_session(url, endpoint, turnDetection="manual")
            await push_to_talk(ws, speech_48k, RATE)
            await col.wait_for("data-pcm", count=5, timeout=20)
            await ws.send(json.dumps({"type": "interrupt"}))
            await col.wait_for("finish", timeout=20)
            await col.close()
            return col

        col = run_on_server(endpoint, tmp_path / "data", scenario)
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
    with keyed_endpoint(EndpointConfig(speed=1.0), tmp_path, monkeypatch) as endpoint:

        async def scenario(url: str) -> Collector:
            ws, col = await open_session(url, endpoint, turnDetection="manual")
            await push_to_talk(ws, speech_48k, RATE)
            await col.wait_for("data-pcm", count=5, timeout=20)
            await ws.send(json.dumps({"type": "activity_start"}))  # over the answer
            await col.wait_for("data-interrupted", timeout=10)
            await stream_realtime(ws, speech_48k[: RATE // 2], RATE)
            await ws.send(json.dumps({"type": "activity_end"}))
            await col.wait_for("finish", count=2, timeout=20)
            await col.close()
            return col

        col = run_on_server(endpoint, tmp_path / "data", scenario)
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


def test_adks_run_live_surface_runs_on_the_openai_path(
    endpoint: LocalOpenAIRealtime, tmp_path: Path
) -> None:
    """ADK's own /run_live protocol, unchanged: a typed turn and a spoken one
    (16 kHz blobs between activity signals, converted to 24 kHz; /run_live
    takes the server's default turn detection, here push-to-talk)."""
    settings = openai_settings(endpoint, tmp_path / "data", app_name=APP, push_to_talk=True)

    async def scenario(base: str) -> dict[str, list[dict[str, Any]]]:
        create_session(base, "u1", "s1")
        turns = {}
        url = live_url(base, "u1", "s1")
        async with websockets.connect(url, max_size=None) as ws:
            await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": "hi"}]}}))
            turns["typed"] = await read_turn(ws)
            await ws.send(json.dumps({"activity_start": {}}))
            for i in range(0, len(TONE_16K), 640):
                await ws.send(blob(TONE_16K[i : i + 640], 16_000))
            await ws.send(json.dumps({"activity_end": {}}))
            turns["spoken"] = await read_turn(ws)
            await ws.send(json.dumps({"close": True}))
        return turns

    with serve_ws(settings) as url:
        base = url.removesuffix("/ws").replace("ws://", "http://")
        turns = asyncio.run(scenario(base))
    record = endpoint.records[0]
    assert record.session["audio"]["input"]["turn_detection"] is None
    assert "outputTranscription:You said: hi" in "".join(texts(turns["typed"]))
    (utterance,) = record.echoed
    assert audio_of(turns["spoken"]) == utterance  # 24 kHz back, as ADK's events carry it
    assert not record.errors
