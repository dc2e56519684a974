"""Session storage: ADK's SQLite session service, made cheap per event.

ADK's ``SqliteSessionService`` opens a new aiosqlite connection for every
call — a new thread, and in SQLite's default journal mode an fsync per
commit — and every statement is a round trip to that thread, which on a busy
event loop waits for the GIL (up to the 5 ms switch interval) each way. The
live flow persists a turn's transcriptions before yielding them, so the audio
behind them waited too: at 100 concurrent sessions, first audio came 1–2.5 s
late with the CPU half idle.

Here every call shares one connection, in WAL mode with
``synchronous=NORMAL`` (no fsync per commit; a power cut may lose the last
turns, never corrupt the file), and statements run inline on the event loop's
thread: a commit without fsync takes tens of microseconds, less than one
thread round trip. Calls are serialised by a lock, as ADK already does for its
in-memory database. The SQL and the schema are ADK's, unchanged; only the
connection is swapped, through a small adapter with aiosqlite's interface.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Generator
from typing import Any

from google.adk.sessions import sqlite_session_service as adk_sqlite

_PRAGMAS = (
    "PRAGMA busy_timeout=5000",  # other server processes on the same file
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    adk_sqlite.PRAGMA_FOREIGN_KEYS,
)


def open_wal(path: str, *, uri: bool = False, script: str = "") -> sqlite3.Connection:
    """A connection in WAL mode, with ``script`` (the schema) run.

    Processes that open a new file at the same moment (``--workers``) can get
    "database is locked" from the switch to WAL or the schema even with a
    busy timeout (SQLite does not wait during WAL recovery): retry briefly.
    """
    for attempt in range(50):
        raw = sqlite3.connect(path, uri=uri)
        try:
            raw.row_factory = sqlite3.Row
            for pragma in _PRAGMAS:
                raw.execute(pragma)
            if script:
                raw.executescript(script)
            return raw
        except sqlite3.OperationalError as exc:
            raw.close()
            if "locked" not in str(exc) or attempt == 49:
                raise
            time.sleep(0.02)
        except BaseException:
            raw.close()
            raise
    raise AssertionError("unreachable")


class _Cursor:
    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    async def close(self) -> None:
        self._cursor.close()


class _Executed:
    """What ``execute`` returns: awaitable, and an async context manager."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = _Cursor(cursor)

    def __await__(self) -> Generator[Any, None, _Cursor]:
        return self._result().__await__()

    async def _result(self) -> _Cursor:
        return self._cursor

    async def __aenter__(self) -> _Cursor:
        return self._cursor

    async def __aexit__(self, *exc: object) -> None:
        await self._cursor.close()


class InlineConnection:
    """aiosqlite's ``Connection`` interface over sqlite3, run inline."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    @property
    def row_factory(self) -> Any:
        return self._connection.row_factory

    @row_factory.setter
    def row_factory(self, factory: Any) -> None:
        self._connection.row_factory = factory

    def execute(self, sql: str, parameters: Any = ()) -> _Executed:
        return _Executed(self._connection.execute(sql, parameters))

    async def execute_fetchall(self, sql: str, parameters: Any = ()) -> list[Any]:
        return self._connection.execute(sql, parameters).fetchall()

    async def executemany(self, sql: str, parameters: Any) -> _Cursor:
        return _Cursor(self._connection.executemany(sql, parameters))

    async def executescript(self, script: str) -> _Cursor:
        return _Cursor(self._connection.executescript(script))

    async def commit(self) -> None:
        self._connection.commit()

    async def rollback(self) -> None:
        self._connection.rollback()

    async def close(self) -> None:
        self._connection.close()


class SharedConnectionSqliteSessionService(adk_sqlite.SqliteSessionService):
    def __init__(self, db_path: str) -> None:
        super().__init__(db_path)
        self._shared: InlineConnection | None = None
        self._shared_lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def _get_db_connection(self) -> AsyncIterator[Any]:
        async with self._shared_lock:
            if self._shared is None:
                raw = open_wal(
                    self._db_connect_path,
                    uri=self._db_connect_uri,
                    script=adk_sqlite.CREATE_SCHEMA_SQL,
                )
                self._shared = InlineConnection(raw)
                self._schema_ready = True
            try:
                yield self._shared
            except BaseException:
                await self._shared.rollback()
                raise

    async def close(self) -> None:
        await super().close()
        async with self._shared_lock:
            if self._shared is not None:
                await self._shared.close()
                self._shared = None
