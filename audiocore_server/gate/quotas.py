"""Quotas per token owner across processes and hosts: live sockets at once
(``max_live_sessions_per_owner``) and live minutes per UTC day
(``live_minutes_per_owner_per_day``).

A token's ``maxSessions`` is counted in one process (``credentials.py``);
these are counted where the sessions' leases are (``leases.py``): a SQLite
file in the data directory for the processes of one machine, or the
PostgreSQL database for several hosts. The tables:

* live sockets: one row per admitted socket, with an expiry that its
  process's heartbeat pushes forward (a crashed process's rows expire after
  ``ttl_s`` and stop counting);
* live seconds: per owner and day, what the owner's sockets have used; each
  heartbeat adds the time since the last one, and a socket's end the rest.

Admission is one transaction (on PostgreSQL under an advisory lock per
owner): count the owner's unexpired sockets and today's seconds, and insert
the new socket if both are under their limits. An admitted socket may run
for what is left of the day's minutes (its principal's ``live_seconds``);
sockets of one owner that run at once may together pass it by as much as
they overlap, at most once each.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import dataclasses
import datetime
import logging
import secrets
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..settings import Settings, is_postgres_url
from ..storage.sqlite_thread import SqliteThread

log = logging.getLogger(__name__)

TTL_S = 30.0  # a socket row whose process stopped beating stops counting after this
HEARTBEAT_S = 10.0


class QuotaExceeded(Exception):
    """``reason``: ``sessions`` or ``minutes``."""

    def __init__(self, reason: str, text: str) -> None:
        super().__init__(text)
        self.reason = reason


@dataclasses.dataclass
class Ticket:
    """An admitted socket: its row, and the time counted so far."""

    socket_id: str
    owner: str
    seconds_left: float | None  # of the day's minutes at admission; None: no limit
    counted_to: float  # clock time up to which its seconds are counted


def utc_day(now: float) -> str:
    return datetime.datetime.fromtimestamp(now, datetime.UTC).date().isoformat()


class OwnerQuotas(abc.ABC):
    """The bookkeeping both stores share; a store supplies the statements."""

    def __init__(
        self,
        max_sessions: int | None,
        minutes_per_day: float | None,
        *,
        ttl_s: float = TTL_S,
        heartbeat_s: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_sessions = max_sessions
        self.seconds_per_day = minutes_per_day * 60 if minutes_per_day is not None else None
        self.ttl_s = ttl_s
        self.heartbeat_s = heartbeat_s
        self.clock = clock
        self.held: dict[str, Ticket] = {}
        self._beating: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ statements

    @abc.abstractmethod
    async def _admit(self, owner: str, socket_id: str, now: float) -> tuple[int, float]:
        """In one transaction: the owner's live sockets and today's seconds,
        and the socket's row inserted if under both limits (counted before
        the insert)."""

    @abc.abstractmethod
    async def _count(self, rows: list[tuple[str, str, float]], alive: list[str]) -> None:
        """Add ``(owner, day, seconds)``; push the ``alive`` sockets' expiry."""

    @abc.abstractmethod
    async def _remove(self, socket_id: str) -> None: ...

    @abc.abstractmethod
    async def _close_store(self) -> None: ...

    def _admissible(self, sockets: int, seconds: float) -> bool:
        return (self.max_sessions is None or sockets < self.max_sessions) and (
            self.seconds_per_day is None or seconds < self.seconds_per_day
        )

    # ------------------------------------------------------------ the interface

    async def admit(self, owner: str) -> Ticket:
        """A socket's place for ``owner``, or ``QuotaExceeded``."""
        now = self.clock()
        socket_id = secrets.token_hex(12)
        sockets, seconds = await self._admit(owner, socket_id, now)
        if self.max_sessions is not None and sockets >= self.max_sessions:
            raise QuotaExceeded(
                "sessions", f"the owner's {self.max_sessions} live sessions are all in use"
            )
        left = None
        if self.seconds_per_day is not None:
            left = self.seconds_per_day - seconds
            if left <= 0:
                raise QuotaExceeded("minutes", "the owner's live minutes for today are used up")
        ticket = Ticket(socket_id, owner, left, now)
        self.held[socket_id] = ticket
        return ticket

    async def release(self, ticket: Ticket) -> None:
        self.held.pop(ticket.socket_id, None)
        try:
            await self._count(self._used([ticket], self.clock()), [])
        finally:
            await self._remove(ticket.socket_id)

    def start(self) -> None:
        self._beating = asyncio.create_task(self._beat_forever())

    async def close(self) -> None:
        if self._beating is not None:
            self._beating.cancel()
            await asyncio.gather(self._beating, return_exceptions=True)
        await self._close_store()

    async def beat(self) -> None:
        """Count the held sockets' time and keep their rows alive."""
        tickets = list(self.held.values())
        await self._count(self._used(tickets, self.clock()), [t.socket_id for t in tickets])

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self.beat()
            except Exception:  # the store is away: the rows expire, the next beat retries
                log.warning("quota heartbeat failed", exc_info=True)

    @staticmethod
    def _used(tickets: list[Ticket], now: float) -> list[tuple[str, str, float]]:
        rows = []
        for ticket in tickets:
            rows.append((ticket.owner, utc_day(now), max(0.0, now - ticket.counted_to)))
            ticket.counted_to = now
        return rows


_SCHEMA = """
CREATE TABLE IF NOT EXISTS live_sockets (
    socket_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS live_sockets_owner ON live_sockets (owner);
CREATE TABLE IF NOT EXISTS live_seconds (
    owner TEXT NOT NULL, day TEXT NOT NULL, seconds REAL NOT NULL, PRIMARY KEY (owner, day)
);
"""


