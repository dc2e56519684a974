"""The one voice check: is a 16 kHz PCM16 chunk speech?

A chunk is voiced when its RMS reaches ``VOICE_DBFS`` (−40 dBFS). The
offline model ends a user's turn after ``END_OF_SPEECH_S`` without a voiced
chunk; a connection takes the user as still speaking for ``LINE_HANGOVER_S``
after their last voiced chunk — longer than the model's pause by a margin,
so that by the time the line counts as free the model has seen the turn end
and begun to answer (``audiocore_server/live/line.py``).
"""

from __future__ import annotations

import numpy as np

VOICE_DBFS = -40.0
END_OF_SPEECH_S = 0.6
LINE_HANGOVER_S = END_OF_SPEECH_S + 0.2


def energy(pcm: bytes) -> float:
    """The sum of squares of a PCM16 chunk's samples (a trailing odd byte
    ignored), exact in float64 below 8 million samples."""
    samples = np.frombuffer(pcm, "<i2", count=len(pcm) // 2).astype(np.float64)
    return float(samples @ samples)


class VoiceCheck:
    """``check(pcm)``: the chunk's RMS reaches ``dbfs``. Runs on every input
    chunk: one dot product (sum of squares ≥ threshold² · n) instead of a
    mean and a square root. In float64 the sum of squared 16-bit samples is
    exact (below 2⁵³ for any chunk under 8 million samples), so the verdict
    at the threshold is the exact one."""

    def __init__(self, dbfs: float = VOICE_DBFS) -> None:
        self.dbfs = dbfs
        self.rms = 32768 * 10 ** (dbfs / 20)  # the threshold, in sample units
        self._power = self.rms * self.rms

    def __call__(self, pcm: bytes) -> bool:
        n = len(pcm) // 2
        return n > 0 and energy(pcm) >= self._power * n


voiced = VoiceCheck()
