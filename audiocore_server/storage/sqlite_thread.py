"""A small SQLite file written from a thread of its own: the leases' and the
quotas' stores.

Their statements are short but may wait on the file's lock (another process
of the machine writes the same file), so none runs on the event loop: one
worker thread owns the connection, opened at the first call (``open_wal``,
with the store's schema), and every call is one ``BEGIN IMMEDIATE``
transaction — the write lock taken at its start, so a transaction that reads
and then writes never fails half-way on another process's write.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .sessions import open_wal

_T = TypeVar("_T")


class SqliteThread:
    """``run(fn)``: ``fn(connection)`` in one transaction, on the one thread."""

    def __init__(
        self,
        path: Path,
        schema: str,
        thread_name: str,
        prepare: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        self.path = path
        self._schema = schema
        self._prepare = prepare  # once the file is open, in a transaction of its own
        self._db: sqlite3.Connection | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=thread_name)

    async def run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._transaction, fn)

    def _transaction(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = open_wal(str(self.path), script=self._schema)
            db.isolation_level = None  # transactions as written here
            if self._prepare is not None:
                try:
                    db.execute("BEGIN IMMEDIATE")
                    self._prepare(db)
                    db.execute("COMMIT")
                except BaseException:
                    # Closing rolls back what is open: no ROLLBACK to fail
                    # (SQLite may have rolled back already), no connection
                    # left holding the write lock.
                    db.close()
                    raise
            self._db = db
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            result = fn(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return result

    def close(self) -> None:
        """Close the connection (on its thread) and stop the thread; waits
        for a call under way."""
        if self._db is not None:
            db, self._db = self._db, None
            self._thread.submit(db.close).result()
        self._thread.shutdown()
