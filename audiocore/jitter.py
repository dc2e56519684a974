"""Jitter and playout buffering (docs/audio.md): `JitterBuffer`.

One compiled core (`_jitter`: ring buffer, framing, concealment, time-scaling,
flush, and the arrival-delay estimator), configured per source profile by
`_jitter_profiles`.  Everything per frame runs in C; this layer validates
arguments and keeps track of turns (played position, flushed turn ids).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING

from audiocore import _jitter
from audiocore._convert import MAX_CHANNELS
from audiocore._jitter_profiles import (
    HIGH_WATER_MS,
    PROFILES,
    UNUSED,
    Shape,
    generator_core,
    packet_core,
    reliable_core,
)
from audiocore._validate import (
    check_channels,
    check_choice,
    check_int,
    check_rate,
    check_real,
    check_time,
)

if TYPE_CHECKING:
    from audiocore._typing import SampleBuffer

__all__ = ["PROFILES", "JitterBuffer"]

# The concealment's pitch search (2.5 to 15 ms lags) needs this many samples
# a second; the C core refuses less.
MIN_SAMPLE_RATE = 1000
MAX_FRAME_MS = 200
MAX_BUFFER_MS = 600_000  # ten minutes: an upper bound on any capacity
# backpressure holds this many turn ends in reserve: a producer that waits on
# it can always end the turn it is pushing.
_TURN_ROOM = 2
# How many flushed turn ids are remembered for rejecting their late chunks.
_FLUSHED_TURNS = 256


class JitterBuffer:
    """Jitter/playout buffer for one audio stream; returns steady PCM16 frames.

    ``push(pcm, ...)`` stores audio as it arrives; ``pop()`` returns exactly
    one frame (``frame_ms`` of interleaved PCM16 `bytes`) each time the
    consumer needs one, concealing what is missing: the pop cadence is the
    consumer's clock.  `pcm` is any C-contiguous buffer of int16 samples
    (bytes, bytearray, memoryview, numpy, array.array; raw bytes are
    little-endian pairs), read without copying.  `arrival` times are seconds
    on the caller's monotonic clock, default `time.monotonic()`.
    `sample_rate` is 1 kHz to
    `audiocore.MAX_SAMPLE_RATE` (1 MHz), `channels` 1 to
    `audiocore.MAX_CHANNELS` (64).

    Profiles (the source decides, not the consumer):

    ``"generator"``: model output (faster than real time, in bursts, with
        stalls).  A turn starts as soon as `preroll_ms` (default and at most
        one frame) is buffered.  Audio is never dropped or time-scaled: on
        underrun ``pop`` conceals (repeats the last pitch period, fading to
        silence) and then resumes exactly where the audio stopped, cross-faded
        over 2.5 ms.  ``end_turn()`` (or ``push(..., final=True)``) releases
        the tail, padded with silence to a whole frame.  Memory is bounded by
        `capacity_ms` (default 60 s): a push that does not fit raises
        `BufferError` and stores nothing; `backpressure` turns true above
        `high_water_ms` (default 10 s) so a producer can wait before that.
    ``"reliable"``: in-order, lossless, bursty input (TCP/WebSocket mic).
        Re-frames any chunk sizes into exact frames with no added delay
        (pop while ``frames_ready``).  With `target_ms`, a steady real-time
        consumer gets that much buffering: playout starts at `target_ms`,
        late data stalls playout (concealment, nothing dropped), and latency
        above `max_ms` (default target + 100 ms) is compressed back to the
        target by time-scaling (counted in ``stats["removed_samples"]``).
        Beyond `capacity_ms` the oldest audio is dropped (counted).
    ``"packet"``: sequence-numbered packets (RTP-like).  Give `seq` (16-bit,
        wraps) and/or `timestamp` (samples, 32-bit, wraps).  Packets are
        reordered, duplicates dropped, holes concealed (the last pitch
        period repeated with a fade, silence only after the fade, cross-faded
        back into the audio).  A packet whose slot has not been played yet
        is used, however late; if the buffer ran empty waiting for it, it
        stalls and plays it, and the extra delay is compressed away, unless
        the stall outlasted the whole target delay (a delay spike): then the
        overdue audio is dropped down to the target (``late_samples``).  The
        target delay adapts to the 90th percentile of the arrival delay
        relative to the fastest recent packet (histogram with forgetting,
        NetEq-like), within [`min_ms`, `max_ms`] (default one frame to 1 s),
        unless `target_ms` fixes it; time-scaling both ways holds it, which
        also absorbs sender clock drift.  ``end_turn()`` ends the stream.

    Turns.  Chunks carry an optional `turn` id (any hashable, e.g. the
    model's turn or generation id).  In the in-order profiles a new id
    starts a new turn after the previous one's tail; in `packet` ids are
    labels.  ``flush()`` ends playback at once and makes every turn seen so
    far rejected: their later chunks are dropped (``push`` returns False,
    counted in ``stats["rejected_packets"]``).  Without turn ids the caller
    must stop pushing stale audio itself.  `turn_open`, `turn_samples` and
    `turn_played` describe the turn being pushed.

    Positions.  Source audio is numbered in samples (per channel) from the
    first one stored: `write_position` is one past the newest, and
    `read_position` the next to play, so in the in-order profiles
    ``write_position - read_position`` samples are queued.  A consumer that
    keeps other things in order with the audio (messages after the audio
    pushed before them) can tag them with `write_position` and release them
    once `read_position` reaches it: the buffer is the one account of what
    is queued, including across ``flush()``.

    Serving model audio (the server's use)::

        jb = JitterBuffer(24000, profile="generator")     # 20 ms frames

        # receiver task: each audio part of a model event
        jb.push(pcm, turn=turn_id)          # never blocks; BufferError when full
        if event.turn_complete:
            jb.end_turn()
        # (optional) while jb.backpressure: await asyncio.sleep(0.02)

        # sender task: real-time pacing with a small lead over the browser
        deadline = loop.time()
        while True:
            await asyncio.sleep(max(0.0, deadline - LEAD - loop.time()))
            if jb.playing:
                await send(jb.pop())
            deadline = max(deadline + jb.frame_ms / 1000, loop.time() - LEAD)

        # barge-in
        heard = jb.flush()       # samples of the turn sent so far
        # the model can be told the turn was cut after `heard` samples

    A JitterBuffer belongs to one stream; calling it from two threads at once
    raises `RuntimeError` instead of corrupting it.
    """

    def __init__(
        self,
        sample_rate: int,
        *,
        channels: int = 1,
        frame_ms: float = 20,
        profile: str = "generator",
        preroll_ms: float | None = None,
        target_ms: float | None = None,
        min_ms: float | None = None,
        max_ms: float | None = None,
        capacity_ms: float | None = None,
        high_water_ms: float | None = None,
    ) -> None:
        rate = check_rate("sample_rate", sample_rate, MIN_SAMPLE_RATE)
        channels = check_channels(channels, MAX_CHANNELS)
        frame_ms = check_real("frame_ms", frame_ms, 1, MAX_FRAME_MS, "a frame length in ms")
        check_choice("profile", profile, PROFILES)
        exact = rate * frame_ms / 1000
        frame = round(exact)
        if abs(exact - frame) > 1e-9:
            raise ValueError(
                f"frame_ms: {frame_ms:g} ms at {rate} Hz is {exact:g} samples; expected a "
                f"frame length that is a whole number of samples"
            )
        if frame < 8:
            raise ValueError(
                f"frame_ms: {frame_ms:g} ms at {rate} Hz is {frame} samples; expected at least 8"
            )

        def ms(name: str, value: float | None, lo: float, hi: float) -> float | None:
            if value is None:
                return None
            return check_real(name, value, lo, hi, "a duration in ms")

        preroll = ms("preroll_ms", preroll_ms, 0, frame_ms)
        target = ms("target_ms", target_ms, 0, MAX_BUFFER_MS)
        lo = ms("min_ms", min_ms, 0, MAX_BUFFER_MS)
        hi = ms("max_ms", max_ms, 0, MAX_BUFFER_MS)
        capacity = ms("capacity_ms", capacity_ms, 4 * frame_ms, MAX_BUFFER_MS)
        high_water = ms("high_water_ms", high_water_ms, 0, MAX_BUFFER_MS)
        given = {
            "preroll_ms": preroll,
            "target_ms": target,
            "min_ms": lo,
            "max_ms": hi,
            "high_water_ms": high_water,
        }
        for name in UNUSED[profile]:
            if given[name] is not None:
                raise ValueError(f"{name}: not used by the {profile!r} profile")

        self._rate = rate
        self._channels = channels
        self._frame = frame
        self._frame_ms = frame_ms
        self._profile = profile
        self._high_water: int | None = None
        shape = Shape(rate, channels, frame, frame_ms)
        if profile == "generator":
            self._high_water = shape.samples(HIGH_WATER_MS if high_water is None else high_water)
            self._core = generator_core(shape, preroll, capacity)
        elif profile == "reliable":
            self._core = reliable_core(shape, target, hi, capacity)
        else:
            self._core = packet_core(shape, target, lo, hi, capacity)
        self._lock = threading.Lock()
        # Turns: (id, first source position) of turns not yet known to be
        # over, oldest first; ids of flushed turns.
        self._turns: deque[tuple[Hashable, int]] = deque()
        self._turn_open = False
        self._turn_received = 0  # the core's received count when the open turn began
        self._anonymous = 0
        self._recent: deque[Hashable] = deque(maxlen=_FLUSHED_TURNS)  # since the last flush
        self._flushed: deque[Hashable] = deque(maxlen=_FLUSHED_TURNS)
        self._flushed_set: set[Hashable] = set()
        self._flushes = 0
        self._rejected_packets = 0
        self._rejected_samples = 0
        self._frame_bytes = frame * channels * 2

    # -- configuration -------------------------------------------------

    @property
    def sample_rate(self) -> int:
        return self._rate

    @property
    def channels(self) -> int:
        return self._channels

    @property
    def frame_ms(self) -> float:
        return self._frame_ms

    @property
    def frame_samples(self) -> int:
        """Sample frames (per channel) in every ``pop()`` result."""
        return self._frame

    @property
    def frame_bytes(self) -> int:
        return self._frame_bytes

    @property
    def profile(self) -> str:
        return self._profile

    # -- state -----------------------------------------------------------

    @property
    def playing(self) -> bool:
        """True while a turn (or packet stream) is being played out; false
        when ``pop()`` would only return silence."""
        return self._core.playing or self._core.ready > 0

    @property
    def buffered_ms(self) -> float:
        """Audio held, in ms (for `packet`: the span up to the newest packet)."""
        return self._core.level * 1000 / self._rate

    @property
    def frames_ready(self) -> int:
        """How many ``pop()`` calls in a row, from now, return source audio:
        whole frames, and the last, partial frame of an ended turn (padded
        with silence).  0 while the next ``pop()`` would conceal (the source
        stalled mid-turn), fade out after a flush, or wait for the audio it
        needs to start (`preroll_ms`, `target_ms`)."""
        return self._core.frames_ready

    @property
    def write_position(self) -> int:
        """One past the newest sample stored, in samples per channel: for
        the in-order profiles, how many have been stored since the buffer
        was made (refused and rejected chunks do not count).  For `packet`,
        the unwrapped timestamp of the newest packet's end (its origin is
        arbitrary; only differences mean something)."""
        return self._core.write_pos

    @property
    def read_position(self) -> int:
        """The source sample ``pop()`` plays next, on the same scale as
        `write_position`.  Everything before it has been played, cross-faded
        or dropped: ``flush()`` moves it to `write_position`, as does
        dropping on overflow (`reliable`) and time compression past it."""
        return self._core.read_pos

    @property
    def turn_open(self) -> bool:
        """A turn has begun (a chunk of it was pushed) and not ended: no
        ``end_turn()``, ``final=True``, chunk of another turn id (in-order
        profiles) or ``flush()`` since."""
        return self._turn_open

    @property
    def turn_samples(self) -> int:
        """Samples (per channel) stored in the open turn; 0 when no turn is
        open."""
        # Everything stored since the turn began is the turn's.
        return self._core.received - self._turn_received if self._turn_open else 0

    @property
    def turn_played(self) -> int:
        """Samples (per channel) of the open turn played so far; 0 when no
        turn is open or it has not started playing (the previous turn's tail
        may still be playing)."""
        if not self._lock.acquire(False):
            raise self._busy()
        try:
            if not self._turn_open or self._turns[-1][1] < 0:
                return 0
            return max(0, self._core.read_pos - self._turns[-1][1])
        finally:
            self._lock.release()

    @property
    def backpressure(self) -> bool:
        """`generator`: more than `high_water_ms` is buffered, or so many
        finished turns wait to play that another could not end; a producer
        should wait (popping drains both) before pushing more.  Always False
        for other profiles."""
        return self._high_water is not None and (
            self._core.level > self._high_water or self._core.turn_room < _TURN_ROOM
        )

    @property
    def played(self) -> int:
        """Samples (per channel) of the current turn played so far."""
        if not self._lock.acquire(False):
            raise self._busy()
        try:
            return self._played()
        finally:
            self._lock.release()

    @property
    def stats(self) -> dict[str, float]:
        """Counters, getStats-like.  Samples are per channel.

        Output: ``emitted_samples == played_samples + concealed_samples +
        blended_samples + idle_samples``; `blended` are cross-fades (resuming
        after concealment, time-scaling), `idle` silence or flush fades while
        nothing plays.  Input: received/late/duplicate packets, samples
        discarded (flush, overflow), removed/inserted by time-scaling,
        rejected (chunks of flushed turns).  Delays in ms: `current_delay_ms`
        (buffered), `target_delay_ms`, `high_water_ms`.
        """
        raw = self._core.stats()
        counts = {
            "emitted",
            "played",
            "concealed",
            "silent_concealed",
            "blended",
            "idle",
            "received",
            "late",
            "discarded",
            "removed",
            "inserted",
        }
        out: dict[str, float] = {}
        for key, value in raw.items():
            if key == "high_water":
                continue
            name = f"{key}_samples" if key in counts else key
            out[name] = value
        out["flushes"] = self._flushes
        out["rejected_packets"] = self._rejected_packets
        out["rejected_samples"] = self._rejected_samples
        to_ms = 1000 / self._rate
        out["current_delay_ms"] = self._core.level * to_ms
        out["target_delay_ms"] = self._core.target * to_ms
        out["high_water_ms"] = raw["high_water"] * to_ms
        return out

    # -- stream ------------------------------------------------------------

    def push(
        self,
        pcm: SampleBuffer,
        *,
        seq: int | None = None,
        timestamp: int | None = None,
        arrival: float | None = None,
        turn: Hashable | None = None,
        final: bool = False,
    ) -> bool:
        """Store a chunk; returns False if it was dropped (late, duplicate,
        or from a flushed turn; see `stats`), True if any of it was kept.

        `seq` (0..65535) and `timestamp` (0..2**32-1, in samples) are for the
        `packet` profile, which needs at least one of them; `arrival`
        (seconds) feeds its delay estimate.  ``final=True`` ends the turn
        after this chunk (same as ``end_turn()``).  `generator` raises
        `BufferError` (storing nothing) when the chunk would exceed
        `capacity_ms`.
        """
        if seq is not None:
            seq = check_int("seq", seq, 0, 0xFFFF, "a 16-bit sequence number")
        if timestamp is not None:
            timestamp = check_int("timestamp", timestamp, 0, 0xFFFFFFFF, "a 32-bit timestamp")
        if self._profile == "packet":
            if seq is None and timestamp is None:
                raise ValueError("packet profile: expected seq and/or timestamp, got neither")
            when = time.monotonic() if arrival is None else check_time("arrival", arrival)
        else:
            if seq is not None or timestamp is not None:
                raise ValueError(
                    f"seq/timestamp: not used by the {self._profile!r} profile (in-order input)"
                )
            when = math.nan if arrival is None else check_time("arrival", arrival)
        if turn is not None and not isinstance(turn, Hashable):
            raise TypeError(f"turn: expected a hashable id, got {type(turn).__name__}")
        if not isinstance(final, bool):
            raise TypeError(f"final: expected bool, got {type(final).__name__}")
        if not self._lock.acquire(False):
            raise self._busy()
        try:
            if turn is not None and turn in self._flushed_set:
                self._rejected_samples += self._core.frames_in(pcm)
                self._rejected_packets += 1
                return False
            self._begin_turn(turn)
            # The turn's first chunk fixes where it starts.
            first = self._turns[-1][1] < 0
            start = self._core.write_pos if first else 0
            result = self._core.push(
                pcm, -1 if seq is None else seq, -1 if timestamp is None else timestamp, when
            )
            if result == _jitter.FULL and self._profile == "generator":
                raise BufferError(
                    f"jitter buffer full: {self.buffered_ms:.0f} ms buffered; wait until "
                    f"backpressure clears (pop() drains it) before pushing more"
                )
            if first:
                self._turns[-1] = (self._turns[-1][0], self._first_position(start))
            if final:
                self._end_turn()
            return result >= 0
        finally:
            self._lock.release()

    def pop(self) -> bytes:
        """Exactly one frame of PCM16 `bytes` (silence or concealment when
        there is nothing to play).  Call it once per frame period of the
        consumer: the calls are the buffer's playout clock."""
        if not self._lock.acquire(False):
            raise self._busy()
        try:
            return self._core.pop()
        finally:
            self._lock.release()

    def end_turn(self) -> None:
        """The current turn is complete: its tail plays (padded to a frame)
        and the next push starts a new turn.  For `packet`: end of stream."""
        if not self._lock.acquire(False):
            raise self._busy()
        try:
            self._end_turn()
        finally:
            self._lock.release()

    def flush(self, fade_ms: float = 5) -> int:
        """Barge-in: drop everything buffered, fade the output to silence over
        `fade_ms` (made from the audio already played, so nothing stale is
        heard), and reject later chunks of every turn seen so far.  Returns
        the played position of the current turn in samples (per channel).
        O(1); the fade is produced by the following ``pop()`` calls."""
        fade = check_real("fade_ms", fade_ms, 0, 1000, "a fade length in ms")
        if not self._lock.acquire(False):
            raise self._busy()
        try:
            played = self._played()
            for turn_id in self._recent:
                if turn_id not in self._flushed_set:
                    if len(self._flushed) == self._flushed.maxlen:
                        self._flushed_set.discard(self._flushed[0])
                    self._flushed.append(turn_id)
                    self._flushed_set.add(turn_id)
            self._recent.clear()
            self._turns.clear()
            self._turn_open = False
            self._core.flush(round(fade * self._rate / 1000))
            self._flushes += 1
            return played
        finally:
            self._lock.release()

    # -- internals -----------------------------------------------------------

    def _busy(self) -> RuntimeError:
        return RuntimeError(
            "JitterBuffer is in use by another thread; a JitterBuffer belongs to one stream "
            "and its calls must not overlap"
        )

    def _first_position(self, write_before: int) -> int:
        if self._profile == "packet":
            return self._core.read_pos if not self._core.playing else write_before
        return write_before

    def _begin_turn(self, turn: Hashable | None) -> None:
        if self._turn_open and (turn is None or turn == self._turns[-1][0]):
            return
        if self._turn_open and self._profile != "packet":
            # In-order audio: a new turn follows the previous one's tail.
            # Packets carry their own timeline, so there a turn is a label.
            self._end_turn()
        if turn is None:
            self._anonymous += 1
            turn = ("anonymous", self._anonymous)
        # Position -1: fixed by the first chunk actually stored.
        self._turns.append((turn, -1))
        self._recent.append(turn)
        self._turn_open = True
        self._turn_received = self._core.received

    def _end_turn(self) -> None:
        if self._turn_open:
            if self._core.end_turn() < 0:
                raise BufferError(
                    "jitter buffer full: too many finished turns are waiting to play; "
                    "pop() before ending more"
                )
            self._turn_open = False

    def _played(self) -> int:
        read = self._core.read_pos
        # The latest turn that has started playing; older ones are over.
        while len(self._turns) > 1 and 0 <= self._turns[1][1] < read:
            self._turns.popleft()
        if not self._turns or self._turns[0][1] < 0:
            return 0
        return max(0, read - self._turns[0][1])
