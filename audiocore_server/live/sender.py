"""The pacer → the socket: what leaves, when, and what it cost.

``Sender.run`` is the connection's sender task: it sleeps until the pacer
has an item due and sends it. Frames that are due the moment their audio
arrives (a turn's first ones, up to the lead) the pump sends itself, at
once (``send_due``): woken through the event loop's queue, the sender would
run only after every other task already waiting in it, and at a turn end
every connection's pump has a burst of events queued (at 100 sessions, 1 ms
median and 8 ms p99 for exactly these frames). All sends go through one
lock, taken before an item leaves the pacer, so the order on the wire is
the pacer's whatever task sends. (A send suspends only when the client's
socket is backed up; the pump then waits with the sender, at most
``send_timeout_s``, and the client hears nothing meanwhile anyway.)

A client that does not read for ``send_timeout_s`` ends the connection.
Measured here: each paced frame's delay beyond its due time, and after a
barge-in how long the last stale frame took to leave.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from starlette.websockets import WebSocket

from ..audio.pacer import AudioFrame, OutputPacer
from ..ops.metrics import ConnectionMetrics
from ..ops.turn_timing import TurnTimer
from ..turns.metadata import AudioCount
from ..wire import chunks, protocol
from .frames import Wire
from .shutdown import Shutdown

# What the turn timer reads of the chunks leaving: tool calls' round trips.
_TOOL_CHUNKS = (
    chunks.ToolInput,
    chunks.ToolApprovalRequest,
    chunks.ToolOutput,
    chunks.ToolOutputDenied,
    chunks.ToolOutputError,
)


class Sender:
    def __init__(
        self,
        ws: WebSocket,
        wire: Wire,
        pacer: OutputPacer,
        *,
        output_rate: int,
        send_timeout_s: float,
        metrics: ConnectionMetrics,
        timer: TurnTimer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ws = ws
        self._wire = wire
        self._pacer = pacer
        self._rate = output_rate
        self._timeout = send_timeout_s
        self._metrics = metrics
        self._timer = timer
        self._clock = clock
        self._lock = asyncio.Lock()  # acquiring a free one never suspends
        self._flushed_at: float | None = None
        self._audio_sent = AudioCount(output_rate)  # for the turn's finish chunk

    @property
    def sends_session(self) -> bool:
        return self._wire.sends_session

    async def send_now(self, chunk: chunks.Chunk) -> None:
        """Send a chunk now, outside the pacer (before the conversation starts)."""
        for frame in self._wire.chunk_frames(chunk):
            await self._ws.send_text(frame)

    def flushed(self) -> None:
        """Barge-in: the pacer dropped its audio now."""
        self._flushed_at = self._clock()

    async def run(self) -> None:
        pacer = self._pacer
        while True:
            await pacer.wait_due()
            async with self._lock:
                item = pacer.get_nowait()  # None if the pump sent it meanwhile
                if item is not None:
                    await self._send(item)

    async def send_due(self) -> None:
        """From the pump: send what is due now, unless a send is under way."""
        if self._lock.locked():
            return  # the sender is sending; it takes the rest in order
        pacer = self._pacer
        async with self._lock:
            while (item := pacer.get_nowait()) is not None:
                await self._send(item)

    async def _send(self, item: AudioFrame | chunks.Chunk) -> None:
        popped_at = self._clock()
        ws, wire = self._ws, self._wire
        deadline = asyncio.timeout(self._timeout)
        try:
            # asyncio's timeout, not anyio's scope: once per frame sent.
            async with deadline:
                if isinstance(item, AudioFrame):
                    for frame in wire.audio_frames(item.pcm, self._rate):
                        if isinstance(frame, bytes):
                            await ws.send_bytes(frame)
                        else:
                            await ws.send_text(frame)
                    self._audio_sent.sent(len(item.pcm))
                else:
                    if isinstance(item, chunks.Finish):
                        item = self._audio_sent.on_finish(item)
                    for text in wire.chunk_frames(item):
                        await ws.send_text(text)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise Shutdown(
                protocol.CLOSE_POLICY_VIOLATION,
                "client is not reading (send timed out)",
                unsendable=True,
            ) from None
        audio = isinstance(item, AudioFrame)
        if audio:
            # Paced frames may leave up to the timer slack early: count 0.
            self._metrics.output_latency(max(0.0, self._clock() - self._pacer.last_due))
            self._timer.client_audio()
        elif isinstance(item, _TOOL_CHUNKS):
            self._timer.tool_chunk(item)
        elif isinstance(item, chunks.Interrupted) and item.source == "model":
            seconds = self._timer.barge_in_told()
            if seconds is not None:
                self._metrics.bargein_latency(seconds)
        flushed_at = self._flushed_at
        if flushed_at is not None and (audio or isinstance(item, chunks.Interrupted)):
            # Barge-in: how long after the flush the last stale frame left
            # (0 when none was on its way out).
            stale = audio and popped_at < flushed_at
            silence = self._clock() - flushed_at if stale else 0.0
            self._metrics.bargein_last_frame_s.append(silence)
            self._timer.silence(silence)
            self._flushed_at = None
