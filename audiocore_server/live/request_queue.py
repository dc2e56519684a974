"""ADK's ``LiveRequestQueue`` with the bounds the server enforces."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

from google.adk.agents.live_request_queue import LiveRequest, LiveRequestQueue
from google.genai import types

from ..tools.confirmation import ConfirmationHook


class BoundedLiveRequestQueue(LiveRequestQueue):
    """ADK's queue (unbounded by design) with bounds the server enforces.

    Two rooms in one queue (ADK reads it in order): realtime audio is dropped
    rather than queued past ``max_pending`` — audio that waits seconds for a
    stalled model is useless, and memory stays flat — and it never takes the
    room of what the user said or did: typed turns, images and other content
    have a room of their own of the same size. Turn edges, tool answers and
    the server's own requests pass both bounds (a few bytes each; dropped,
    a turn would stay open or a tool call unanswered for good).
    """

    def __init__(self, max_pending: int) -> None:
        super().__init__()
        self.max_pending = max_pending
        self.dropped_chunks = 0
        # The bounded requests queued and not yet read by ADK, by identity
        # (the queue holds them): "realtime" or "content".
        self._rooms: dict[int, str] = {}
        self._used = {"realtime": 0, "content": 0}
        self._consumer: asyncio.Task[object] | None = None
        self._on_consumer_failed: Callable[[BaseException], None] | None = None
        # A transfer to another agent: the reader ADK is about to cancel, and
        # what it must not send to the old agent's model (hold_for_transfer).
        self._held: asyncio.Task[object] | None = None
        self._handover: collections.deque[LiveRequest] = collections.deque()
        # The connection's: asks its client about an ADK tool's call that
        # awaits confirmation (``tools/confirmation.py`` finds it here, in
        # the tool context's invocation); None once closed.
        self.confirmation_hook: ConfirmationHook | None = None

    def watch_consumer(self, on_failed: Callable[[BaseException], None]) -> None:
        """Call ``on_failed`` if the task reading this queue dies of an error.

        That task is ADK's, sending the requests to the model; ADK awaits it
        only when the model's side ends, so a request the model connection
        cannot take (a send that raises) would otherwise leave the run alive
        but deaf: no error, no close. (It may end normally or be cancelled,
        as when ADK reconnects: that is not a failure.)"""
        self._on_consumer_failed = on_failed

    def close(self) -> None:
        """Close for ADK; a closed queue reports no failure. (The watcher
        is the connection's method: held past the close, it ties the
        connection into a reference cycle that only the collector frees.)"""
        super().close()
        self._on_consumer_failed = None
        self.confirmation_hook = None
        self._consumer = None

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    def has_room(self) -> bool:
        """Room for another bounded content request (a typed turn, an image)."""
        return self._used["content"] < self.max_pending

    def offer_realtime(self, blob: types.Blob) -> bool:
        """Queue input audio; False (dropped) if its room is full."""
        if self._used["realtime"] >= self.max_pending:
            self.dropped_chunks += 1
            return False
        self._take("realtime", LiveRequest(blob=blob))
        return True

    def offer_content(self, request: LiveRequest) -> bool:
        """Queue a typed turn, an image, other content; False (dropped) if
        its room is full."""
        if not self.has_room():
            return False
        self._take("content", request)
        return True

    def _take(self, room: str, request: LiveRequest) -> None:
        self._used[room] += 1
        self._rooms[id(request)] = room
        self.send(request)

    def hold_for_transfer(self) -> None:
        """The run is passing to another agent (ADK's ``transfer_to_agent``).

        ADK keeps the old agent's model connection, and its task reading
        this queue, for a second before it cancels them and starts the new
        agent's: whatever that task read meanwhile would go to a model about
        to be closed — the user's words and audio lost. From now on that
        task takes only function responses (ADK's own answer to the
        transfer call, which the old model is owed); everything else waits,
        in order, for the next reader (the new agent's)."""
        self._held = self._consumer

    async def get(self) -> LiveRequest:
        task = asyncio.current_task()
        if task is not None and task is self._held:
            request = await self._get_for_old_agent()
        elif self._handover:
            request = self._handover.popleft()
        else:
            if task is not None and task is not self._consumer:
                self._consumer = task
                task.add_done_callback(self._consumer_done)
            request = await super().get()
            if task is not None and task is self._held:  # held while it waited
                self._handover.append(request)
                request = await self._get_for_old_agent()
        room = self._rooms.pop(id(request), None)
        if room is not None:
            self._used[room] -= 1
        return request

    async def _get_for_old_agent(self) -> LiveRequest:
        """The held reader's next function response (until ADK cancels it)."""
        while True:
            request = await super().get()
            content = request.content
            if content and content.parts and any(p.function_response for p in content.parts):
                return request
            self._handover.append(request)

    def _consumer_done(self, task: asyncio.Task[object]) -> None:
        if task.cancelled() or self._on_consumer_failed is None:
            return
        error = task.exception()
        if error is not None:
            self._on_consumer_failed(error)
