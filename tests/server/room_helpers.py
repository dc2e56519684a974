"""A simulated room for the echo tests: what a client's loudspeaker plays
comes back into its microphone through a clipping loudspeaker, a bulk delay
(the devices' buffers), a room's impulse response and background noise.
Streaming, in the client's 20 ms frames; seeded."""

from __future__ import annotations

import numpy as np

import audiocore


def impulse_response(
    rng: np.random.Generator, rate: int, delay_s: float, rt60_s: float
) -> np.ndarray:
    """A bulk delay, the direct sound, then diffuse reflections decaying by
    60 dB in ``rt60_s`` (exponentially shaped noise, as a room's late
    reverberation is), over 0.25 s: the canceller's default tail."""
    delay = round(delay_s * rate)
    tail = np.arange(round(0.25 * rate))
    reflections = rng.standard_normal(len(tail)) * 10 ** (-3 * tail / (rt60_s * rate))
    reflections[: round(0.003 * rate)] = 0.0  # the first reflection after 3 ms
    h = np.zeros(delay + len(tail))
    h[delay] = 1.0
    h[delay:] += 0.15 * reflections
    return h


def loudspeaker(x: np.ndarray, drive: float = 2.5) -> np.ndarray:
    """A small loudspeaker driven into clipping (hard clip at 1/``drive`` of
    full scale: the agent's loud syllables, which peak at 0.5 here, are cut
    at 0.4; then a soft saturation): what no linear filter models."""
    return np.tanh(2.0 * np.clip(x, -1 / drive, 1 / drive)) / 2.0


class Room:
    """``echo(played)``: the microphone's pick-up of a frame the client
    played (PCM16 at ``played_rate``), float32 at ``rate``, with noise."""

    def __init__(
        self,
        rng: np.random.Generator,
        *,
        rate: int,
        played_rate: int,
        delay_s: float = 0.06,
        rt60_s: float = 0.3,
        # The echo 12–13 dB below what was played (ERL): a laptop's or a
        # kiosk's loudspeaker at a normal volume.
        gain: float = 0.1,
        noise_dbfs: float = -60.0,
    ) -> None:
        self._rng = rng
        self._to_mic = audiocore.Resampler(played_rate, rate, input="s16", output="f32")
        self._h = impulse_response(rng, rate, delay_s, rt60_s) * gain
        self._history = np.zeros(len(self._h) - 1)
        self._noise = 10 ** (noise_dbfs / 20)
        self._ratio = rate / played_rate
        # The resampler's first output is short by its delay: the
        # microphone's frames are whole, so it starts that much later.
        self._out = np.zeros(self._to_mic.delay)

    def echo(self, played: bytes) -> np.ndarray:
        """As many samples as ``played`` lasts at ``rate``."""
        x = loudspeaker(np.asarray(self._to_mic.process(played), np.float64))
        padded = np.concatenate((self._history, x))
        self._out = np.concatenate((self._out, np.convolve(padded, self._h, "valid")))
        self._history = padded[len(padded) - len(self._history) :]
        n = round(len(played) // 2 * self._ratio)
        y, self._out = self._out[:n], self._out[n:]
        return (y + self._noise * self._rng.standard_normal(n)).astype(np.float32)
