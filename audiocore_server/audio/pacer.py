"""The connection's output: model audio in an ``audiocore.JitterBuffer``
(profile "generator"), released at real-time pace, with the other UI chunks
kept in order around it.

Pacing model: the client plays every frame as it arrives, back to back. We
keep the time at which its playback of everything sent so far will end
(``_play_end``) and release the next frame only when that is at most
``lead_s`` ahead of now, so the client holds ≈``lead_s`` of audio — enough to
ride out network jitter, small enough that a barge-in flush is heard at once.

The jitter buffer frames the audio, pads a turn's tail to a whole frame,
conceals when the model stalls mid-turn (only once the client is about to run
dry: the lead is the jitter allowance; a turn that ends in such a stall owes
the concealment's fade-out, a frame sent before its finish), and on
``flush`` drops what is buffered and rejects late chunks of the interrupted
turn. It is also the one account of what is queued: non-audio chunks carry
its ``write_position`` when they were queued and leave once its
``read_position`` has reached it, and the pacer keeps no count of its own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque
from collections.abc import Hashable
from typing import Any, Protocol

import audiocore

from ..wire import chunks

_LATE_TOLERANCE_S = 0.005
# Event-loop timers fire with millisecond granularity (epoll and libuv round
# up), so a frame due within this much is released now rather than after a
# timer that would wake up to 1 ms late. Against a lead of ~150 ms, being up
# to 2 ms early is harmless.
_TIMER_SLACK_S = 0.002


class PlaybackListener(Protocol):
    """Told what the client plays and when, on the pacer's clock (the echo
    canceller's reference: audiocore_server/audio/echo.py)."""

    def played(self, pcm: bytes, starts_at: float) -> None: ...

    def dropped(self, at: float) -> None: ...


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@dataclasses.dataclass(frozen=True)
class AudioFrame:
    pcm: bytes
    duration: float
    queued_at: float  # when its audio reached the server
    concealed: bool = False  # made up by the jitter buffer during a model stall


@dataclasses.dataclass
class PacerStats:
    frames: int = 0
    concealed_frames: int = 0
    # Samples sent that are no sample of the model's audio: concealment, a
    # turn's padding to a whole frame, a stalled turn's fade-out.
    made_up_samples: int = 0
    # Released after the client's playback had already run dry although the
    # frame was waiting in time: the sender (event loop) fell behind.
    late_frames: int = 0
    flushes: int = 0
    flushed_samples: int = 0
    rejected_chunks: int = 0  # late audio of an interrupted turn


