"""Cross-process session leases: one live run per session, whichever process.

Two live runs must never append to one ADK session (the second one's writes
fail as stale, and the conversation forks). Within a process the runtime's
``live`` map enforces that; across processes this lease does. Two stores
keep the same table shapes and the same rules (``LeaseStore``):

* ``SessionLeases`` here: a small SQLite file beside the sessions file (its
  own file, so its writes never wait on ADK's), for ``--workers N`` or
  several servers on one data directory;
* ``PostgresLeases`` (``pg_leases.py``): in the PostgreSQL database that
  holds the sessions, for several hosts on one database.

The tables:

* ``owners``: one row per running server process with an ``expires`` time
  that the process pushes forward every ``heartbeat_s``. A process that
  crashes stops doing so, and after ``ttl_s`` every lease it held is free.
* ``leases``: session id → owner, and ``wanted_by`` when another process asks
  for the session.

Taking over: the new owner marks the lease wanted and waits. The old owner's
heartbeat sees the mark, stops that connection (``error`` chunk, close 1008,
run_live over) and deletes the lease; the new owner then takes it and only
then reads the session. A wedged or crashed old owner is waited for at most
until its heartbeat expires.

Here every statement is a short ``BEGIN IMMEDIATE`` transaction on a single
worker thread, so the event loop never waits on the file lock. Clocks:
``time.time()`` of processes on one machine.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import os
import secrets
import sqlite3
import time
from pathlib import Path
from typing import Protocol

from .sqlite_thread import SqliteThread

log = logging.getLogger(__name__)

TTL_S = 2.0  # a silent owner's leases are free after this
HEARTBEAT_S = 0.25  # how often an owner extends its leases and looks for wanted ones


class LeaseStore(Protocol):
    """What the claims (``claims.py``) and the task engine need of a lease store."""

    owner: str  # this process, as the ``owners`` table names it
    held: set[str]  # sessions this process's connections hold
    ttl_s: float
    heartbeat_s: float

    async def heartbeat(self) -> list[str]:
        """Extend this process's leases; return the held sessions others want,
        or that are no longer this process's (its heartbeat was late and
        another process took them)."""

    async def next_beat(self) -> None:
        """Return when the next heartbeat is due (or another process wants a
        session of ours)."""

    async def acquire(self, session_id: str, timeout_s: float) -> bool:
        """Take the session's lease, asking its owner to let go; False on timeout."""

    async def release(self, session_id: str) -> None: ...

    async def live_owners(self) -> set[str]:
        """The owners whose heartbeat has not expired (this one included)."""

    async def close(self) -> None: ...


def new_owner_id() -> str:
    return f"{os.getpid()}-{secrets.token_hex(8)}"


