"""The session REST's store work, in a process of its own.

The live conversations' process must never stop for long: a 20 ms frame
that waits 20 ms is late. Reading or creating a stored session of thousands
of events parses megabytes of JSON and builds a hundred thousand objects;
in that process it would stop every conversation for as long — the work
holds the GIL, and the garbage collector, which walks every young object it
finds alive, stops all threads while it walks them (the side effect a thread
cannot avoid: 10–70 ms per collection while such a session is in memory).

So the REST's operations (``store_ops``) run in a worker process with its
own session service (its own connection to the same store: the SQLite
file, whose readers and writer the processes of a machine share, or the
PostgreSQL database). This process sends the checked path parameters and
the body's bytes, and gets back a status and the answer's bytes.

The worker starts at the first REST request (a server whose clients never
use the REST pays nothing), from a forkserver that has imported the server
once, so a new worker starts in milliseconds. At most ``MAX_WAITING``
requests wait for it (503 past that); a worker that dies is replaced at the
next request, and the requests it held get 503.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import multiprocessing
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..settings import Settings
from ..wire.http_body import HttpError
from . import session_ops as store_ops

log = logging.getLogger(__name__)

MAX_WAITING = 64  # REST requests waiting for the worker, at most

# The operations a worker runs, by name (what crosses to it is a name and
# plain values).
_OPS: dict[str, Callable[..., Awaitable[store_ops.Reply]]] = {
    "create": store_ops.create,
    "get": store_ops.get,
    "list": store_ops.list_all,
    "delete": store_ops.delete,
    "patch": store_ops.patch,
    "expire": store_ops.expire,
}

# In the worker process: its session service and the loop its calls run on.
_worker: dict[str, Any] = {}


def _start_worker(settings: Settings) -> None:
    from ..storage.session_access import build_session_service

    # No live run uses it: a session it returns holds all its events.
    unbounded = dataclasses.replace(settings, live_history_events=0)
    _worker["service"] = build_session_service(unbounded)
    _worker["loop"] = asyncio.new_event_loop()


def _serve(op: str, args: tuple[Any, ...]) -> store_ops.Reply:
    try:
        loop: asyncio.AbstractEventLoop = _worker["loop"]
        return loop.run_until_complete(_OPS[op](_worker["service"], *args))
    except HttpError as exc:
        return store_ops.failure(exc.status, exc.detail)


class StoreWorker:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.app_names = [settings.app_name]  # the apps served (runtime.py sets them)
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._waiting = 0
        self._starting = asyncio.Lock()

    async def call(self, op: str, *args: Any) -> store_ops.Reply:
        """Run ``store_ops``' ``op`` in the worker; 503 when too many wait or
        the worker died under the request."""
        if self._waiting >= MAX_WAITING:
            raise HttpError(503, f"the session store is busy ({MAX_WAITING} requests waiting)")
        self._waiting += 1
        try:
            pool = await self._started()
            return await asyncio.wrap_future(pool.submit(_serve, op, args))
        except BrokenProcessPool:
            log.error("the session store's worker process died; starting another")
            if self._pool is pool:
                self._pool = None
            raise HttpError(503, "the session store's worker stopped; try again") from None
        finally:
            self._waiting -= 1

    async def _started(self) -> concurrent.futures.ProcessPoolExecutor:
        """The pool, its process started: in a thread, since starting it
        waits for the forkserver (the first time, for its imports too)."""
        async with self._starting:
            if self._pool is None:
                try:
                    self._pool = await asyncio.to_thread(self._start, self._settings)
                except Exception:
                    log.exception("the session store's worker process did not start")
                    raise HttpError(503, "the session store's worker did not start") from None
            return self._pool

    @staticmethod
    def _start(settings: Settings) -> concurrent.futures.ProcessPoolExecutor:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(
            ["audiocore_server.http.session_ops", "audiocore_server.storage.session_access"]
        )
        pool = concurrent.futures.ProcessPoolExecutor(
            1, mp_context=context, initializer=_start_worker, initargs=(settings,)
        )
        pool.submit(os.getpid).result()  # the process is up
        return pool

    async def expire_periodically(
        self,
        *,
        wait: Callable[[float], Awaitable[object]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Every hour (or ``api_session_ttl_s``, if shorter): the API users'
        sessions idle longer than ``api_session_ttl_s`` are deleted, in the
        worker (the list may be long). Off with a TTL of 0. ``wait`` (for a
        period) and ``clock`` are the loop's time, a test's to drive."""
        ttl = self._settings.api_session_ttl_s
        if ttl <= 0:
            return
        while True:
            await wait(min(3600.0, ttl))  # first after a while: no worker at start
            try:
                deleted = 0
                for app_name in self.app_names:
                    reply = await self.call("expire", app_name, ttl, clock())
                    if reply.status == 200:
                        deleted += json.loads(reply.body).get("deleted", 0)
                if deleted:
                    log.info("deleted %d API sessions idle for %g s", deleted, ttl)
            except Exception:  # the store is down: health says so; try later
                log.warning("expiring idle API sessions failed", exc_info=True)

    async def pid(self) -> int:
        """The worker's process id (it starts if it has not)."""
        pool = await self._started()
        return await asyncio.wrap_future(pool.submit(os.getpid))

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)
