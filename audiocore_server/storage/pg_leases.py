"""Session leases in PostgreSQL: several hosts on one database.

The same tables and rules as the SQLite store (``leases.py``), in the
database that holds the sessions, so hosts behind a load balancer share
nothing else: ``audiocore_lease_owners`` (one row per process, with the
expiry its heartbeat pushes forward) and ``audiocore_leases`` (session id →
owner, ``wanted_by``).

Two differences, both because the processes are on different machines:

* Expiry is on the database's clock (``clock_timestamp()``), never a host's:
  hosts' clocks drift, the database's is one.
* The "wanted" signal is a ``NOTIFY``: a process that marks a lease wanted
  wakes the owner's heartbeat at once (channel ``audiocore_lease_wanted``,
  the owner's id as payload), and an owner that deletes a wanted lease wakes
  the processes waiting for one (``audiocore_lease_freed``). Polling stays as
  the fallback with the SQLite store's semantics: a notification lost with
  a dropped connection costs at most a heartbeat or a poll.

asyncpg directly, not SQLAlchemy (which ADK's session service runs on):
LISTEN belongs to one long-lived connection (asyncpg's ``add_listener``),
which SQLAlchemy's async layer has no interface for, and the store is a few
fixed statements, for which SQLAlchemy's Core would only add a layer over
the same driver. asyncpg is already what ``postgresql+asyncpg://`` URLs
load (the ``db`` dependency group); every call is a coroutine, so the event loop
never blocks, and every statement is bounded by ``STATEMENT_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from ..settings import is_postgres_url
from .leases import HEARTBEAT_S, TTL_S, Leases

_T = TypeVar("_T")

WANTED = "audiocore_lease_wanted"
FREED = "audiocore_lease_freed"
# A database that does not answer within this long fails the call (and the
# connection that asked gets an error), instead of hanging it.
STATEMENT_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 5.0
POOL_SIZE = 3  # the connections' acquires and releases (the heartbeat has its own)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audiocore_lease_owners (
    owner TEXT PRIMARY KEY, expires TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS audiocore_leases (
    session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, wanted_by TEXT
);
"""
# Processes that start together must not race on CREATE TABLE IF NOT EXISTS
# (it can fail on the catalog's unique index): one at a time.
_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(hashtext('audiocore_leases_schema'))"


async def open_pool(
    dsn: str, schema: str, *, min_size: int = 1, max_size: int = 3, **options: Any
) -> asyncpg.Pool:
    """A pool on ``dsn`` with ``schema`` created (one host at a time: the
    schema lock); closed again if that fails."""
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        timeout=CONNECT_TIMEOUT_S,
        command_timeout=STATEMENT_TIMEOUT_S,
        **options,
    )
    try:
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(_SCHEMA_LOCK)
            await conn.execute(schema)
    except BaseException:
        await pool.close()
        raise
    return pool


_BEAT = """
WITH beat AS (
    INSERT INTO audiocore_lease_owners VALUES ($1, clock_timestamp() + $2::interval)
    ON CONFLICT (owner) DO UPDATE SET expires = EXCLUDED.expires
)
SELECT session_id, wanted_by IS NOT NULL FROM audiocore_leases WHERE owner = $1
"""
# Taken if free, ours, or its owner's heartbeat expired; one statement, so
# two processes taking a free lease at once find it taken by one of them.
_TAKE = """
INSERT INTO audiocore_leases AS l (session_id, owner) VALUES ($1, $2)
ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, wanted_by = NULL
WHERE l.owner = EXCLUDED.owner OR NOT EXISTS (
    SELECT 1 FROM audiocore_lease_owners o
    WHERE o.owner = l.owner AND o.expires >= clock_timestamp()
)
RETURNING true
"""
_ASK = f"""
WITH asked AS (
    UPDATE audiocore_leases SET wanted_by = $2 WHERE session_id = $1 AND owner <> $2
    RETURNING owner
)
SELECT pg_notify('{WANTED}', owner) FROM asked
"""
_DELETE = f"""
WITH gone AS (
    DELETE FROM audiocore_leases WHERE session_id = ANY($1::text[]) AND owner = $2
    RETURNING session_id, wanted_by
)
SELECT pg_notify('{FREED}', session_id) FROM gone WHERE wanted_by IS NOT NULL
"""
_LEAVE_LEASES = f"""
WITH gone AS (DELETE FROM audiocore_leases WHERE owner = $1 RETURNING session_id, wanted_by)
SELECT pg_notify('{FREED}', session_id) FROM gone WHERE wanted_by IS NOT NULL
"""
_LIVE = "SELECT owner FROM audiocore_lease_owners WHERE expires >= clock_timestamp()"
_LEAVE_OWNERS = """
DELETE FROM audiocore_lease_owners
WHERE owner = $1 OR expires < clock_timestamp() - interval '1 hour'
"""


def asyncpg_dsn(url: str) -> str:
    """The libpq-style DSN asyncpg takes for a SQLAlchemy URL
    (``postgresql+asyncpg://…`` → ``postgresql://…``)."""
    if not is_postgres_url(url):
        scheme = urlsplit(url).scheme
        raise ValueError(f"expected a postgresql:// database URL, got scheme {scheme!r}")
    return urlunsplit(urlsplit(url)._replace(scheme="postgresql"))


