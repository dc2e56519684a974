"""The offline model's ears: an energy voice detector that cuts a 16 kHz
stream into utterances (exact slices of it, so the echo is exact), and the
honest "transcription" of one — what can be measured, not words."""

from __future__ import annotations

import math
from collections import deque
from typing import Protocol

import numpy as np

from ..audio.voice import VoiceCheck

INPUT_RATE = 16_000
NO_ASR_NOTE = "[offline model: no speech recognition]"


class SegmenterSettings(Protocol):
    vad_threshold_dbfs: float
    hangover_ms: int
    preroll_ms: int
    min_speech_ms: int
    max_utterance_s: float


class EnergySegmenter:
    """Energy VAD with pre-roll and hangover over a contiguous 16 kHz stream.

    An utterance is a contiguous slice of the input: up to ``preroll_ms``
    before the first speech chunk through the chunk where ``hangover_ms`` of
    non-speech completed, so the echo is an exact copy of what was sent.
    """

    def __init__(self, model: SegmenterSettings) -> None:
        self._voiced = VoiceCheck(model.vad_threshold_dbfs)
        self._hangover = model.hangover_ms * INPUT_RATE // 1000
        self._preroll_max = model.preroll_ms * INPUT_RATE // 1000
        self._min_speech = model.min_speech_ms * INPUT_RATE // 1000
        self._max_samples = int(model.max_utterance_s * INPUT_RATE)
        self._preroll: deque[bytes] = deque()
        self._preroll_samples = 0
        self._utterance: list[bytes] = []
        self._samples = 0
        self._speech_samples = 0
        self._silence_run = 0
        self._active = False

    def feed(self, pcm: bytes) -> str | bytes | None:
        """Feed a chunk; returns "onset", a finished utterance, or None."""
        n = len(pcm) // 2
        if n == 0:
            return None
        voiced = self._voiced(pcm)
        if not self._active:
            if voiced:
                self._active = True
                self._utterance = list(self._preroll)
                self._samples = self._preroll_samples
                self._preroll.clear()
                self._preroll_samples = 0
                self._speech_samples = self._silence_run = 0
                self._append(pcm, n, voiced)
                return "onset"
            self._preroll.append(pcm)
            self._preroll_samples += n
            while self._preroll and self._preroll_samples - len(self._preroll[0]) // 2 >= (
                self._preroll_max
            ):
                self._preroll_samples -= len(self._preroll.popleft()) // 2
            return None
        self._append(pcm, n, voiced)
        if self._silence_run >= self._hangover or self._samples >= self._max_samples:
            return self._finish()
        return None

    def _append(self, pcm: bytes, n: int, voiced: bool) -> None:
        self._utterance.append(pcm)
        self._samples += n
        if voiced:
            self._speech_samples += n
            self._silence_run = 0
        else:
            self._silence_run += n

    def _finish(self) -> bytes | None:
        pcm = b"".join(self._utterance)
        speech = self._speech_samples
        self._utterance, self._samples, self._active = [], 0, False
        return pcm if speech >= self._min_speech else None

    @property
    def active(self) -> bool:
        """An utterance has begun and not ended."""
        return self._active

    def force_end(self) -> bytes | None:
        return self._finish() if self._active else None

    def start_manual(self) -> None:
        self._utterance, self._samples, self._active = [], 0, False
        self._preroll.clear()
        self._preroll_samples = 0

    def append_manual(self, pcm: bytes) -> None:
        self._utterance.append(pcm)

    def end_manual(self) -> bytes:
        pcm = b"".join(self._utterance)
        self._utterance = []
        return pcm


def _dbfs(value: float) -> float:
    return 20 * math.log10(value / 32768) if value > 0 else -math.inf


def describe_utterance(pcm: bytes) -> str:
    """The honest 'transcription': what the model can measure, not words."""
    x = np.frombuffer(pcm, "<i2").astype(np.float64)
    n = x.size
    peak = float(np.max(np.abs(x))) if n else 0.0
    rms = float(np.sqrt(np.mean(x * x))) if n else 0.0
    return (
        f"{NO_ASR_NOTE} {n / INPUT_RATE:.2f} s of audio ({n} samples at {INPUT_RATE} Hz), "
        f"peak {_dbfs(peak):.1f} dBFS, RMS {_dbfs(rms):.1f} dBFS"
    )