class SqliteQuotas(OwnerQuotas):
    """In a SQLite file: the processes of one machine (``--workers``)."""

    def __init__(self, path: Path, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.path = path
        self._store = SqliteThread(path, _SCHEMA, "quotas")

    async def _admit(self, owner: str, socket_id: str, now: float) -> tuple[int, float]:
        def admit(db: sqlite3.Connection) -> tuple[int, float]:
            db.execute("DELETE FROM live_sockets WHERE owner = ? AND expires < ?", (owner, now))
            (sockets,) = db.execute(
                "SELECT count(*) FROM live_sockets WHERE owner = ?", (owner,)
            ).fetchone()
            row = db.execute(
                "SELECT seconds FROM live_seconds WHERE owner = ? AND day = ?",
                (owner, utc_day(now)),
            ).fetchone()
            seconds = row[0] if row else 0.0
            if self._admissible(sockets, seconds):
                db.execute(
                    "INSERT INTO live_sockets VALUES (?, ?, ?)",
                    (socket_id, owner, now + self.ttl_s),
                )
            return sockets, seconds

        return await self._store.run(admit)

    async def _count(self, rows: list[tuple[str, str, float]], alive: list[str]) -> None:
        expires = self.clock() + self.ttl_s

        def count(db: sqlite3.Connection) -> None:
            db.executemany(
                "INSERT INTO live_seconds VALUES (?, ?, ?) ON CONFLICT (owner, day)"
                " DO UPDATE SET seconds = seconds + excluded.seconds",
                rows,
            )
            db.executemany(
                "UPDATE live_sockets SET expires = ? WHERE socket_id = ?",
                [(expires, s) for s in alive],
            )

        await self._store.run(count)

    async def _remove(self, socket_id: str) -> None:
        def remove(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM live_sockets WHERE socket_id = ?", (socket_id,))

        await self._store.run(remove)

    async def _close_store(self) -> None:
        self._store.close()


_PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS audiocore_live_sockets (
    socket_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS audiocore_live_sockets_owner ON audiocore_live_sockets (owner);
CREATE TABLE IF NOT EXISTS audiocore_live_seconds (
    owner TEXT NOT NULL, day TEXT NOT NULL, seconds DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (owner, day)
);
"""


class PostgresQuotas(OwnerQuotas):
    """In PostgreSQL: several hosts. Socket expiry on the database's clock."""

    def __init__(self, url: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from ..storage.pg_leases import asyncpg_dsn

        self._dsn = asyncpg_dsn(url)
        self._pool: Any = None
        self._connecting = asyncio.Lock()

    async def _ready(self) -> Any:
        from ..storage.pg_leases import open_pool

        async with self._connecting:
            if self._pool is None:
                self._pool = await open_pool(self._dsn, _PG_SCHEMA)
            return self._pool

    async def _admit(self, owner: str, socket_id: str, now: float) -> tuple[int, float]:
        pool = await self._ready()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('audiocore_quota:' || $1))", owner
            )
            await conn.execute(
                "DELETE FROM audiocore_live_sockets"
                " WHERE owner = $1 AND expires < clock_timestamp()",
                owner,
            )
            sockets = await conn.fetchval(
                "SELECT count(*) FROM audiocore_live_sockets WHERE owner = $1", owner
            )
            seconds = await conn.fetchval(
                "SELECT seconds FROM audiocore_live_seconds WHERE owner = $1 AND day = $2",
                owner,
                utc_day(now),
            )
            seconds = float(seconds or 0.0)
            if self._admissible(sockets, seconds):
                await conn.execute(
                    "INSERT INTO audiocore_live_sockets"
                    " VALUES ($1, $2, clock_timestamp() + $3::interval)",
                    socket_id,
                    owner,
                    datetime.timedelta(seconds=self.ttl_s),
                )
            return int(sockets), seconds

    async def _count(self, rows: list[tuple[str, str, float]], alive: list[str]) -> None:
        pool = await self._ready()
        async with pool.acquire() as conn, conn.transaction():
            await conn.executemany(
                "INSERT INTO audiocore_live_seconds VALUES ($1, $2, $3)"
                " ON CONFLICT (owner, day)"
                " DO UPDATE SET seconds = audiocore_live_seconds.seconds + EXCLUDED.seconds",
                rows,
            )
            await conn.execute(
                "UPDATE audiocore_live_sockets SET expires = clock_timestamp() + $2::interval"
                " WHERE socket_id = ANY($1::text[])",
                alive,
                datetime.timedelta(seconds=self.ttl_s),
            )

    async def _remove(self, socket_id: str) -> None:
        pool = await self._ready()
        await pool.execute("DELETE FROM audiocore_live_sockets WHERE socket_id = $1", socket_id)

    async def _close_store(self) -> None:
        if self._pool is not None:
            with contextlib.suppress(Exception):
                await self._pool.close()
            self._pool = None


def build_quotas(settings: Settings) -> OwnerQuotas | None:
    """The owners' quotas beside the sessions, if any is set (and a key)."""
    sessions = settings.max_live_sessions_per_owner
    minutes = settings.live_minutes_per_owner_per_day
    if settings.api_key is None or (sessions is None and minutes is None):
        return None
    if is_postgres_url(settings.database_url):
        assert settings.database_url is not None
        return PostgresQuotas(settings.database_url, sessions, minutes)
    return SqliteQuotas(settings.data_dir / "quotas.db", sessions, minutes)
