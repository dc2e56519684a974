"""One live run per session, whichever connection or process asks.

Two live runs must never append to one ADK session (the second one's writes
fail as stale, and the conversation forks). A connection therefore *claims*
its session for as long as its run lasts:

* in this process, the claim registry finds the connection that holds the
  session now, asks it to stop (its ``on_taken`` callback) and waits until
  it has;
* across processes, the session's lease (``leases.py``) does the same
  through the lease store: the owner's heartbeat sees the request and calls
  the holder's ``on_taken``. A process whose heartbeat has failed for the
  lease TTL (the store unreachable) has lost its leases: it calls every
  holder's ``on_taken``; so does a late heartbeat for each lease that
  another process took meanwhile.

A claim that cannot be had within ``wait_s`` raises ``SessionBusy``; nothing
of the session is read before the claim is held.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable

import anyio

from .leases import LeaseStore

log = logging.getLogger(__name__)


class SessionBusy(Exception):
    """The session is still held elsewhere after the wait."""


@dataclasses.dataclass(eq=False)
class _Holder:
    on_taken: Callable[[], None]  # asks the holding connection to stop
    done: anyio.Event = dataclasses.field(default_factory=anyio.Event)


class SessionClaims:
    def __init__(
        self, leases: LeaseStore, *, wait_s: float = 10.0, hand_over_s: float = 5.0
    ) -> None:
        self.leases = leases
        # How long a claim waits for another process to give the session up:
        # the owner's heartbeat expiry, plus a hand-over that is slow but alive.
        self.wait_s = wait_s
        self.hand_over_s = hand_over_s  # how long a local holder may take to stop
        self._holders: dict[str, _Holder] = {}
        self._heartbeat: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._holders)

    def holds(self, session_id: str) -> bool:
        """A connection in this process runs the session now."""
        return session_id in self._holders

    async def start(self) -> None:
        await self.leases.heartbeat()  # our leases count only once we have beaten
        self._heartbeat = asyncio.create_task(self._keep_leases())

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
        await self.leases.close()

    async def _keep_leases(self) -> None:
        beaten = time.monotonic()
        while True:
            await self.leases.next_beat()
            started = time.monotonic()
            try:
                wanted = await self.leases.heartbeat()
            except Exception:  # e.g. the file locked past busy_timeout: retry
                log.exception("session lease heartbeat failed")
                if time.monotonic() - beaten < self.leases.ttl_s:
                    continue
                # Our leases have expired: another process may be running
                # these sessions now. Stop ours rather than fork them.
                wanted = list(self._holders)
            else:
                beaten = started
            for session_id in wanted:
                holder = self._holders.get(session_id)
                if holder is not None:
                    holder.on_taken()

    @contextlib.asynccontextmanager
    async def claim(self, session_id: str, on_taken: Callable[[], None]) -> AsyncIterator[None]:
        """Hold ``session_id`` for the body; ``on_taken`` is called if another
        connection claims it meanwhile (the body should then end soon)."""
        previous = self._holders.get(session_id)
        if previous is not None:
            previous.on_taken()
            with anyio.move_on_after(self.hand_over_s):
                await previous.done.wait()
        if not await self.leases.acquire(session_id, self.wait_s):
            raise SessionBusy(session_id)
        holder = _Holder(on_taken)
        self._holders[session_id] = holder
        try:
            yield
        finally:
            if self._holders.get(session_id) is holder:
                del self._holders[session_id]
            # Only now may another connection read the session. (Also when
            # cancelled: the lease must not outlive the run.)
            with anyio.CancelScope(shield=True):
                try:
                    await self.leases.release(session_id)
                except Exception:  # the row left is freed when someone wants it
                    log.warning("could not release the lease of a session", exc_info=True)
            holder.done.set()
