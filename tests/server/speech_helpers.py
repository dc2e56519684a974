"""Real speech, for the server tests (the ``speech_48k`` fixture) and the
server benchmarks (benchmarks/bench_server_client.py imports this file):
espeak-ng's voice, resampled by sox."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

SPEECH_TEXT = "Hello, this is a test of the audio bridge."


def speech_f32(folder: Path, rate: int = 48_000) -> np.ndarray:
    """espeak-ng saying SPEECH_TEXT as mono float32 at `rate`, peak 0.5
    (sox's very-high-quality resampler; its files are left in `folder`)."""
    raw, out = folder / "speech.wav", folder / f"speech{rate}.f32"
    subprocess.run(["espeak-ng", "-w", str(raw), SPEECH_TEXT], check=True)
    subprocess.run(
        ["sox", str(raw), "-t", "raw", "-e", "floating-point", "-b", "32"]
        + ["-r", str(rate), "-c", "1", str(out), "rate", "-v"],
        check=True,
    )
    samples = np.fromfile(out, dtype="<f4")
    return (samples / max(1e-9, float(np.max(np.abs(samples)))) * 0.5).astype(np.float32)
