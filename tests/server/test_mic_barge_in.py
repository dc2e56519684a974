"""The microphone's path on a barge-in (``live/mic.py``): the user's voice
over an answer reaches the model at once, and the turn timer hears of it;
and what the server's barge-in latency metric reads (``ops/turn_timing.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from test_parts import S16_16K, Clock, _drain, _sine

import audiocore
from audiocore_server.live.mic import MicPath
from audiocore_server.live.request_queue import BoundedLiveRequestQueue
from audiocore_server.wire import protocol


def test_mic_path_sends_the_users_voice_over_an_answer_at_once() -> None:
    """Barge-in: the first voiced frame while an answer plays goes to the
    model with what was waiting, not when its 50 ms chunk fills; it is told
    once, and the stream is the same audio, cut otherwise."""
    clock, queue, heard = Clock(), BoundedLiveRequestQueue(100), []
    ends_at = [clock.now + 5.0]  # an answer plays for 5 s
    mic = MicPath(
        queue,
        model_rate=16_000,
        chunk_ms=50,
        report=print,
        playback_ends_at=lambda: ends_at[0],
        on_voice=heard.append,
        clock=clock,
    )
    quiet = bytes(640)  # 20 ms of 16 kHz silence
    loud = (_sine(0.02, 16_000, 0.3) * 32767).astype("<i2").tobytes()
    stream = [quiet, quiet, quiet, quiet, loud, loud, loud, quiet]
    sizes = []
    for frame in stream:
        mic.audio(protocol.Audio(frame, S16_16K))
        sizes.append([len(r.blob.data) for r in _drain(queue)])
        clock.now += 0.02
    # Frames wait for a chunk (1600 bytes); the voice cuts: the 30 ms
    # waiting, then the voiced frame alone.
    assert sizes[:5] == [[], [], [1600], [], [960, 640]]
    assert heard == [pytest.approx(100.0 + 4 * 0.02)]
    # The voice goes on: whole chunks again, counted from the cut.
    assert sizes[5:] == [[], [], [1600]]
    assert len(heard) == 1

    # Voice with no answer playing: chunks as ever, nothing told.
    ends_at[0] = 0.0
    clock.now += 2.0  # the user's voice is over
    for frame in (quiet, loud):
        mic.audio(protocol.Audio(frame, S16_16K))
    assert [len(r.blob.data) for r in _drain(queue)] == [1600]
    assert len(heard) == 1


@pytest.mark.parametrize("echo_rate", [16_000, 8_000])
def test_mic_path_cleans_each_frame_before_the_voice_cut(echo_rate: int) -> None:
    """With the server's echo canceller the voice cut judges each frame
    cleaned: a loud frame that is all echo does not cut, the user's voice
    over the answer does, at once. 8 kHz μ-law in, as a phone's. A
    canceller at the model's 16 kHz is given every frame's converted audio
    in order, the resampler's tail too, and what reaches the model is
    exactly what it gave back; one at the line's 8 kHz (as a phone's runs)
    is given every frame before the conversion, and what reaches the model
    is exactly that, resampled."""
    clock, queue, heard = Clock(), BoundedLiveRequestQueue(100), []
    given: list[bytes] = []
    cleaned: list[bytes] = []

    class Echo:
        """Takes the answer's echo (a frame's first byte 0x01) out: silence."""

        echo = False
        rate = echo_rate

        def cancel(self, pcm: bytes) -> bytes:
            given.append(pcm)
            out = bytes(len(pcm)) if self.echo else bytes(pcm)
            cleaned.append(out)
            return out

    echo = Echo()
    mic = MicPath(
        queue,
        model_rate=16_000,
        chunk_ms=50,
        report=print,
        echo=echo,  # type: ignore[arg-type]
        playback_ends_at=lambda: clock.now + 5.0,
        on_voice=heard.append,
        clock=clock,
    )
    ulaw = protocol.InputFormat(8000, "ulaw", 1)
    loud = audiocore.pcm16_to_ulaw((_sine(0.02, 8000, 0.3) * 32767).astype("<i2").tobytes())
    quiet = b"\xff" * 160
    sent: list[list[bytes]] = []
    for frame, is_echo in [(quiet, False), (loud, True), (loud, False), (loud, False)]:
        echo.echo = is_echo
        mic.audio(protocol.Audio(frame, ulaw))
        sent.append([r.blob.data for r in _drain(queue)])
        clock.now += 0.02
    assert heard == [pytest.approx(100.0 + 2 * 0.02)]  # the voice, not the echo
    # What the model gets of each frame: what the canceller gave back, at
    # 8 kHz resampled as the server does.
    by_hand = audiocore.Resampler(8000, 16_000, input="s16", output="s16")
    model = cleaned if echo_rate == 16_000 else [bytes(by_hand.process(c)) for c in cleaned]
    # The echo's frame waited for a chunk with the first; the voice cut:
    # what waited, then the voiced frame alone.
    assert sent[:2] == [[], []]
    assert sent[2] == [b"".join(model[:2]), model[2]]
    mic.flush()
    sent.append([r.blob.data for r in _drain(queue)])
    if echo_rate == 16_000:
        assert len(given) == 5  # four frames and the resampler's tail
        assert sum(map(len, given)) == 4 * 640  # 8 kHz → 16 kHz: nothing lost, nothing made up
        assert b"".join(b"".join(chunks) for chunks in sent) == b"".join(cleaned)
    else:
        assert [len(g) for g in given] == [320] * 4  # four frames of PCM16 at 8 kHz
        tail = bytes(by_hand.flush())
        assert b"".join(b"".join(chunks) for chunks in sent) == b"".join(model) + tail


def test_a_cut_stream_is_the_same_audio() -> None:
    """The cut changes where chunks end, never the audio: 8 kHz μ-law in,
    as a phone call's, with and without an answer playing."""
    rng = np.random.default_rng(37)
    codes = [bytes(rng.integers(0, 256, 160, dtype=np.uint8)) for _ in range(6)]
    quiet = b"\xff" * 160
    frames = [quiet, quiet, quiet, *codes, quiet, quiet]
    ulaw = protocol.InputFormat(8000, "ulaw", 1)
    streams = []
    for ends_at in (0.0, 1e9):
        clock, queue = Clock(), BoundedLiveRequestQueue(100)
        mic = MicPath(
            queue, model_rate=16_000, chunk_ms=50, report=print,
            playback_ends_at=lambda e=ends_at: e, clock=clock,
        )  # fmt: skip
        for frame in frames:
            mic.audio(protocol.Audio(frame, ulaw))
            clock.now += 0.02
        mic.flush()
        streams.append([r.blob.data for r in _drain(queue)])
    whole, cut = streams
    assert len(cut) > len(whole)
    assert b"".join(cut) == b"".join(whole)
