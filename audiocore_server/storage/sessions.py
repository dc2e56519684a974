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

The file is checked before every call (one ``stat``): a connection keeps
writing to a file deleted under it, and every turn from then on would be lost
at the next start without a word. A deleted file fails each call with
``SessionFileLost`` (the socket gets an error, ``/healthz`` a 503) until the
file is back; a file put back or created anew is opened again.

Inline statements must never wait on a lock (another server process on the
same file holds it for a moment; a backup, for longer): the connection's
busy timeout is 0, and a statement that finds the file locked is retried
asynchronously, for up to ``LOCK_WAIT_S``, while every other stream goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any, TypeVar

from google.adk.sessions import sqlite_session_service as adk_sqlite

from .history import BoundedLiveHistory

_T = TypeVar("_T")

# What a lock held by another process costs: a statement that finds the
# file locked is retried (asynchronously, on the event loop: never blocking
# it) for up to this long, then fails.
LOCK_WAIT_S = 5.0
_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    adk_sqlite.PRAGMA_FOREIGN_KEYS,
)


def _locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _open_once(path: str, uri: bool, script: str, busy_timeout_ms: int) -> sqlite3.Connection:
    raw = sqlite3.connect(path, uri=uri, check_same_thread=False)
    try:
        raw.row_factory = sqlite3.Row
        raw.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
        for pragma in _PRAGMAS:
            raw.execute(pragma)
        if script:
            raw.executescript(script)
        return raw
    except BaseException:
        raw.close()
        raise


def open_wal(path: str, *, uri: bool = False, script: str = "") -> sqlite3.Connection:
    """A connection in WAL mode, with ``script`` (the schema) run; for a
    thread of its own (``sqlite_thread.py``), where waiting on a lock is harmless.

    Processes that open a new file at the same moment (``--workers``) can get
    "database is locked" from the switch to WAL or the schema even with a
    busy timeout (SQLite does not wait during WAL recovery): retry briefly.
    """
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            return _open_once(path, uri, script, busy_timeout_ms=int(LOCK_WAIT_S * 1000))
        except sqlite3.OperationalError as exc:
            if not _locked(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


async def retry_locked(call: Callable[[], _T]) -> _T:
    """``call()`` (a statement on the event loop's thread), retried while
    another process holds the file's lock: waits are asynchronous, so one
    lock stall never freezes the loop and every stream on it."""
    deadline = time.monotonic() + LOCK_WAIT_S
    delay = 0.001
    while True:
        try:
            return call()
        except sqlite3.OperationalError as exc:
            if not _locked(exc) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(delay)
        delay = min(2 * delay, 0.05)


class _Cursor:
    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._rows()

    async def _rows(self) -> AsyncIterator[Any]:
        for row in self._cursor:
            yield row

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    async def close(self) -> None:
        self._cursor.close()


class _Executed:
    """What ``execute`` returns: awaitable, and an async context manager;
    the statement runs when it is awaited (or entered)."""

    def __init__(self, run: Callable[[], sqlite3.Cursor]) -> None:
        self._run = run
        self._cursor: _Cursor | None = None

    def __await__(self) -> Generator[Any, None, _Cursor]:
        return self._result().__await__()

    async def _result(self) -> _Cursor:
        if self._cursor is None:
            self._cursor = _Cursor(await retry_locked(self._run))
        return self._cursor

    async def __aenter__(self) -> _Cursor:
        return await self._result()

    async def __aexit__(self, *exc: object) -> None:
        if self._cursor is not None:
            await self._cursor.close()


class InlineConnection:
    """aiosqlite's ``Connection`` interface over sqlite3, run inline, with a
    zero busy timeout: a locked file is waited for asynchronously."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    @property
    def row_factory(self) -> Any:
        return self._connection.row_factory

    @row_factory.setter
    def row_factory(self, factory: Any) -> None:
        self._connection.row_factory = factory

    def execute(self, sql: str, parameters: Any = ()) -> _Executed:
        return _Executed(lambda: self._connection.execute(sql, parameters))

    async def execute_fetchall(self, sql: str, parameters: Any = ()) -> list[Any]:
        return await retry_locked(lambda: self._connection.execute(sql, parameters).fetchall())

    async def executemany(self, sql: str, parameters: Any) -> _Cursor:
        rows = list(parameters)  # a generator cannot be run twice
        return _Cursor(await retry_locked(lambda: self._connection.executemany(sql, rows)))

    async def executescript(self, script: str) -> _Cursor:
        return _Cursor(await retry_locked(lambda: self._connection.executescript(script)))

    async def commit(self) -> None:
        await retry_locked(self._connection.commit)

    async def rollback(self) -> None:
        self._connection.rollback()

    async def close(self) -> None:
        self._connection.close()


class SessionFileLost(RuntimeError):
    """The session file was deleted while the server had it open."""


def _file_identity(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


class SharedConnectionSqliteSessionService(BoundedLiveHistory, adk_sqlite.SqliteSessionService):
    def __init__(self, db_path: str, *, live_history_events: int = 0) -> None:
        super().__init__(db_path)
        self.live_history_events = live_history_events
        self._shared: InlineConnection | None = None
        self._shared_lock = asyncio.Lock()
        self._opened_file: tuple[int, int] | None = None  # what _shared has open
        self._on_disk = self._db_path != ":memory:" and not self._db_connect_uri

    async def _check_file(self) -> None:
        """Fail while the open file is deleted; reopen a file put back."""
        if self._shared is None or not self._on_disk:
            return
        found = _file_identity(self._db_path)
        if found == self._opened_file:
            return
        if found is None:
            raise SessionFileLost(
                f"the session file {self._db_path} was deleted while the server had it open; "
                "restore it (or restart the server for a new, empty one)"
            )
        # Put back (a backup) or created anew: closing the old one first lets
        # SQLite checkpoint and remove the deleted file's WAL, not apply it
        # to the new file.
        await self._shared.close()
        self._shared = None

    @contextlib.asynccontextmanager
    async def _get_db_connection(self) -> AsyncIterator[Any]:
        async with self._shared_lock:
            await self._check_file()
            if self._shared is None:
                raw = await retry_locked(
                    lambda: _open_once(
                        self._db_connect_path,
                        self._db_connect_uri,
                        adk_sqlite.CREATE_SCHEMA_SQL,
                        busy_timeout_ms=0,
                    )
                )
                self._shared = InlineConnection(raw)
                self._opened_file = _file_identity(self._db_path)
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
