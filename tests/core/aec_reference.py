"""Naive references and scenes for the echo canceller's tests: a DFT by its
definition (the oracle of the C real FFT), the output a canceller with
nothing to cancel must give, and synthetic echo paths."""

import numpy as np


def naive_rfft(x):
    """Bins 0 .. n/2 of the DFT of real `x`, summed in float64 by the
    definition."""
    n = len(x)
    k = np.arange(n // 2 + 1)[:, None]
    return (np.exp(-2j * np.pi * k * np.arange(n)[None, :] / n) * np.asarray(x, float)).sum(1)


def delayed(x, latency):
    """`x` as the canceller returns it when there is no echo: `latency`
    zeros first, the same length."""
    x = np.asarray(x, np.float32)
    return np.concatenate([np.zeros(latency, np.float32), x[: len(x) - latency]])


def noise(rng, n, level=0.1):
    return (rng.standard_normal(n) * level).astype(np.float32)


def speech_like(rng, n, rate, level=0.1):
    """Noise shaped like speech at the scale the canceller sees: a low-pass
    tilt and a syllable-rate envelope with pauses."""
    x = rng.standard_normal(n + 1)
    x = x[1:] + 0.9 * x[:-1]  # tilt towards low frequencies
    t = np.arange(n) / rate
    envelope = np.clip(np.sin(2 * np.pi * 3.1 * t + rng.uniform(0, 6)), 0, None) ** 0.5
    return (x * envelope * level).astype(np.float32)


def echo_of(far, delay, gain, taps=None):
    """The microphone's echo of `far` through a pure delay and gain (or
    `taps`, an impulse response, after the delay)."""
    far = np.asarray(far, float)
    path = np.array([gain]) if taps is None else np.asarray(taps, float)
    echo = np.convolve(far, path)[: len(far)]
    return np.concatenate([np.zeros(delay), echo])[: len(far)].astype(np.float32)


def room_taps(rng, rate, seconds=0.1, rt60=0.2):
    """An exponentially decaying noise tail with a direct path: a crude
    room, enough to make the filter model more than one tap."""
    n = int(seconds * rate)
    decay = np.exp(-6.9 * np.arange(n) / (rt60 * rate))
    taps = rng.standard_normal(n) * decay * 0.05
    taps[0] = 0.6
    return taps


def power_db(x):
    x = np.asarray(x, float)
    return 10 * np.log10(np.mean(x * x) + 1e-30)


def attenuation_db(before, after):
    """How far `after` lies below `before`, in dB of mean power."""
    return power_db(before) - power_db(after)
