"""The server's echo canceller (audiocore_server/audio/echo.py) on a fake
clock: which reference each microphone chunk is paired with (known answers,
through a canceller that hands back its far end), what a barge-in, a pause
of the microphone and a long silence do to the pairing, the mute while it
learns, the pacer telling it what plays; and the ``start`` field that turns
it on (docs/protocol.md), validated, and changing nothing when absent. End
to end through a simulated room: test_self_interruption.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest
from server_helpers import receive_until, start
from starlette.testclient import TestClient
from test_parts import _drain

import audiocore
from audiocore_server.audio import echo as echo_module
from audiocore_server.audio.echo import (
    CONVERGED_S,
    HISTORY_S,
    LEARN_MAX_S,
    LEARN_S,
    MicEcho,
)
from audiocore_server.audio.pacer import OutputPacer
from audiocore_server.live.mic import MicPath
from audiocore_server.live.request_queue import BoundedLiveRequestQueue
from audiocore_server.wire import chunks, fields, protocol

RATE = 16_000
FRAME = 640  # the pacer's 40 ms frames at 16 kHz
CHUNK = 800  # the microphone's 50 ms chunks


class FakeClock:
    def __init__(self, now: float = 10.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FarEnd:
    """A canceller that returns the far end it was paired with."""

    latency = 0
    echo_delay = 0

    def __init__(self, rate: int, **_: Any) -> None:
        self.rate = rate

    def process(self, far: Any, near: Any) -> bytes:
        assert len(far) == len(near) // 2
        return np.asarray(far, np.int16).tobytes()


@pytest.fixture
def pairing(monkeypatch: pytest.MonkeyPatch) -> tuple[MicEcho, FakeClock]:
    monkeypatch.setattr(echo_module.audiocore, "EchoCanceller", FarEnd)
    clock = FakeClock()
    return MicEcho(RATE, played_rate=RATE, clock=clock), clock


def ramp(n: int, first: int = 1) -> np.ndarray:
    return np.arange(first, first + n, dtype=np.int16)


def far_of(echo: MicEcho, clock: FakeClock, arrives: float, n: int = CHUNK) -> np.ndarray:
    """The reference paired with a chunk of ``n`` samples arriving at ``arrives``."""
    clock.now = arrives
    return np.frombuffer(echo.cancel(bytes(2 * n)), np.int16)


def test_a_chunk_is_paired_with_what_played_while_it_came(pairing) -> None:
    echo, clock = pairing
    frames = [ramp(FRAME, 1 + k * FRAME) for k in range(3)]
    for k, frame in enumerate(frames):
        echo.played(frame.tobytes(), 10.0 + k * 0.04)  # back to back from 10.0
    played = np.concatenate(frames)
    got = np.concatenate([far_of(echo, clock, 10.05 + k * 0.05) for k in range(4)])
    expected = np.zeros(4 * CHUNK, np.int16)
    expected[: len(played)] = played  # then silence: nothing more plays
    np.testing.assert_array_equal(got, expected)


def test_the_reference_is_silence_when_nothing_plays(pairing) -> None:
    echo, clock = pairing
    assert not far_of(echo, clock, 10.05).any()
    echo.played(ramp(FRAME).tobytes(), 10.30)  # a turn starts 0.25 s later
    got = np.concatenate([far_of(echo, clock, 10.10 + k * 0.05) for k in range(6)])
    start_at = round(0.25 * RATE)  # 10.30 on the reading, in step from 10.05
    assert not got[:start_at].any()
    np.testing.assert_array_equal(got[start_at : start_at + FRAME], ramp(FRAME))


def test_the_reading_keeps_step_with_the_microphone_not_its_arrivals(pairing) -> None:
    echo, clock = pairing
    frames = [ramp(FRAME, 1 + k * FRAME) for k in range(10)]
    for k, frame in enumerate(frames):
        echo.played(frame.tobytes(), 10.0 + k * 0.04)
    jitter = [0.0, 0.018, -0.004, 0.02, 0.001, -0.01, 0.015]  # client frames of 20 ms, the network
    got = np.concatenate([far_of(echo, clock, 10.05 + k * 0.05 + j) for k, j in enumerate(jitter)])
    np.testing.assert_array_equal(got, np.concatenate(frames)[: len(got)])


def test_client_frames_are_paired_as_chunks_are(pairing) -> None:
    """The microphone's 20 ms frames, cleaned as they come: the reading
    goes on in step with their samples, whatever their arrival jitter."""
    echo, clock = pairing
    frames = [ramp(FRAME, 1 + k * FRAME) for k in range(10)]
    for k, frame in enumerate(frames):
        echo.played(frame.tobytes(), 10.0 + k * 0.04)
    jitter = [0.0, 0.012, -0.006, 0.019, 0.0, -0.009, 0.004, 0.015, -0.002, 0.0]
    mic_frame = RATE // 50
    arrivals = [10.02 + k * 0.02 + j for k, j in enumerate(jitter * 2)]
    got = np.concatenate([far_of(echo, clock, at, mic_frame) for at in arrivals])
    np.testing.assert_array_equal(got, np.concatenate(frames)[: len(got)])


def test_a_barge_in_takes_what_the_client_dropped_from_the_reference(pairing) -> None:
    echo, clock = pairing
    frames = [ramp(FRAME, 1 + k * FRAME) for k in range(5)]  # 10.0 to 10.2, released ahead
    for k, frame in enumerate(frames):
        echo.played(frame.tobytes(), 10.0 + k * 0.04)
    echo.dropped(10.07)  # the client stopped 70 ms in
    got = np.concatenate([far_of(echo, clock, 10.05 + k * 0.05) for k in range(5)])
    heard = round(0.07 * RATE)
    np.testing.assert_array_equal(got[:heard], np.concatenate(frames)[:heard])
    assert not got[heard:].any()
    # The next turn is placed by its own start, not after the dropped audio.
    echo.played(ramp(FRAME, 5000).tobytes(), 10.30)
    got = np.concatenate([far_of(echo, clock, 10.30 + k * 0.05) for k in range(2)])
    np.testing.assert_array_equal(got[: round(0.05 * RATE)], 0)
    np.testing.assert_array_equal(got[round(0.05 * RATE) :][:FRAME], ramp(FRAME, 5000))


def test_a_microphone_back_from_a_pause_is_paired_at_the_clock_again(pairing) -> None:
    echo, clock = pairing
    far_of(echo, clock, 10.05)
    # Two seconds without audio (the microphone off), then a turn and audio.
    echo.played(ramp(FRAME).tobytes(), 12.0)
    got = np.concatenate([far_of(echo, clock, 12.05 + k * 0.05) for k in range(2)])
    np.testing.assert_array_equal(got[:FRAME], ramp(FRAME))


def test_the_reference_held_for_a_silent_microphone_is_bounded(pairing) -> None:
    echo, _ = pairing
    for k in range(2500):  # 100 s of answers, no microphone
        echo.played(ramp(FRAME).tobytes(), 10.0 + k * 0.04)
    assert len(echo._ahead) <= (HISTORY_S + 0.04) * RATE


def test_the_played_audio_is_resampled_to_the_microphones_rate(monkeypatch) -> None:
    monkeypatch.setattr(echo_module.audiocore, "EchoCanceller", FarEnd)
    clock = FakeClock()
    echo = MicEcho(RATE, played_rate=24_000, clock=clock)
    t = np.arange(24_000) / 24_000
    tone = np.rint(8000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16)
    for k in range(25):
        echo.played(tone[k * 960 : (k + 1) * 960].tobytes(), 10.0 + k * 0.04)
    got = np.concatenate([far_of(echo, clock, 10.05 + k * 0.05) for k in range(20)])
    expected = np.frombuffer(audiocore.resample(tone, 24_000, RATE, input="s16"), np.int16)
    n = len(got) - 400  # the resampler's delay at the end of what was given
    assert np.max(np.abs(got[:n].astype(int) - expected[:n])) <= 2


# ---------------------------------------------------------------- the real canceller


def test_echo_through_the_pacer_is_removed_and_the_near_end_kept() -> None:
    """A pure delay and gain on a fake clock: the pacer tells what plays,
    the microphone hears it 60 ms later at half level, then the near end
    alone."""
    clock = FakeClock()
    pacer = OutputPacer(
        sample_rate=RATE, frame_ms=40, lead_s=0.15, max_audio_s=30, max_messages=10, clock=clock
    )
    echo = MicEcho(RATE, played_rate=RATE, clock=clock)
    pacer.listen(echo)
    rng = np.random.default_rng(38)
    far = np.rint(rng.standard_normal(8 * RATE) * 3000).astype(np.int16)
    near = np.rint(rng.standard_normal(2 * RATE) * 1000).astype(np.int16)

    async def drive() -> tuple[np.ndarray, np.ndarray]:
        await pacer.put_audio(far.tobytes(), turn=1)
        pacer.end_turn()
        room = np.zeros(10 * RATE + RATE, np.int16)
        mic_in, out = [], []
        at = 0  # the client plays the frames back to back from the first
        for k in range(10 * RATE // CHUNK):
            clock.now = 10.0 + k * CHUNK / RATE
            while (item := pacer.get_nowait()) is not None:
                if hasattr(item, "pcm"):
                    frame = np.frombuffer(item.pcm, np.int16) // 2
                    room[at + 960 : at + 960 + len(frame)] += frame  # 60 ms, half level
                    at += len(frame)
            span = slice(k * CHUNK, (k + 1) * CHUNK)
            mic = room[span].copy()
            if k * CHUNK >= 8 * RATE:
                mic += near[k * CHUNK - 8 * RATE :][:CHUNK]
            clock.now += CHUNK / RATE  # the chunk arrives as it ends
            mic_in.append(mic)
            out.append(np.frombuffer(echo.cancel(mic.tobytes()), np.int16))
        return np.concatenate(mic_in), np.concatenate(out)

    mic, out = asyncio.run(drive())
    late = slice(4 * RATE, 8 * RATE)  # far end alone, converged
    residual = np.mean(out[late].astype(float) ** 2) + 1.0  # one LSB²: the suppressor may leave 0
    erle = 10 * np.log10(np.mean(mic[late].astype(float) ** 2) / residual)
    assert erle >= 30, f"{erle:.1f} dB"
    latency = echo.canceller.latency
    tail = out[8 * RATE + latency + RATE // 2 :]  # the near end, the echo's tail gone
    kept = near[RATE // 2 : RATE // 2 + len(tail)]
    np.testing.assert_array_equal(tail, kept)  # passed unchanged, ``latency`` later


def test_the_users_voice_over_an_echoing_answer_cuts_at_once_and_nothing_is_lost() -> None:
    """The microphone's path with the real canceller (``live/mic.py``): 20 ms
    frames cleaned as they come, the answer's echo (60 ms late, half level)
    never taken for the user's voice, the user's voice over it sent at once
    (the early barge-in), and the model given exactly the cleaned stream —
    what a canceller fed the same frames gives back, sample for sample."""
    clock = FakeClock()
    echo = MicEcho(RATE, played_rate=RATE, clock=clock)
    twin = MicEcho(RATE, played_rate=RATE, clock=clock)  # the same frames, by hand
    queue, heard = BoundedLiveRequestQueue(1000), []
    mic = MicPath(
        queue, model_rate=RATE, chunk_ms=50, report=print, echo=echo,
        playback_ends_at=lambda: 10.0 + 6.0, on_voice=heard.append, clock=clock,
    )  # fmt: skip
    rng = np.random.default_rng(38)
    far = np.rint(rng.standard_normal(6 * RATE) * 3000).astype(np.int16)
    near = np.rint(rng.standard_normal(RATE) * 2000).astype(np.int16)
    room = np.zeros(6 * RATE, np.int16)
    room[960:] = far[:-960] // 2  # what the microphone hears of the answer
    voice_at = 4 * RATE  # the user speaks 4 s into the answer
    room[voice_at : voice_at + RATE] += near
    mic_frame, released = RATE // 50, 0
    sent, expected = [], []
    for k in range(5 * RATE // mic_frame):
        while released * 0.04 <= k * 0.02 + 0.15:  # the pacer's lead
            frame = far[released * FRAME : (released + 1) * FRAME].tobytes()
            echo.played(frame, 10.0 + released * 0.04)
            twin.played(frame, 10.0 + released * 0.04)
            released += 1
        clock.now = 10.0 + (k + 1) * 0.02  # a frame arrives as it ends
        pcm = room[k * mic_frame : (k + 1) * mic_frame].tobytes()
        mic.audio(protocol.Audio(pcm, protocol.InputFormat(RATE, "s16", 1)))
        sent += [r.blob.data for r in _drain(queue)]
        expected.append(twin.cancel(pcm))
    assert echo.canceller.echo_delay is not None
    # Told once, in the frame where the voice begins (the canceller's
    # latency into it), not before: the echo alone never cut.
    voice_s = voice_at / RATE
    assert len(heard) == 1 and 10.0 + voice_s < heard[0] <= 10.0 + voice_s + 0.04, heard
    mic.flush()  # the short remainder
    sent += [r.blob.data for r in _drain(queue)]
    assert b"".join(sent) == b"".join(expected)


def muted_chunks(seconds: float, mic: bytes, seed: int) -> tuple[MicEcho, list[bool]]:
    """A voiced far end played from the start, and the same 50 ms
    ``mic`` chunk sent for ``seconds``: whether each came back muted."""
    clock = FakeClock()
    echo = MicEcho(RATE, played_rate=RATE, clock=clock)
    far = np.rint(np.random.default_rng(seed).standard_normal(5 * RATE) * 3000).astype(np.int16)
    released, muted = 0, []
    for k in range(round(seconds * RATE) // CHUNK):
        while released * 0.04 <= k * 0.05 + 0.15:  # the pacer's lead
            frame = far[released * FRAME : (released + 1) * FRAME]
            echo.played(frame.tobytes(), 10.0 + released * 0.04)
            released += 1
        clock.now = 10.0 + (k + 1) * CHUNK / RATE
        muted.append(not np.frombuffer(echo.cancel(mic), np.int16).any())
    return echo, muted


def test_the_microphone_is_muted_while_the_canceller_learns_at_most_learn_s() -> None:
    # A voiced far end that never reaches the microphone (a headset): no
    # echo is found, so the mute ends after LEARN_S.
    near = np.rint(np.random.default_rng(2).standard_normal(CHUNK) * 2000).astype(np.int16)
    echo, muted = muted_chunks(3.0, near.tobytes(), seed=1)
    assert echo.canceller.echo_delay is None
    learn_chunks = round(LEARN_S * RATE / CHUNK)
    assert muted == [True] * learn_chunks + [False] * (len(muted) - learn_chunks)


class Learning:
    """A canceller that has found an echo from ``found`` samples on, takes
    26 dB of it out from ``converged`` on (never, when None), and never
    finds its delay: a loud echo in a room it is still learning."""

    latency = 160
    echo_delay = None

    def __init__(self, found: int, converged: int | None) -> None:
        self._found, self._converged = found, converged
        self.seen = 0
        self.echo_found = False

    def process(self, far: Any, near: bytes) -> bytes:
        mic = np.frombuffer(near, np.int16)
        done = self._converged is not None and self.seen >= self._converged
        self.seen += len(mic)
        self.echo_found = self.seen > self._found
        return (mic // 20 if done else mic).tobytes()


@pytest.mark.parametrize(
    ("found_s", "converged_s", "unmuted_s"),
    [
        # Past LEARN_S, until CONVERGED_S of voiced reference holds 20 dB
        # less (then the canceller's latency and the chunk it ends in).
        (0.5, 1.5, 1.5 + CONVERGED_S),
        # Never before LEARN_S (the output's share is bursty): past it, once
        # the chunk that reaches it is muted.
        (0.3, 0.5, LEARN_S + CHUNK / RATE),
        # Never that far: LEARN_MAX_S.
        (0.5, None, LEARN_MAX_S),
        # No echo found within LEARN_S (a headset): LEARN_S.
        (1.2, 1.3, LEARN_S),
    ],
)
def test_a_loud_echo_stays_muted_until_the_canceller_takes_it_out(
    monkeypatch: pytest.MonkeyPatch,
    found_s: float,
    converged_s: float | None,
    unmuted_s: float,
) -> None:
    converged = None if converged_s is None else round(converged_s * RATE)
    canceller = Learning(round(found_s * RATE), converged)
    monkeypatch.setattr(echo_module.audiocore, "EchoCanceller", lambda *_, **__: canceller)
    loud = np.rint(np.random.default_rng(4).standard_normal(CHUNK) * 6000).astype(np.int16)
    _, muted = muted_chunks(4.0, loud.tobytes(), seed=3)
    first = muted.index(False)
    assert muted == [True] * first + [False] * (len(muted) - first)
    # Unmuted at the first chunk past ``unmuted_s`` (and the canceller's
    # latency when it has taken the echo out).
    late = 0 if converged_s is None or found_s > LEARN_S else canceller.latency
    assert first == -(-round(unmuted_s * RATE + late) // CHUNK)


@pytest.mark.parametrize("rate", [RATE, 8_000])  # the model's rate; a phone line's own
def test_a_line_passes_as_it_came_until_the_canceller_finds_an_echo(rate: int) -> None:
    """A phone line (``mute_while_learning=False``): never muted; with no
    echo on it, the caller's voice over an answer passes unchanged, the
    canceller's latency later, however long it talks over it (the canceller
    adapts in that double talk, and keeps its output to itself until it
    has found an echo); with an echo, cancelled."""
    rng = np.random.default_rng(2)
    far = np.rint(rng.standard_normal(4 * rate) * 3000).astype(np.int16)
    caller = np.rint(rng.standard_normal(4 * rate) * 2000).astype(np.int16)
    frame = rate // 50

    def line(mic: np.ndarray) -> tuple[MicEcho, np.ndarray]:
        clock = FakeClock()
        echo = MicEcho(rate, played_rate=rate, mute_while_learning=False, clock=clock)
        out = []
        for k in range(len(mic) // frame):
            if k % 2 == 0:  # the pacer's 40 ms frames, as they play
                echo.played(far[k * frame : (k + 2) * frame].tobytes(), 10.0 + k * 0.02)
            clock.now = 10.0 + (k + 1) * 0.02
            out.append(echo.cancel(mic[k * frame : (k + 1) * frame].tobytes()))
        return echo, np.frombuffer(b"".join(out), np.int16)

    echo, out = line(caller)  # no echo: double talk throughout
    assert echo.canceller.echo_delay is None
    assert not echo.canceller.echo_found
    latency = echo.canceller.latency
    # the canceller's synthesis sums to one: only rounding to PCM16 is left
    passed = out[latency:].astype(int) - caller[: len(out) - latency]
    assert np.max(np.abs(passed)) <= 1

    heard = np.zeros_like(far)
    delay = rate * 6 // 100
    heard[delay:] = far[:-delay] // 2  # the line's echo: 60 ms, half level
    echo, out = line(heard)
    assert echo.canceller.echo_delay is not None
    late = out[3 * rate :].astype(float)
    erle = 10 * np.log10(np.mean(heard[3 * rate :].astype(float) ** 2) / (np.mean(late**2) + 1))
    assert erle >= 20, f"{erle:.1f} dB"


def test_the_pacer_tells_when_each_frame_plays_and_when_the_client_stopped() -> None:
    clock = FakeClock(100.0)
    pacer = OutputPacer(
        sample_rate=24_000, frame_ms=20, lead_s=0.1, max_audio_s=5, max_messages=10, clock=clock
    )
    heard: list[tuple[str, float]] = []

    class Listener:
        def played(self, pcm: bytes, starts_at: float) -> None:
            assert len(pcm) == 960
            heard.append(("played", starts_at))

        def dropped(self, at: float) -> None:
            heard.append(("dropped", at))

    pacer.listen(Listener())

    async def drive() -> None:
        await pacer.put_audio(bytes(960 * 10), turn=1)
        while pacer.get_nowait() is not None:  # the lead leaves at once
            pass
        clock.now = 100.05
        pacer.flush()

    asyncio.run(drive())
    starts = [t for what, t in heard if what == "played"]
    assert starts == pytest.approx([100.0 + 0.02 * k for k in range(len(starts))])
    assert len(starts) == 6  # the first frame and 100 ms of lead
    assert heard[-1] == ("dropped", 100.05)


# ---------------------------------------------------------------- the start field


def decode(**field: Any) -> protocol.Start:
    msg = protocol.decode_text(
        json.dumps({"type": "start", **field}), protocol.InputFormat(), fields.Limits()
    )
    assert isinstance(msg, protocol.Start)
    return msg


def test_echo_cancellation_is_decoded_strictly() -> None:
    assert decode().echo_cancellation == "client"
    assert decode(echoCancellation=None).echo_cancellation == "client"
    assert decode(echoCancellation="client").echo_cancellation == "client"
    assert decode(echoCancellation="server").echo_cancellation == "server"
    for bad in ("SERVER", "browser", "", True, False, 1, [], {}):
        with pytest.raises(
            fields.InputError,
            match=r"^echoCancellation: expected one of \['client', 'server'\], got ",
        ):
            decode(echoCancellation=bad)


def test_the_session_chunk_says_who_cancels_the_echo() -> None:
    chunk = chunks.SessionInfo(
        "id", protocol.InputFormat(), protocol.OutputFormat(), model="offline", resumed=False
    )
    assert chunk.to_json()["data"]["echoCancellation"] == "client"
    server = chunks.SessionInfo(
        "id",
        protocol.InputFormat(),
        protocol.OutputFormat(),
        model="offline",
        resumed=False,
        echo_cancellation="server",
    )
    assert server.to_json()["data"]["echoCancellation"] == "server"


def test_a_bad_echo_cancellation_is_an_error_and_the_start_is_not_taken(
    client: TestClient,
) -> None:
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "start", "echoCancellation": 1}))
        seen = receive_until(ws, "error")
        session = next(m for m in seen if m["type"] == "data-session")
        assert session["data"]["echoCancellation"] == "client"
        assert seen[-1]["errorText"] == (
            "echoCancellation: expected one of ['client', 'server'], got 1"
        )


@pytest.mark.parametrize("field", [{}, {"echoCancellation": "client"}])
def test_without_server_cancellation_the_microphone_is_untouched(
    client: TestClient, field: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No canceller is built; the offline model echoes exactly what was
    sent (test_e2e holds the echo exact to the sample)."""
    built: list[MicEcho] = []
    monkeypatch.setattr(echo_module.MicEcho, "__init__", lambda *a, **k: built.append(a[0]))
    with client.websocket_connect("/ws") as ws:
        assert start(ws, **field)["data"]["echoCancellation"] == "client"
    assert built == []


def test_server_cancellation_builds_one_canceller_at_the_models_rate(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[tuple[int, int]] = []
    init = MicEcho.__init__

    def spy(self: MicEcho, rate: int, *, played_rate: int, **kw: Any) -> None:
        built.append((rate, played_rate))
        init(self, rate, played_rate=played_rate, **kw)

    monkeypatch.setattr(echo_module.MicEcho, "__init__", spy)
    with client.websocket_connect("/ws") as ws:
        session = start(ws, echoCancellation="server", output={"sampleRate": 48000})
        assert session["data"]["echoCancellation"] == "server"
    assert built == [(16_000, 48_000)]
