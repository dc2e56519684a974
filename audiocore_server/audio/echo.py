"""Echo cancellation on the server's own reference: the microphone's audio
with the echo of what the client played taken out, for a client that has no
echo cancellation of its own (``start.echoCancellation: "server"``;
docs/audio.md, "Echo cancellation").

``MicEcho`` is the pacer's playback listener (``OutputPacer.listen``): it
places every frame the pacer releases on the pacer's timeline where the
client plays it (frames back to back from their release: the pacer's model),
resampled to the microphone's rate, and drops what a barge-in took from the
client before it was played. That timeline is the far end; where nothing
plays it is silence. ``cancel`` pairs the microphone's audio sample for
sample with it in an ``audiocore.EchoCanceller``: each client frame as it
comes, at ``rate`` (``audio/conversion.py``: the model's rate after the
conversion, or the client's lower one before it, ``echo_rate``), before
anything judges it — the canceller's output does not depend on how its
input is split, so 20 ms frames give the stream 50 ms chunks would.

Pairing. The first audio is paired with the reference over the span that
ends when it reached the server. It was captured before that, so its echo
lags the reference by the capture path's latency plus the room's delay: a
delay the canceller finds (up to its ``max_delay``). From there the
reference is read on in step with the microphone's samples, not the clock,
so the pairing does not jitter with arrival times (a frame's or a chunk's);
only when the two part by more than ``RESYNC_S`` (the microphone paused, or
a burst after a stall) is the reading set to the clock again.

Learning. Until the canceller has found the echo's delay, its output still
holds much of the echo (it finds it within 0.3-3 s of the first answer's
echo; until it has found an echo at all, its output is the microphone): a
client with a loudspeaker by its microphone is muted then, counted from the
reference's first voiced sample — half duplex while it learns the room, as
speakerphones do, so that the agent's first answer does not interrupt
itself. The mute ends, the canceller's latency later (its output lags by as
much), once the delay is found; after ``LEARN_S``, at once if no echo is
found (a headset, which loses barge-in only over that first second), else
once the output is ``CONVERGED_DB`` under the microphone over the last
``CONVERGED_S`` of voiced reference; after ``LEARN_MAX_S`` in any case.

A phone line (``mute_while_learning=False``) is never muted: it has no
loudspeaker by the microphone (the handset cancels its own), its echo is
the line's, faint, and the caller's first barge-in must be heard. Its audio
is the canceller's output from the start, which is the caller's audio
unchanged (the canceller's latency later) until the canceller has found an
echo on the line: on a line with no echo at all, the caller's words over an
answer pass untouched, though the canceller adapts in that double talk
(docs/telephony.md, "The caller's echo").

Barge-in. The canceller's state is kept: it models the room, which a
barge-in does not change, and a reset would let the next answer's first
seconds through while it converges again — the self-interruption this is
for. Only the audio the client dropped unplayed leaves the reference.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

import audiocore

from .voice import energy, voiced

# The microphone and the reference parted by more than this: read the
# reference at the clock again. Above the microphone's arrival jitter (client
# frames of 20 ms, the network), below the canceller's 0.5 s of delay search.
RESYNC_S = 0.25
# Reference held behind the newest frame for a microphone that sends
# nothing: more than any in-step reading is behind (RESYNC_S plus a chunk).
HISTORY_S = 1.0
# The microphone is muted while the canceller learns, counted in reference
# samples from the first voiced one, until it finds the echo's delay; else
# LEARN_S when it has found no echo by then (a headset), and when it has,
# until its output is CONVERGED_DB under the microphone (over the last
# CONVERGED_S of voiced reference), at most LEARN_MAX_S.
LEARN_S = 1.0
LEARN_MAX_S = 3.0
CONVERGED_DB = 20.0
CONVERGED_S = 0.25


def echo_rate(input_rate: int, model_rate: int) -> int:
    """The rate a microphone's canceller runs at: the client's own when it
    is lower than the model's and the canceller has it (a phone line's
    8 kHz: the same band at half the work, before the conversion), else the
    model's (after it)."""
    lower = input_rate < model_rate and input_rate in audiocore.EchoCanceller.RATES
    return input_rate if lower else model_rate


