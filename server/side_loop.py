"""A second event loop, in a thread of its own, for bulk work off the main loop.

The main loop carries every live conversation: a 20 ms frame that waits
20 ms is late. Reading a stored session of thousands of events (its rows,
ADK's validation of each event, its JSON) takes a second of CPU and, on the
main loop, stops every conversation for that second. ``SideLoop`` runs such
work on an event loop of its own in a worker thread, with a resource used
only there (a session service with its own connections: a database
connection belongs to one loop). The main loop only awaits the result; the two threads
share the CPU through the GIL, which Python code gives back every few
milliseconds. The work must not make long single C calls (see
``large_json``), which hold the GIL to their end.

Cancelling the awaiting coroutine (a client that went away) cancels the
work on the side loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

_R = TypeVar("_R")
_T = TypeVar("_T")

log = logging.getLogger(__name__)


class SideLoop(Generic[_R]):
    """``await side.run(work)`` runs ``work(resource)`` on the side loop."""

    def __init__(
        self,
        name: str,
        resource: _R,
        close: Callable[[_R], Awaitable[None]] | None = None,
    ) -> None:
        self._name = name
        self._resource = resource
        self._close = close
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def resource(self) -> _R:
        """What ``run``'s work receives; to be used on the side loop only."""
        return self._resource

    async def start(self) -> None:
        main = asyncio.get_running_loop()
        ready: asyncio.Future[None] = main.create_future()
        loop = asyncio.new_event_loop()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(main.call_soon_threadsafe, ready.set_result, None)
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=serve, name=self._name, daemon=True)
        self._thread.start()
        await ready
        self._loop = loop

    async def run(self, work: Callable[[_R], Awaitable[_T]]) -> _T:
        if self._loop is None:
            raise RuntimeError(f"{self._name} is not running")
        resource = self._resource

        async def call() -> _T:
            return await work(resource)

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call(), self._loop))

    async def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._close is not None:
            try:
                await self.run(self._close)
            except Exception:
                log.exception("%s: closing its resource failed", self._name)
        self._loop = None
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)