class OutputPacer:
    def __init__(
        self,
        *,
        sample_rate: int,
        frame_ms: int,
        lead_s: float,
        max_audio_s: float,
        max_messages: int,
        clock: Any = time.monotonic,
    ) -> None:
        self._rate = sample_rate
        self._jb = audiocore.JitterBuffer(
            sample_rate,
            frame_ms=frame_ms,
            profile="generator",
            high_water_ms=max_audio_s * 1000,
            # Room above the high-water mark for the chunk that crosses it.
            capacity_ms=max_audio_s * 1000 + 10_000,
        )
        self._frame_s = self._jb.frame_samples / sample_rate
        self._lead = lead_s
        self._max_messages = max_messages
        self._clock = clock
        # Positions are the jitter buffer's (samples): a chunk goes once the
        # audio queued before it has; a frame's arrival is that of the chunk
        # holding its last sample.
        self._messages: deque[tuple[int, chunks.Chunk]] = deque()  # (write position, chunk)
        self._arrivals: deque[tuple[int, float]] = deque()  # (write position, received at)
        self._waiter: asyncio.Future[None] | None = None  # the consumer, asleep
        self._room = asyncio.Event()
        self._room.set()
        self._play_end = 0.0
        # A turn ended in a stall after its last sample had left: the jitter
        # buffer still owes the fade-out of its concealment, one frame that
        # is never "ready", and holds the next turn's audio behind it until
        # it is popped.
        self._fade_owed = False
        # When the last audio frame returned by get_nowait() was due: the
        # later of its arrival and the pacing deadline. Its send time minus
        # this is the delay the server added beyond the intended pacing.
        self.last_due = 0.0
        self.stats = PacerStats()
        self._listener: PlaybackListener | None = None

    def listen(self, listener: PlaybackListener) -> None:
        """Tell ``listener`` each frame released, with when the client
        starts playing it, and each flush, with when the client stopped."""
        self._listener = listener

    # ------------------------------------------------------------ producers
    @property
    def buffered_seconds(self) -> float:
        """Audio queued and not yet released."""
        return (self._jb.write_position - self._jb.read_position) / self._rate

    @property
    def playback_ends_at(self) -> float:
        """When the client will have played everything queued here (on the
        pacer's clock): the audio sent, then the audio still to send."""
        return (
            max(self._play_end, self._clock()) + self.buffered_seconds
            if self.buffered_seconds
            else self._play_end
        )

    def played_seconds(self) -> float:
        """How much of the model's current turn (the latest that started
        playing) the client has played by now: the audio released of it,
        less what the client still holds — it plays the frames back to back,
        so it is done at ``_play_end``. Exact to the sample the pacer sent,
        which is what a provider that truncates its memory of an answer at
        the heard position needs (audiocore_server/models/played_audio.py)."""
        ahead = max(0.0, self._play_end - float(self._clock()))
        return max(0.0, self._jb.played / self._rate - ahead)

    def put_message_nowait(self, chunk: chunks.Chunk) -> bool:
        """Queue a chunk after the audio queued so far; False (dropped) if
        ``max_messages`` are already waiting."""
        if len(self._messages) >= self._max_messages:
            return False
        self._messages.append((self._jb.write_position, chunk))
        self._wake()
        return True

    async def put_message(self, chunk: chunks.Chunk) -> None:
        while not self.put_message_nowait(chunk):
            await self._wait_room()

    async def put_audio(
        self, pcm: bytes, received_at: float | None = None, turn: Hashable | None = None
    ) -> None:
        """Queue PCM16 of ``turn``; waits while ``max_audio_s`` is held, or while
        so many ended turns wait to play that this one could not end.

        Audio of a turn interrupted by ``flush`` is dropped.
        ``received_at``: when the audio reached the server (for latency stats).
        """
        while self._jb.backpressure:
            await self._wait_room()
        if not pcm:
            return
        if not self._jb.push(pcm, turn=turn):
            self.stats.rejected_chunks += 1
            return
        arrival = self._clock() if received_at is None else received_at
        self._arrivals.append((self._jb.write_position, arrival))
        self._wake()

    def end_turn(self) -> None:
        """The model's turn is over: its tail plays, padded to a whole frame."""
        self._jb.end_turn()
        self._fade_owed = self._jb.playing and not self._jb.frames_ready
        self._wake()

    def flush(self, notice: chunks.Chunk | None = None) -> int:
        """Barge-in: drop every queued audio frame now; ``notice`` goes out next.

        Late chunks of the interrupted turn are rejected from now on. Returns
        the number of samples dropped. Queued non-audio chunks keep their
        order behind the notice.
        """
        dropped = self._jb.write_position - self._jb.read_position
        # The client drops its buffer on data-interrupted: no fade. Every
        # queued chunk's position is now behind the read position.
        self._jb.flush(fade_ms=0)
        self._arrivals.clear()
        self._fade_owed = False
        if notice is not None:
            self._messages.appendleft((0, notice))
        self._play_end = self._clock()
        if self._listener is not None:
            self._listener.dropped(self._play_end)
        self.stats.flushes += 1
        self.stats.flushed_samples += dropped
        self._wake()
        self._room.set()
        return dropped

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _sleep(self, timeout: float | None) -> None:
        """Until woken by a producer or a flush, or ``timeout`` seconds pass.

        A bare future plus one timer: this runs for every paced frame, and
        ``asyncio.wait_for`` would cost a task per call.
        """
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _resolve, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    async def _wait_room(self) -> None:
        self._room.clear()
        await self._room.wait()

    # ------------------------------------------------------------ consumer
    async def wait_due(self) -> None:
        """Until an item is due (``get_nowait`` will return it), without taking it."""
        while True:
            due, timeout = self._next()
            if due:
                return
            await self._sleep(timeout)

    def get_nowait(self) -> AudioFrame | chunks.Chunk | None:
        """The next item if it is due now, else None."""
        due, _ = self._next()
        if not due:
            return None
        if self._message_due():
            self._room.set()
            return self._messages.popleft()[1]
        real = self._jb.frames_ready > 0  # a frame of audio, or a turn's padded tail
        self._fade_owed = False
        start = self._jb.read_position
        pcm = self._jb.pop()
        self.stats.made_up_samples += self._jb.frame_samples - (self._jb.read_position - start)
        return self._release(pcm, self._clock(), real)

    def _message_due(self) -> bool:
        # An owed fade-out is the ended turn's last frame: it goes before
        # the turn's finish, which a client takes as the end of its audio.
        return (
            bool(self._messages)
            and self._messages[0][0] <= self._jb.read_position
            and not self._fade_owed
        )

    def _next(self) -> tuple[bool, float | None]:
        """(due now, else how long to sleep: None until woken)."""
        if self._message_due():
            return True, 0.0
        now = self._clock()
        if self._jb.frames_ready or self._fade_owed:
            wait = self._play_end - self._lead - now
        else:
            # A stall mid-turn: conceal once the client is about to run dry
            # (never before the turn's first frame), so the lead stays the
            # jitter allowance — or at once when a busy loop woke us after
            # it ran dry: the turn's last samples are in that frame.
            if not self._jb.turn_played:
                return False, None
            wait = self._play_end - now
        if wait > _TIMER_SLACK_S:
            return False, wait - _TIMER_SLACK_S
        return True, 0.0

    def _release(self, pcm: bytes, now: float, real: bool) -> AudioFrame:
        queued_at = now
        if real:
            end = self._jb.read_position
            arrivals = self._arrivals
            while arrivals and arrivals[0][0] < end:
                arrivals.popleft()
            if arrivals:
                queued_at = arrivals[0][1]
                if arrivals[0][0] == end:
                    arrivals.popleft()
            if queued_at < self._play_end < now - _LATE_TOLERANCE_S:
                self.stats.late_frames += 1
        else:
            self.stats.concealed_frames += 1
        self.last_due = max(queued_at, self._play_end - self._lead)
        starts = max(self._play_end, now)
        if self._listener is not None:
            self._listener.played(pcm, starts)
        self._play_end = starts + self._frame_s
        self.stats.frames += 1
        self._room.set()
        return AudioFrame(pcm, self._frame_s, queued_at, concealed=not real)
