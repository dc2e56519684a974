"""Naive NumPy references for the kernels: slow, obvious, and the oracle."""

import numpy as np


def pcm16_from_f32(x):
    """docs/audio.md policy, spelled out with NumPy (NaN -> 0 handled first)."""
    x = np.asarray(x, dtype=np.float32)
    x = np.where(np.isnan(x), np.float32(0), x)
    return np.rint(np.clip(x, -1, 1) * np.float32(32767)).astype("<i2").tobytes()


def f32_from_pcm16(data):
    s = np.frombuffer(bytes(data), dtype="<i2")
    return s.astype(np.float32) * np.float32(1 / 32768)