class PostgresLeases(Leases):
    """The lease store in PostgreSQL: processes on any number of hosts."""

    def __init__(
        self,
        url: str,
        *,
        ttl_s: float = TTL_S,
        heartbeat_s: float = HEARTBEAT_S,
        poll_s: float = 0.1,
    ) -> None:
        super().__init__(ttl_s=ttl_s, heartbeat_s=heartbeat_s, poll_s=poll_s)
        self._dsn = asyncpg_dsn(url)
        self._pool: asyncpg.Pool | None = None
        self._own: asyncpg.Connection | None = None
        self._connecting = asyncio.Lock()
        self._beating = asyncio.Lock()  # one statement at a time on our own connection
        self._wanted = asyncio.Event()  # someone wants a lease of ours
        # Per session asked for: set (and removed) when its lease is freed.
        # Made before the ask, so a release that overtakes the answer counts.
        self._asking: dict[str, asyncio.Event] = {}

    # ------------------------------------------------------------ connections

    async def _ready(self) -> asyncpg.Pool:
        """The pool (with the schema created), and the process's own
        connection, which listens and beats; (re)opened here when missing
        or dropped."""
        async with self._connecting:
            if self._pool is None:
                # Opened up front and kept: a statement never waits for a
                # new connection (a fork and an authentication on the
                # database's side, slow on a busy server).
                pool = await open_pool(
                    self._dsn,
                    _SCHEMA,
                    min_size=POOL_SIZE,
                    max_size=POOL_SIZE,
                    max_inactive_connection_lifetime=0,
                )
                self._pool = pool
            if self._own is None or self._own.is_closed():
                if self._own is not None:
                    # Notifications were lost while it was down: beat at once.
                    self._own = None
                    self._wanted.set()
                own = await asyncpg.connect(
                    self._dsn, timeout=CONNECT_TIMEOUT_S, command_timeout=STATEMENT_TIMEOUT_S
                )
                await own.add_listener(WANTED, self._notified)
                await own.add_listener(FREED, self._notified)
                self._own = own
            return self._pool

    def _notified(self, _conn: object, _pid: int, channel: str, payload: object) -> None:
        if channel == WANTED and payload == self.owner:
            self._wanted.set()
        elif channel == FREED and isinstance(payload, str):
            freed = self._asking.pop(payload, None)
            if freed is not None:
                freed.set()

    async def _run(self, call: Callable[[asyncpg.Pool], Awaitable[_T]]) -> _T:
        """``call(pool)``, finished even if the caller is cancelled."""

        async def run() -> _T:
            return await call(await self._ready())

        return await _finished(run())

    # ------------------------------------------------------------ statements

    async def _beat(self) -> tuple[set[str], list[str]]:
        # On the process's own connection: the heartbeat never queues
        # behind the connections' statements for the pool.
        async def beat() -> list[asyncpg.Record]:
            await self._ready()
            assert self._own is not None
            async with self._beating:
                expires_in = datetime.timedelta(seconds=self.ttl_s)
                return await self._own.fetch(_BEAT, self.owner, expires_in)

        rows = await _finished(beat())
        return {row[0] for row in rows}, [row[0] for row in rows if row[1]]

    async def next_beat(self) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wanted.wait(), self.heartbeat_s)
        self._wanted.clear()

    async def _take(self, session_id: str) -> bool:
        async def take(pool: asyncpg.Pool) -> bool:
            if await pool.fetchval(_TAKE, session_id, self.owner):
                return True
            await pool.execute(_ASK, session_id, self.owner)
            return False

        self._asking.setdefault(session_id, asyncio.Event())
        taken = False
        try:
            taken = await self._run(take)
        finally:
            if taken:
                self._asking.pop(session_id, None)
        return taken

    async def _wait_after_asking(self, session_id: str) -> None:
        freed = self._asking.get(session_id)
        if freed is None:
            # Not asked (a connection here holds it: poll, as the SQLite
            # store does), or freed since we asked: ask again at once. Either
            # way a wait, never a spin that starves the event loop.
            await asyncio.sleep(self.poll_s if session_id in self.held else 0)
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(freed.wait(), self.poll_s)

    async def _delete(self, session_ids: list[str]) -> None:
        await self._run(lambda pool: pool.execute(_DELETE, session_ids, self.owner))

    async def live_owners(self) -> set[str]:
        return {row[0] for row in await self._run(lambda pool: pool.fetch(_LIVE))}

    async def _leave(self) -> None:
        try:
            if self._pool is not None:
                async with self._pool.acquire() as conn, conn.transaction():
                    await conn.execute(_LEAVE_LEASES, self.owner)
                    await conn.execute(_LEAVE_OWNERS, self.owner)
        finally:
            own, self._own = self._own, None
            pool, self._pool = self._pool, None
            if own is not None:
                await _close(own.close(timeout=CONNECT_TIMEOUT_S), own.terminate)
            if pool is not None:
                await _close(pool.close(), pool.terminate)


async def _finished(call: Coroutine[Any, Any, _T]) -> _T:
    """Await ``call``, which runs to its end even if the caller is cancelled:
    a query cancelled midway leaves its connection waiting for the server's
    acknowledgement, and the next statement on it could time out."""
    task = asyncio.ensure_future(call)
    task.add_done_callback(_consume_exception)
    return await asyncio.shield(task)


def _consume_exception(task: asyncio.Future[Any]) -> None:
    # Read here so a call whose caller was cancelled never logs "never retrieved".
    if not task.cancelled():
        task.exception()


async def _close(closing: Awaitable[None], terminate: Callable[[], None]) -> None:
    """Close politely; a database that does not answer is dropped instead."""
    try:
        await asyncio.wait_for(closing, CONNECT_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
        terminate()