class MicEcho:
    """The far end at ``rate`` on the pacer's clock, and the microphone's
    audio (PCM16 at ``rate``) cleaned of its echo."""

    def __init__(
        self,
        rate: int,
        *,
        played_rate: int,
        mute_while_learning: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self._played_rate = played_rate
        self._canceller: Any = audiocore.EchoCanceller(rate, input="s16", output="s16")
        self._resampler: Any = (
            audiocore.Resampler(played_rate, rate, input="s16", output="s16")
            if played_rate != rate
            else None
        )
        self._clock = clock
        # The reference from the next sample to read (index 0, played at
        # ``_start``) on: int16 samples, zeros where nothing plays.
        self._ahead = np.zeros(0, np.int16)
        self._start: float | None = None  # None until the first chunk or frame
        # Where the last frame ended (index into ``_ahead``) and when: a
        # frame that starts then is placed there exactly, not by the clock.
        self._end = 0
        self._end_at: float | None = None
        # Samples still muted while learning, and how many have been.
        self._learning = round(LEARN_MAX_S * rate) if mute_while_learning else 0
        self._muted = 0
        self._heard_far = False  # a voiced reference reached the canceller
        # Since an echo was found, the last CONVERGED_S of chunks where the
        # reference is voiced: (samples, the microphone's energy, the
        # output's), to tell what the canceller takes out.
        self._window: deque[tuple[int, float, float]] = deque()

    @property
    def canceller(self) -> Any:
        """The ``audiocore.EchoCanceller`` (its ``echo_delay``, for tests)."""
        return self._canceller

    # ------------------------------------------------ the pacer's listener
    def played(self, pcm: bytes, starts_at: float) -> None:
        """A frame (PCM16 at the client's rate) the client plays from ``starts_at``."""
        if self._end_at is not None and abs(starts_at - self._end_at) < 0.5 / self.rate:
            at = self._end
        else:
            # After a gap (between turns, a stall) the resampled run starts
            # afresh: the last one's tail closes it where it ended.
            self._put(self._end, self._tail())
            if self._start is None:
                self._start = starts_at
            at = round((starts_at - self._start) * self.rate)
        samples = self._resampled(pcm)
        self._put(at, samples)
        self._end = at + len(samples)
        self._end_at = starts_at + len(pcm) / 2 / self._played_rate
        if self._start is not None and self._start < starts_at - HISTORY_S:
            self._move_to(starts_at - HISTORY_S)

    def dropped(self, at: float) -> None:
        """Barge-in: the client dropped everything it had not played by ``at``."""
        if self._start is not None:
            cut = max(0, round((at - self._start) * self.rate))
            self._ahead = self._ahead[:cut]
            self._end = min(self._end, cut)
        if self._resampler is not None:
            self._resampler.reset()  # its tail is of the dropped audio
        self._end_at = None

    # ------------------------------------------------ the microphone
    def cancel(self, pcm: bytes) -> bytes:
        """The microphone's next audio (PCM16 at ``rate``, any length), echo
        removed: as many samples, ``canceller.latency`` samples later in the
        stream."""
        n = len(pcm) // 2
        begins = self._clock() - n / self.rate
        if self._start is None or abs(begins - self._start) > RESYNC_S:
            self._move_to(begins)
        far = self._ahead[:n]
        if len(far) < n:
            far = np.concatenate((far, np.zeros(n - len(far), np.int16)))
        self._ahead = self._ahead[n:]
        self._end = max(0, self._end - n)
        assert self._start is not None
        self._start += n / self.rate
        cleaned = bytes(self._canceller.process(far, pcm))
        if self._learning > 0 and self._mute_while_learning(far, pcm, cleaned):
            return bytes(len(cleaned))
        return cleaned

    def _mute_while_learning(self, far: np.ndarray, mic: bytes, cleaned: bytes) -> bool:
        canceller = self._canceller
        if not self._heard_far:
            if canceller.echo_delay is not None:  # found before anything was muted
                self._learning = 0
                return False
            if not voiced(far.tobytes()):
                return False
            self._heard_far = True
        if self._muted >= LEARN_S * self.rate and not canceller.echo_found:
            # No echo found (a headset): the output is the microphone itself.
            self._learning = 0
            return False
        # Its output's share of the microphone is bursty (the suppressor
        # takes whole frames down), so 20 dB is not taken for done before
        # LEARN_S: it only holds the mute longer for an echo still loud.
        converged = self._converged(far, mic, cleaned) and self._muted >= LEARN_S * self.rate
        if canceller.echo_delay is not None or converged:
            # What it returns, in this call and for ``latency`` samples
            # after, still holds some of the microphone as it came.
            self._learning = min(self._learning, canceller.latency + len(far))
        self._learning -= len(far)
        self._muted += len(far)
        return True

    def _converged(self, far: np.ndarray, mic: bytes, cleaned: bytes) -> bool:
        """Since the canceller found an echo, it has taken CONVERGED_DB of it
        out over the last CONVERGED_S of voiced reference."""
        window = self._window
        if not self._canceller.echo_found:
            window.clear()
            return False
        if not voiced(far.tobytes()):
            return False
        window.append((len(far), energy(mic), energy(cleaned)))
        while sum(n for n, _, _ in window) - window[0][0] >= CONVERGED_S * self.rate:
            window.popleft()
        if sum(n for n, _, _ in window) < CONVERGED_S * self.rate:
            return False
        mic_energy = sum(e for _, e, _ in window)
        out_energy = sum(e for _, _, e in window)
        return mic_energy > 0.0 and out_energy * 10 ** (CONVERGED_DB / 10) <= mic_energy

    # ------------------------------------------------ the timeline
    def _move_to(self, start: float) -> None:
        """Index 0 is now the sample played at ``start``; what was written
        keeps its time."""
        if self._start is not None:
            shift = round((start - self._start) * self.rate)
            if shift > 0:
                self._ahead = self._ahead[shift:]
            elif shift < 0:
                self._ahead = np.concatenate((np.zeros(-shift, np.int16), self._ahead))
            self._end = max(0, self._end - shift)
        self._start = start

    def _put(self, at: int, samples: np.ndarray) -> None:
        if at < 0:  # its start is already past the reading
            samples = samples[-at:]
            at = 0
        if not len(samples):
            return
        end = at + len(samples)
        if end > len(self._ahead):
            grown = np.zeros(end, np.int16)
            grown[: len(self._ahead)] = self._ahead
            self._ahead = grown
        self._ahead[at:end] = samples

    def _resampled(self, pcm: bytes) -> np.ndarray:
        if self._resampler is None:
            return np.frombuffer(pcm, np.int16)
        return np.frombuffer(self._resampler.process(pcm), np.int16)

    def _tail(self) -> np.ndarray:
        if self._resampler is None:
            return np.zeros(0, np.int16)
        tail = np.frombuffer(self._resampler.flush(), np.int16)
        self._resampler.reset()
        return tail
