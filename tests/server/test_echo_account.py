"""The soak's measuring tool: ``account_samples`` traces every received echo
sample to the exact echo, so losses, duplicates and made-up audio are
counted, and an exact stream passes (benchmarks/bench_server_client.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_server_client import (  # noqa: E402
    OUT_FRAME,
    account_samples,
    exact_echo,
    watermarked,
)

SEED = 20261202


@pytest.fixture(scope="module")
def echo() -> bytes:
    """A watermarked turn's exact echo, padded to whole frames as the server sends it:
    a short tone burst stands in for speech, with silence around it."""
    t = np.arange(48_000 * 3 // 4) / 48_000
    speech = np.where((t > 0.2) & (t < 0.5), 0.5 * np.sin(2 * np.pi * 220 * t), 0.0)
    out = exact_echo(watermarked(speech.astype(np.float32), 3, 7))
    return out + bytes(-len(out) % (2 * OUT_FRAME))


def frames(audio: bytes) -> list[bytes]:
    step = 2 * OUT_FRAME
    return [audio[i : i + step] for i in range(0, len(audio), step)]


def test_exact_stream_passes(echo):
    account = account_samples(echo, echo)
    assert account.exact
    assert (account.expected, account.received) == (len(echo) // 2, len(echo) // 2)


def test_exact_stream_in_odd_pieces_passes(echo):
    # The slow path (an index of the echo) on a stream that is exact after all.
    rng = np.random.default_rng(SEED)
    cuts = sorted(rng.choice(np.arange(1, len(echo) // 2), 40, replace=False))
    pieces = [echo[2 * a : 2 * b] for a, b in zip([0, *cuts], [*cuts, len(echo) // 2], strict=True)]
    assert account_samples(b"".join(pieces), echo).exact


@pytest.mark.parametrize("frame", [0, 3, 11, -1])
def test_a_lost_frame_is_counted(echo, frame):
    parts = frames(echo)
    del parts[frame]
    account = account_samples(b"".join(parts), echo)
    assert (account.lost, account.duplicated, account.foreign) == (OUT_FRAME, 0, 0)


@pytest.mark.parametrize("frame", [0, 5, 11, -1])
def test_a_duplicated_frame_is_counted(echo, frame):
    parts = frames(echo)
    parts.insert(frame % len(parts) + 1, parts[frame])
    account = account_samples(b"".join(parts), echo)
    assert (account.lost, account.duplicated, account.foreign) == (0, OUT_FRAME, 0)


@pytest.mark.parametrize("lost, repeated", [(1, 1), (37, 5), (481, 960)])
def test_single_samples_lost_and_repeated(echo, lost, repeated):
    # Not whole frames: a sample-level slip in one place, a repeat in another.
    x = np.frombuffer(echo, "<i2")
    a, b = 5_000, 12_000
    stream = np.concatenate([x[:a], x[a + lost : b], x[b - repeated :]])
    account = account_samples(stream.tobytes(), echo)
    assert (account.lost, account.duplicated, account.foreign) == (lost, repeated, 0)


def test_concealment_silence_is_foreign(echo):
    parts = frames(echo)
    parts.insert(4, bytes(2 * OUT_FRAME))  # a stall covered with silence
    account = account_samples(b"".join(parts), echo)
    assert (account.lost, account.duplicated, account.foreign) == (0, 0, OUT_FRAME)


def test_another_turns_audio_is_foreign_and_the_gap_lost(echo):
    # The same speech with another turn's watermark: no window of it matches.
    t = np.arange(48_000 * 3 // 4) / 48_000
    speech = np.where((t > 0.2) & (t < 0.5), 0.5 * np.sin(2 * np.pi * 220 * t), 0.0)
    other = exact_echo(watermarked(speech.astype(np.float32), 3, 8))
    parts = frames(echo)
    parts[6] = other[12 * OUT_FRAME : 14 * OUT_FRAME]
    account = account_samples(b"".join(parts), echo)
    assert (account.lost, account.duplicated, account.foreign) == (OUT_FRAME, 0, OUT_FRAME)


def test_nothing_received_is_all_lost(echo):
    account = account_samples(b"", echo)
    assert (account.lost, account.received) == (len(echo) // 2, 0)


def test_the_watermark_names_every_place_in_the_echo(echo):
    # What the tracing rests on: 8 samples of the echo occur once in it,
    # even across the silence around the "speech" (but the padding).
    x = np.frombuffer(echo, "<i2")[:-OUT_FRAME]
    windows = {x[i : i + 8].tobytes() for i in range(len(x) - 7)}
    assert len(windows) == len(x) - 7
