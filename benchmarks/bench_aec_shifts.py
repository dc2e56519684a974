"""Small moves of the echo path between answers: what the voice detector
of the offline model sees of the agent's own echo after the canceller.

    python benchmarks/bench_aec_shifts.py [--answers 21] [--seed 1]
    python benchmarks/bench_aec_shifts.py --smoke   # 3 answers (CI)

The server lays the reference (what the client plays) on a timeline from
the pacer's model, but each new answer starts to play a little away from
where the pacer says: a render quantum, a prebuffer's jitter (0-5 ms), up
to 12 ms from one answer to the next in the end-to-end tests' recorded
runs (docs/audio.md), now and then a larger step (20 ms). This replays that offline, at 16 kHz, as
the server runs the canceller (docs/audio.md, "In the server"): PCM16 in
and out, 50 ms microphone chunks, each paired sample for sample with the
reference over the same span.

The room is tests/server/room_helpers.py's (the one of the end-to-end
tests): a loudspeaker clipping at 0.4 of full scale, 60 ms of bulk delay, a
0.3 s-RT60 impulse response, noise at -60 dBFS; the echo 12-13 dB below
what was played ("normal"), or 4-5 dB below ("louder": the loudspeaker
next to the microphone at full volume). The answers are espeak-ng's voice
"en" (as bench_aec.py makes them), one or two sentences each, peaks at 0.5
of full scale, back to back with 0.4-1.2 s gaps. Each answer's echo is
moved against the reference by: nothing ("exact"), a random 0-5 ms, a
random 0-12 ms, or 0 or 20 ms at random.

A first answer, not counted, lets the canceller learn the room (the
server mutes the microphone while it does: docs/audio.md, "While it
learns"). Counted: the output's 50 ms chunks (as the server cuts them, the
canceller's latency taken off) that lie within an answer, and how many
reach -40 dBFS RMS: the offline model's voice detector takes any such chunk
during an answer for a barge-in. Also the loudest chunk, and the same count
on the microphone itself (what reaches the detector without a canceller).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "server"))

from bench_aec import FAR_TEXT, espeak  # noqa: E402
from room_helpers import impulse_response, loudspeaker  # noqa: E402

import audiocore  # noqa: E402

RATE = 16000
CHUNK = RATE // 20  # the server's 50 ms microphone chunks
VOICE_DBFS = -40.0  # audiocore_server/audio/voice.py
NOISE_DBFS = -60.0
# Gains of the room's impulse response: the echo 12-13 dB and 4-5 dB below
# what was played (measured on the answers and printed with the table).
LEVELS = {"normal": 0.1, "louder": 0.26}
MOVES = {
    "exact": lambda rng: 0.0,
    "0-5 ms": lambda rng: rng.uniform(0.0, 0.005),
    "0-12 ms": lambda rng: rng.uniform(0.0, 0.012),
    "0 or 20 ms": lambda rng: 0.02 * rng.integers(0, 2),
}


def answers(count: int, rng: np.random.Generator, folder: Path) -> list[np.ndarray]:
    """`count` answers of one or two sentences, each with peaks at 0.5."""
    clips = [espeak(text, "en", RATE, folder) for text in FAR_TEXT]
    out = []
    for _ in range(count):
        picked = rng.choice(len(clips), size=rng.integers(1, 3), replace=False)
        x = np.concatenate([clips[i] for i in picked])
        out.append((x / np.max(np.abs(x)) * 0.5).astype(np.float32))
    return out


def shifted(x: np.ndarray, seconds: float) -> np.ndarray:
    """`x` later by `seconds` (a fractional delay by the FFT's phase, as a
    time on the client's clock need not fall on a sample)."""
    pad = len(x) + RATE // 10
    n = 1 << int(np.ceil(np.log2(pad)))
    spectrum = np.fft.rfft(x, n) * np.exp(-2j * np.pi * np.fft.rfftfreq(n) * seconds * RATE)
    return np.fft.irfft(spectrum, n)[:pad]


def convolve(x: np.ndarray, h: np.ndarray) -> np.ndarray:
    n = 1 << int(np.ceil(np.log2(len(x) + len(h))))
    return np.fft.irfft(np.fft.rfft(x, n) * np.fft.rfft(h, n), n)[: len(x)]


def scene(clips, gaps, moves, h, rng):
    """The reference (answers where the pacer says), the microphone (each
    answer's echo moved by its own amount, through the room) and the spans
    of the answers, in samples."""
    starts, pos = [], RATE // 2
    for clip, gap in zip(clips, gaps, strict=True):
        starts.append(pos)
        pos += len(clip) + gap
    total = pos + RATE // 2
    reference = np.zeros(total)
    played = np.zeros(total)
    for clip, start, move in zip(clips, starts, moves, strict=True):
        reference[start : start + len(clip)] = clip
        moved = shifted(clip, move)
        played[start : start + len(moved)] += moved
    echo = convolve(loudspeaker(played), h)
    mic = echo + 10 ** (NOISE_DBFS / 20) * rng.standard_normal(total)
    spans = [(s, s + len(c)) for s, c in zip(starts, clips, strict=True)]
    return reference, mic, spans


def pcm16(x: np.ndarray) -> bytes:
    return np.clip(np.round(x * 32768), -32768, 32767).astype("<i2").tobytes()


def cancel(reference: np.ndarray, mic: np.ndarray) -> tuple[np.ndarray, float]:
    """The canceller's output as the server gets it (50 ms chunks of
    PCM16), its latency taken off; and the CPU per 10 ms."""
    aec = audiocore.EchoCanceller(RATE, input="s16", output="s16")
    far, near = pcm16(reference), pcm16(mic)
    step = 2 * CHUNK
    parts = []
    begin = time.process_time()
    for i in range(0, len(far), step):
        parts.append(aec.process(far[i : i + step], near[i : i + step]))
    cpu = time.process_time() - begin
    out = np.frombuffer(b"".join(parts), "<i2").astype(np.float64) / 32768
    assert len(out) == len(mic)
    return out[aec.latency :], cpu / (len(mic) / (RATE / 100)) * 1e6


def chunk_levels(x: np.ndarray, spans) -> np.ndarray:
    """RMS dBFS of every whole 50 ms chunk lying within an answer."""
    levels = []
    for start, end in spans:
        first = -(-start // CHUNK)
        for c in range(first, end // CHUNK):
            part = x[c * CHUNK : (c + 1) * CHUNK]
            if len(part) == CHUNK:
                levels.append(10 * np.log10(np.mean(part**2) + 1e-20))
    return np.array(levels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=21)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="3 answers, one level")
    args = parser.parse_args()
    count = 3 if args.smoke else args.answers
    levels = {"normal": LEVELS["normal"]} if args.smoke else LEVELS

    with tempfile.TemporaryDirectory() as folder:
        clips = answers(count + 1, np.random.default_rng(args.seed), Path(folder))
    print(f"audiocore {audiocore.__version__}, {count} answers, seed {args.seed}, {RATE} Hz\n")
    print("| echo | answers' timing | chunks in answers | ≥ −40 dBFS | loudest dBFS |", end="")
    print(" microphone ≥ −40 dBFS | µs / 10 ms |")
    print("|---|---|---|---|---|---|---|")
    failures = []
    for level, gain in levels.items():
        rng = np.random.default_rng(args.seed)
        h = impulse_response(rng, RATE, 0.06, 0.3) * gain
        gaps = rng.integers(round(0.4 * RATE), round(1.2 * RATE), size=count + 1)
        below = None
        for timing, move_of in MOVES.items():
            moves_rng = np.random.default_rng([args.seed, len(timing)])
            moves = [move_of(moves_rng) for _ in range(count + 1)]
            reference, mic, spans = scene(clips, gaps, moves, h, np.random.default_rng(args.seed))
            if below is None:
                inside = np.concatenate([np.arange(s, e) for s, e in spans[1:]])
                played = np.mean(reference[inside] ** 2)
                below = 10 * np.log10(played / np.mean(mic[inside] ** 2))
            out, cpu = cancel(reference, mic)
            got = chunk_levels(out, spans[1:])
            raw = chunk_levels(mic, spans[1:])
            loud = int(np.sum(got >= VOICE_DBFS))
            print(
                f"| {level} ({below:.1f} dB below) | {timing} | {len(got)} | {loud} "
                f"| {np.max(got):.1f} | {int(np.sum(raw >= VOICE_DBFS))} | {cpu:.0f} |"
            )
            if not np.all(np.isfinite(got)) or len(got) == 0:
                failures.append(f"{level}, {timing}: no chunks measured")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
