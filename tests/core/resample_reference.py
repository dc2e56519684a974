"""Naive references and measurements for the resampler tests and benchmarks.

Nothing here is fast or clever on purpose: the resampler is checked against
the definition of a polyphase FIR written out in float64, and quality is
measured from what comes out of a resampler, so the same functions rate
audiocore and the other libraries in benchmarks/.
"""

from __future__ import annotations

import math

import numpy as np


def resample_naive(x: np.ndarray, up: int, down: int, h: np.ndarray, centre: int, n_out: int):
    """y[n] = sum_j x[j] * h[n * down + centre - j * up], in float64.

    `h` is the prototype at up x the input rate (DC gain `up`), `centre` its
    middle tap: output n sits at input time n * down / up, and input beyond
    either end of `x` is silence.
    """
    x = np.asarray(x, np.float64)
    y = np.zeros(n_out)
    for n in range(n_out):
        t = n * down + centre
        j_hi = min(t // up, len(x) - 1)
        j_lo = max(0, -(-(t - (len(h) - 1)) // up))
        if j_hi < j_lo:
            continue
        j = np.arange(j_lo, j_hi + 1)
        y[n] = np.dot(x[j], h[t - j * up])
    return y


def pcm16_policy(y: np.ndarray) -> np.ndarray:
    """docs/audio.md's PCM policy, as numpy spells it."""
    y = np.nan_to_num(np.asarray(y, np.float32), nan=0.0, posinf=1.0, neginf=-1.0)
    return np.rint(np.clip(y, -1, 1) * np.float32(32767)).astype("<i2")


def tone(freq: float, rate: int, frames: int, amplitude: float = 0.5) -> np.ndarray:
    n = np.arange(frames)
    return (amplitude * np.sin(2 * np.pi * freq / rate * n)).astype(np.float32)


def fit_tone(y: np.ndarray, freq: float, rate: int) -> tuple[float, np.ndarray]:
    """Amplitude of the sine at `freq` in `y` (least squares) and the residual."""
    n = np.arange(len(y))
    basis = np.stack(
        [np.sin(2 * np.pi * freq / rate * n), np.cos(2 * np.pi * freq / rate * n)], axis=1
    )
    coef, *_ = np.linalg.lstsq(basis, np.asarray(y, np.float64), rcond=None)
    return float(np.hypot(*coef)), y - basis @ coef


def spur_db(y: np.ndarray, rate: int, exclude: float | None, amplitude: float) -> float:
    """Largest spectral line in `y` relative to a sine of `amplitude`, in dB,
    ignoring the main lobe around `exclude` Hz.  A Kaiser window with beta 20
    keeps its own sidelobes near -150 dB, below anything measured here."""
    y = np.asarray(y, np.float64)
    window = np.kaiser(len(y), 20.0)
    spectrum = np.abs(np.fft.rfft(y * window)) * 2 / window.sum()
    if exclude is not None:
        centre = exclude * len(y) / rate
        bins = np.arange(len(spectrum))
        spectrum = spectrum[np.abs(bins - centre) > 16]
    peak = spectrum.max() / amplitude
    return 20 * math.log10(max(peak, 1e-15))


def snr_db(y: np.ndarray, freq: float, rate: int) -> float:
    """Power of the sine at `freq` over the power of everything else, in dB."""
    amplitude, residual = fit_tone(y, freq, rate)
    noise = float(np.mean(np.square(residual)))
    return 10 * math.log10(amplitude**2 / 2 / max(noise, 1e-30))


def steady(y: np.ndarray, margin: int) -> np.ndarray:
    """`y` without the start and end transients."""
    return y[margin : len(y) - margin]


def ratio(in_rate, out_rate):
    g = math.gcd(in_rate, out_rate)
    return out_rate // g, in_rate // g


def expected_frames(frames, in_rate, out_rate):
    """The documented stream length: round(frames * out / in), halves up."""
    return (2 * frames * out_rate + in_rate) // (2 * in_rate)


def noise(rng, frames, channels=1, level=0.3):
    return (rng.standard_normal(frames * channels) * level).clip(-1, 1).astype(np.float32)
