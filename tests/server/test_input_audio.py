"""``InputAudio`` (audiocore_server/audio/conversion.py) with a ``clean``
callable, as the server's echo canceller runs on it: the chunks carry
exactly the cleaned stream, in order, however the client's frames are cut
and whether or not the voice cut sends early, cleaned after the conversion
or, at a phone line's lower rate, before it; a callable that returns a
different length is an error, never a shifted stream."""

from __future__ import annotations

import numpy as np
import pytest

import audiocore
from audiocore_server.audio.conversion import InputAudio
from audiocore_server.audio.echo import echo_rate
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


def test_a_line_is_cleaned_at_its_own_rate_before_the_conversion() -> None:
    # A phone line's 8 kHz μ-law with the canceller at 8 kHz: the chunks
    # carry the cleaned line resampled to 16 kHz, exactly, frame by frame.
    rng = np.random.default_rng(4)
    line = rng.integers(0, 256, 8_000, dtype=np.uint8).tobytes()  # 1 s of codes
    seen: list[int] = []

    def counting_negated(pcm: bytes) -> bytes:
        seen.append(len(pcm))
        return negated(pcm)

    fmt = InputFormat(8_000, "ulaw", 1)
    converter = InputAudio(
        fmt, out_rate=16_000, chunk_ms=50, clean=counting_negated, clean_rate=8_000
    )
    chunks = [c for i in range(0, len(line), 160) for c in converter.process(line[i : i + 160])]
    out = b"".join(chunks + converter.flush())
    assert seen == [320] * 50  # each 20 ms frame, as PCM16 at 8 kHz
    by_hand = audiocore.Resampler(8_000, 16_000, input="s16", output="s16")
    expected = bytes(by_hand.process(negated(audiocore.ulaw_to_pcm16(line)))) + bytes(
        by_hand.flush()
    )
    assert out == expected


@pytest.mark.parametrize(("input_rate", "clean_rate"), [(8_000, 24_000), (48_000, 8_000)])
def test_a_clean_at_neither_rate_is_an_error(input_rate: int, clean_rate: int) -> None:
    with pytest.raises(ValueError, match=f"clean runs at {clean_rate} Hz"):
        InputAudio(
            InputFormat(input_rate, "s16"),
            out_rate=16_000,
            chunk_ms=50,
            clean=negated,
            clean_rate=clean_rate,
        )


@pytest.mark.parametrize(
    ("input_rate", "model_rate", "expected"),
    [(8_000, 16_000, 8_000), (16_000, 16_000, 16_000), (48_000, 16_000, 16_000),
     (11_025, 16_000, 16_000), (8_000, 24_000, 8_000), (16_000, 24_000, 16_000)],
)  # fmt: skip
def test_the_canceller_runs_at_the_lower_rate_it_has(
    input_rate: int, model_rate: int, expected: int
) -> None:
    assert echo_rate(input_rate, model_rate) == expected
