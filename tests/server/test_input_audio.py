"""``InputAudio`` (audiocore_server/audio/conversion.py) with a ``clean``
callable, as the server's echo canceller runs on it: the chunks carry
exactly the cleaned stream, in order, however the client's frames are cut
and whether or not the voice cut sends early; a callable that returns a
different length is an error, never a shifted stream."""

from __future__ import annotations

import numpy as np
import pytest

from audiocore_server.audio.conversion import InputAudio
from audiocore_server.wire.protocol import InputFormat


def negated(pcm: bytes) -> bytes:
    """A stand-in canceller: every sample negated (its output differs from
    its input everywhere, so a chunk that skipped it shows)."""
    return (-np.frombuffer(pcm, "<i2").astype(np.int32)).clip(-32768, 32767).astype("<i2").tobytes()


def stream(rng: np.random.Generator, seconds: float) -> bytes:
    samples = rng.integers(-20000, 20000, round(16_000 * seconds), dtype=np.int16)
    return samples.astype("<i2").tobytes()


@pytest.mark.parametrize("with_cut", [False, True])
def test_the_chunks_are_the_cleaned_stream_however_the_frames_are_cut(with_cut: bool) -> None:
    rng = np.random.default_rng(3)
    audio = stream(rng, 1.0)
    converter = InputAudio(InputFormat(16_000, "s16"), out_rate=16_000, chunk_ms=50, clean=negated)
    cuts = iter(rng.integers(0, 2, 10_000).astype(bool))
    chunks: list[bytes] = []
    at = 0
    while at < len(audio):
        size = 2 * int(rng.integers(1, 700))
        frame = audio[at : at + size]
        at += size
        chunks += converter.process(frame, (lambda _: bool(next(cuts))) if with_cut else None)
    chunks += converter.flush()
    assert b"".join(chunks) == negated(audio)
    if not with_cut:
        assert all(len(c) == 1600 for c in chunks[:-1])


def test_a_resampled_stream_is_cleaned_to_its_tail() -> None:
    seen: list[int] = []

    def counting(pcm: bytes) -> bytes:
        seen.append(len(pcm))
        return pcm

    audio = np.sin(np.arange(48_000) * 0.05).astype(np.float32).tobytes()
    converter = InputAudio(InputFormat(48_000, "f32"), out_rate=16_000, chunk_ms=50, clean=counting)
    chunks = [c for i in range(0, len(audio), 3840) for c in converter.process(audio[i : i + 3840])]
    out = b"".join(chunks + converter.flush())
    assert sum(seen) == len(out) == 2 * 16_000


@pytest.mark.parametrize("change", [-2, 2, -640])
def test_a_clean_that_changes_the_length_is_an_error(change: int) -> None:
    def wrong(pcm: bytes) -> bytes:
        return pcm[:change] if change < 0 else pcm + bytes(change)

    converter = InputAudio(InputFormat(16_000, "s16"), out_rate=16_000, chunk_ms=50, clean=wrong)
    with pytest.raises(ValueError, match="clean returned"):
        converter.process(bytes(640))
    with pytest.raises(ValueError, match="clean returned"):
        converter.process(bytes(640), lambda _: True)