class Leases(abc.ABC):
    """The bookkeeping every store shares (what this process holds, the
    acquire loop, stray rows); a store supplies the statements."""

    def __init__(self, *, ttl_s: float, heartbeat_s: float, poll_s: float) -> None:
        self.ttl_s = ttl_s
        self.heartbeat_s = heartbeat_s
        self.poll_s = poll_s
        self.owner = new_owner_id()
        self.held: set[str] = set()
        self._acquired: set[str] = set()  # held, and their acquire has returned

    # ------------------------------------------------------------ statements

    @abc.abstractmethod
    async def _beat(self) -> tuple[set[str], list[str]]:
        """Extend this owner's expiry; the sessions it owns, and those of
        them that are wanted."""

    @abc.abstractmethod
    async def _take(self, session_id: str) -> bool:
        """Take the lease if it is free, ours, or its owner expired; else
        mark it wanted by us. Atomic."""

    @abc.abstractmethod
    async def _delete(self, session_ids: list[str]) -> None:
        """Delete these leases if this owner still has them."""

    @abc.abstractmethod
    async def _leave(self) -> None:
        """Delete this owner and its leases (and owners long dead)."""

    async def _wait_after_asking(self, session_id: str) -> None:
        """Wait a little before asking for ``session_id`` again."""
        await asyncio.sleep(self.poll_s)

    async def next_beat(self) -> None:
        await asyncio.sleep(self.heartbeat_s)

    # ------------------------------------------------------------ the interface

    async def heartbeat(self) -> list[str]:
        settled = set(self._acquired)  # their rows were written before this beat
        owned, wanted = await self._beat()
        stray = [s for s in wanted if s not in self.held]
        if stray:  # a row whose release failed: nobody here runs it any more
            await self._delete(stray)
        lost = [s for s in settled if s in self._acquired and s not in owned]
        return list(dict.fromkeys([s for s in wanted if s in self.held] + lost))

    async def acquire(self, session_id: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            # While another connection here still runs it, just wait. Marked
            # held before the row is written, so the heartbeat never takes a
            # fresh row of ours for a stray one.
            if session_id not in self.held:
                self.held.add(session_id)
                taken = False
                try:
                    taken = await self._take(session_id)
                finally:
                    if not taken:
                        self.held.discard(session_id)
                if taken:
                    self._acquired.add(session_id)
                    return True
            if time.monotonic() >= deadline:
                return False
            await self._wait_after_asking(session_id)

    async def release(self, session_id: str) -> None:
        self._acquired.discard(session_id)
        if session_id in self.held:
            try:
                await self._delete([session_id])
            finally:  # a row left behind is deleted by the heartbeat once wanted
                self.held.discard(session_id)

    async def close(self) -> None:
        self._acquired.clear()
        try:
            await self._leave()
        except Exception:  # e.g. the database is gone: shut down all the same
            log.warning(
                "could not delete this process's leases; they expire in %g s",
                self.ttl_s,
                exc_info=True,
            )
        finally:
            self.held.clear()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS owners (owner TEXT PRIMARY KEY, expires REAL NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
    session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, wanted_by TEXT
);
"""


class SessionLeases(Leases):
    """The lease store in a SQLite file: processes on one machine."""

    def __init__(
        self,
        path: Path,
        *,
        ttl_s: float = TTL_S,
        heartbeat_s: float = HEARTBEAT_S,
        poll_s: float = 0.05,
    ) -> None:
        super().__init__(ttl_s=ttl_s, heartbeat_s=heartbeat_s, poll_s=poll_s)
        self.path = path
        self._store = SqliteThread(path, _SCHEMA, "leases")

    async def _beat(self) -> tuple[set[str], list[str]]:
        def beat(db: sqlite3.Connection) -> tuple[set[str], list[str]]:
            expires = time.time() + self.ttl_s
            db.execute("INSERT OR REPLACE INTO owners VALUES (?, ?)", (self.owner, expires))
            rows = db.execute(
                "SELECT session_id, wanted_by IS NOT NULL FROM leases WHERE owner = ?",
                (self.owner,),
            ).fetchall()
            return {row[0] for row in rows}, [row[0] for row in rows if row[1]]

        return await self._store.run(beat)

    async def _delete(self, session_ids: list[str]) -> None:
        def delete(db: sqlite3.Connection) -> None:
            db.executemany(
                "DELETE FROM leases WHERE session_id = ? AND owner = ?",
                [(s, self.owner) for s in session_ids],
            )

        await self._store.run(delete)

    async def _take(self, session_id: str) -> bool:
        def take(db: sqlite3.Connection) -> bool:
            now = time.time()
            row = db.execute(
                "SELECT l.owner, o.expires FROM leases l"
                " LEFT JOIN owners o ON o.owner = l.owner WHERE l.session_id = ?",
                (session_id,),
            ).fetchone()
            if row is None or row[0] == self.owner or row[1] is None or row[1] < now:
                db.execute(
                    "INSERT OR REPLACE INTO leases VALUES (?, ?, NULL)", (session_id, self.owner)
                )
                return True
            db.execute(
                "UPDATE leases SET wanted_by = ? WHERE session_id = ?", (self.owner, session_id)
            )
            return False

        return await self._store.run(take)

    async def live_owners(self) -> set[str]:
        def select(db: sqlite3.Connection) -> set[str]:
            rows = db.execute("SELECT owner FROM owners WHERE expires >= ?", (time.time(),))
            return {row[0] for row in rows}

        return await self._store.run(select)

    async def _leave(self) -> None:
        def leave(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM leases WHERE owner = ?", (self.owner,))
            db.execute("DELETE FROM owners WHERE owner = ?", (self.owner,))
            db.execute(  # owners that crashed long ago
                "DELETE FROM owners WHERE expires < ?", (time.time() - 3600,)
            )

        try:
            await self._store.run(leave)
        finally:
            self._store.close()
