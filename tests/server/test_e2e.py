"""End to end on real uvicorn at 127.0.0.1: real speech in, the offline model's
echo out, through audiocore, ADK's runner and the SQLite session store.

The client streams espeak-ng speech as 48 kHz float32 in 20 ms binary frames
at real-time pace, as the demo page does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time

import numpy as np
import pytest
import websockets
from scipy.signal import correlate, resample_poly
from server_helpers import Collector, check_padded, stream_realtime

RATE = 48_000
START_F32 = {"type": "start", "input": {"sampleRate": RATE, "format": "f32", "channels": 1}}


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


def to_float(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, "<i2").astype(np.float64) / 32768


def aligned_correlation(echo: np.ndarray, reference: np.ndarray) -> float:
    """Pearson correlation of ``echo`` with the best-aligned slice of ``reference``.

    The lag is found by cross-correlation and refined to a fraction of a sample
    (parabolic peak), since the resamplers in the chain delay by fractions.
    """
    xc = correlate(reference, echo, mode="valid", method="fft")
    k = int(np.argmax(xc))
    frac = 0.0
    if 0 < k < len(xc) - 1:
        a, b, c = xc[k - 1], xc[k], xc[k + 1]
        frac = 0.5 * (a - c) / (a - 2 * b + c)
    seg = reference[max(0, k - 8) : k + len(echo) + 8]
    spectrum = np.fft.rfft(seg)
    freqs = np.fft.rfftfreq(len(seg))
    shifted = np.fft.irfft(spectrum * np.exp(-2j * np.pi * freqs * -frac), len(seg))
    start = k - max(0, k - 8)
    seg = shifted[start : start + len(echo)]
    edge = 64  # the resamplers' ramp-in at the utterance edges
    return float(np.corrcoef(echo[edge:-edge], seg[edge:-edge])[0, 1])


async def connect(url: str, start: dict) -> tuple[object, Collector, dict]:
    ws = await websockets.connect(url, max_size=None)
    await ws.send(json.dumps(start))
    collector = Collector(ws)
    session = await collector.wait_for("data-session")
    assert collector.types()[0] == "data-session"
    return ws, collector, session


def transcript_samples(collector: Collector) -> int:
    text = next(m["data"]["text"] for _, m in collector.messages if m["type"] == "data-transcript")
    assert text.startswith("[offline model: no speech recognition]")
    return int(re.search(r"\((\d+) samples at 16000 Hz\)", text).group(1))


def test_speech_turn_echo_matches_what_was_sent(live_server: str, speech_48k) -> None:
    sent = np.concatenate([silence(0.4), speech_48k, silence(1.2)])

    async def scenario() -> None:
        ws, col, _ = await connect(live_server, START_F32)
        await stream_realtime(ws, sent, RATE)
        finish = await col.wait_for("finish", timeout=15)
        assert finish["finishReason"] == "stop"
        kinds = col.types()
        turn = kinds[kinds.index("start") : kinds.index("finish") + 1]
        assert turn[:5] == ["start", "data-transcript", "text-start", "text-delta", "text-end"]
        assert set(turn[5:-1]) == {"data-pcm"} and turn[-1] == "finish"
        pcm_times = [t for t, m in col.messages if m["type"] == "data-pcm"]
        pcm = col.pcm()
        await col.close()

        # Exactly the utterance the model cut (its description states the count),
        # at 24 kHz; then silence to a whole 40 ms frame.
        n16 = transcript_samples(col)
        echo = check_padded(pcm, n16 * 3 // 2, 960) / 32768
        assert len(echo) > len(speech_48k) // 2  # the whole of the speech
        reference = resample_poly(sent.astype(np.float64), 1, 2)
        assert aligned_correlation(echo, reference) >= 0.99
        # The finish reports what was streamed (every frame the client got)
        # and the model's usage: 25 tokens a second of audio each way.
        frames = sum(1 for _, m in col.messages if m["type"] == "data-pcm")
        assert finish["messageMetadata"] == {
            "model": "offline",
            "usage": {
                "promptTokens": round(n16 / 16_000 * 25),
                "completionTokens": round(n16 * 3 // 2 / 24_000 * 25),
                "totalTokens": round(n16 / 16_000 * 25) + round(n16 * 3 // 2 / 24_000 * 25),
            },
            "audio": {
                "chunks": frames,
                "bytes": len(pcm),
                "sampleRate": 24_000,
                "duration": len(pcm) / 48_000,
            },
            "modelVersion": "offline-1",
        }
        # Paced: delivered over about its own duration, not in one burst.
        duration = len(echo) / 24_000
        assert pcm_times[-1] - pcm_times[0] >= duration - 0.3

    asyncio.run(scenario())


def test_push_to_talk_echo_has_the_exact_sample_count(live_server: str, speech_48k) -> None:
    speech = speech_48k[: len(speech_48k) // 6 * 6]

    async def scenario() -> None:
        ws, col, _ = await connect(live_server, START_F32)
        await ws.send(json.dumps({"type": "activity_start"}))
        await stream_realtime(ws, speech, RATE)
        await ws.send(json.dumps({"type": "activity_end"}))
        await col.wait_for("finish", timeout=15)
        pcm = col.pcm()
        await col.close()
        # 48 kHz in → 16 kHz → 24 kHz out, exactly (then padding to a frame).
        echo = check_padded(pcm, len(speech) // 2, 960) / 32768
        reference = resample_poly(np.concatenate([silence(0.1), speech]).astype(float), 1, 2)
        assert aligned_correlation(echo, reference) >= 0.99

    asyncio.run(scenario())


def test_binary_output_at_the_negotiated_rate(live_server: str, speech_48k) -> None:
    speech = speech_48k[: len(speech_48k) // 6 * 6]
    start = {**START_F32, "output": {"sampleRate": 48000, "binary": True}}

    async def scenario() -> None:
        ws, col, session = await connect(live_server, start)
        assert session["data"]["output"] == {
            "sampleRate": 48000,
            "channels": 1,
            "bitDepth": 16,
            "binary": True,
        }
        await ws.send(json.dumps({"type": "activity_start"}))
        await stream_realtime(ws, speech, RATE)
        await ws.send(json.dumps({"type": "activity_end"}))
        await col.wait_for("finish", timeout=15)
        await col.close()
        assert "data-pcm" not in col.types() and col.binary
        # 24 kHz model audio → 48 kHz, exactly (then padding to a 40 ms frame).
        echo = check_padded(col.pcm(), len(speech), 1920) / 32768
        reference = np.concatenate([silence(0.1), speech]).astype(float)
        assert aligned_correlation(echo, reference) >= 0.99

    asyncio.run(scenario())


def _other_voice(n: int) -> np.ndarray:
    t = np.arange(n) / RATE
    sweep = np.sin(2 * np.pi * (200 * t + 300 * t * t))  # 200 Hz rising 600 Hz/s
    return (0.4 * sweep * np.minimum(1, np.minimum(t, t[::-1]) / 0.02)).astype(np.float32)


def test_two_clients_get_only_their_own_audio(live_server: str, speech_48k) -> None:
    signals = [speech_48k, _other_voice(len(speech_48k))]

    async def one(signal: np.ndarray) -> np.ndarray:
        ws, col, _ = await connect(live_server, START_F32)
        await stream_realtime(ws, np.concatenate([silence(0.3), signal, silence(1.0)]), RATE)
        await col.wait_for("finish", timeout=15)
        await col.close()
        return to_float(col.pcm())

    async def scenario() -> list[np.ndarray]:
        return await asyncio.gather(*(one(s) for s in signals))

    echoes = asyncio.run(scenario())
    refs = [resample_poly(np.concatenate([silence(0.3), s, silence(1.0)]), 1, 2) for s in signals]
    for mine, echo in enumerate(echoes):
        assert aligned_correlation(echo, refs[mine]) >= 0.99
        assert aligned_correlation(echo, refs[1 - mine]) < 0.5


def test_reconnect_sees_earlier_spoken_turn(live_server: str, speech_48k) -> None:
    async def scenario() -> None:
        ws, col, session = await connect(live_server, START_F32)
        await stream_realtime(ws, np.concatenate([speech_48k, silence(1.0)]), RATE)
        await col.wait_for("finish", timeout=15)
        await col.close()
        described = next(m for _, m in col.messages if m["type"] == "data-transcript")
        session_id = session["data"]["sessionId"]

        ws, col, again = await connect(live_server, {**START_F32, "sessionId": session_id})
        await col.close()
        assert again["data"]["resumed"] and again["data"]["sessionId"] == session_id
        history = again["data"]["history"]
        assert {"role": "user", "text": described["data"]["text"]} in history
        assert any(h["role"] == "assistant" and h["text"].startswith("I heard") for h in history)

    asyncio.run(scenario())


def test_client_interrupt_stops_the_audio(live_server: str, speech_48k) -> None:
    async def scenario() -> None:
        ws, col, _ = await connect(live_server, START_F32)
        await stream_realtime(ws, np.concatenate([speech_48k, silence(0.8)]), RATE)
        await col.wait_for("data-pcm", count=5, timeout=15)
        sent_at = time.monotonic()
        await ws.send(json.dumps({"type": "interrupt"}))
        interrupted = await col.wait_for("data-interrupted")
        await col.wait_for("finish")
        await asyncio.sleep(0.3)  # nothing late may arrive
        await col.close()
        assert interrupted["data"]["source"] == "client" and interrupted["data"]["droppedMs"] > 0
        kinds = col.types()
        after = kinds[kinds.index("data-interrupted") :]
        assert "data-pcm" not in after and after[-1] == "finish"
        last_pcm = max(t for t, m in col.messages if m["type"] == "data-pcm")
        assert last_pcm - sent_at < 0.05  # audio stopped at once
        echoed = len(col.pcm()) // 2 / 24_000
        assert echoed < len(speech_48k) / RATE / 2

    asyncio.run(scenario())


def test_speaking_over_the_agent_interrupts_it(live_server: str, speech_48k) -> None:
    async def scenario() -> None:
        ws, col, _ = await connect(live_server, START_F32)
        await stream_realtime(ws, np.concatenate([speech_48k, silence(0.8)]), RATE)
        await col.wait_for("data-pcm", count=5, timeout=15)
        await stream_realtime(ws, speech_48k[: RATE // 2], RATE)  # barge in
        interrupted = await col.wait_for("data-interrupted", timeout=5)
        await col.wait_for("finish")
        await col.close()
        assert interrupted["data"]["source"] == "model"
        kinds = col.types()
        i = kinds.index("data-interrupted")
        assert kinds[i + 1] == "finish"  # the interrupted turn ends there
        assert "data-pcm" not in kinds[i:]

    asyncio.run(scenario())


@pytest.mark.parametrize("frame", [b"\x00" * 7, "not json"])
def test_bad_input_on_a_real_socket(live_server: str, frame) -> None:
    async def scenario() -> None:
        ws, col, _ = await connect(live_server, START_F32)
        await ws.send(frame)
        if isinstance(frame, bytes):
            error = await col.wait_for("error")
            assert "multiple of 4 bytes" in error["errorText"]
            await col.close()
        else:
            await col.task
            assert ws.close_code == 1007

    asyncio.run(scenario())


def test_oversized_frame_is_closed_by_the_server(live_server: str, settings) -> None:
    async def scenario() -> None:
        ws, col, _ = await connect(live_server, START_F32)
        # uvicorn may close before the whole frame is written.
        with contextlib.suppress(websockets.ConnectionClosed):
            await ws.send(b"\x00" * (settings.max_message_bytes + 4))
        await col.task
        assert ws.close_code == 1009

    asyncio.run(scenario())


def test_python_m_server_starts_offline(tmp_path) -> None:
    import os
    import socket
    import subprocess
    import sys
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "server", "--port", str(port), "--data-dir", str(tmp_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Synchronised on the server's own word that it listens, however
        # long a loaded machine takes to import ADK (a bound on polls failed
        # on a busy machine); a server that dies says why.
        assert proc.stderr is not None
        for line in proc.stderr:
            if "Uvicorn running on" in line:
                break
        else:
            raise AssertionError(f"the server exited ({proc.wait()}) before listening")
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30).read()
        assert json.loads(body) == {
            "status": "ok",
            "model": "offline",
            "connections": 0,
            "liveRuns": 0,
        }
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30)
        assert page.status == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=30)  # the few lines logged since: far below a pipe's buffer
