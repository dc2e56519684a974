"""The memory store in SQLite: ``memory.db`` in the data directory, with
FTS5 full-text search.

An external-content FTS5 table indexes the records' text (triggers keep it
in step); a search is the owner's rows among the matches of its words, each
bound as a quoted FTS5 string, so no query syntax of the user's ever
applies, ranked by bm25. The statements run on one thread of their own
(``sqlite_thread.py``: WAL, one ``BEGIN IMMEDIATE`` transaction a call), never
on the event loop; the processes of one machine share the file.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from .memory_store import (
    MAX_TURNS_PER_OWNER,
    Kind,
    MemoryInputError,
    MemoryStore,
    Profile,
    Record,
    unknown_ids,
)
from .sqlite_thread import SqliteThread

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    author TEXT,
    source TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_by_owner ON memories (owner, kind, created);
CREATE INDEX IF NOT EXISTS memories_by_time ON memories (owner, created);
CREATE UNIQUE INDEX IF NOT EXISTS memories_by_source ON memories (owner, source)
    WHERE source IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5 (
    text, content='memories', content_rowid='rowid', tokenize='unicode61'
);
CREATE TRIGGER IF NOT EXISTS memories_added AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER IF NOT EXISTS memories_removed AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
END;
CREATE TABLE IF NOT EXISTS profiles (
    owner TEXT PRIMARY KEY,
    user_section TEXT NOT NULL DEFAULT '',
    managed TEXT NOT NULL DEFAULT '',
    updated REAL NOT NULL
);
"""
_COLUMNS = "m.id, m.kind, m.text, m.created, m.author"


def _record(row: tuple[Any, ...]) -> Record:
    return Record(row[0], row[1], row[2], row[3], row[4])


def fts_expression(words: list[str]) -> str:
    """Any of ``words``, each a quoted FTS5 string ("" escapes ")."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


class SqliteMemoryStore(MemoryStore):
    def __init__(self, path: Path, *, max_facts: int = 1_000) -> None:
        super().__init__(max_facts=max_facts)
        self._db = SqliteThread(path, SCHEMA, "memory-store")

    async def _insert(self, owner: str, record: Record, source: str | None) -> bool:
        def add(db: sqlite3.Connection) -> bool:
            if record.kind == "fact":
                (held,) = db.execute(
                    "SELECT count(*) FROM memories WHERE owner = ? AND kind = 'fact'", (owner,)
                ).fetchone()
                if held >= self.max_facts:
                    raise MemoryInputError(
                        f"memory is full: {self.max_facts} facts; forget some first"
                    )
            added = db.execute(
                "INSERT OR IGNORE INTO memories (id, owner, kind, text, author, source, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (record.id, owner, record.kind, record.text, record.author, source, record.created),
            ).rowcount
            if record.kind == "turn":
                db.execute(
                    "DELETE FROM memories WHERE rowid IN (SELECT rowid FROM memories"
                    " WHERE owner = ? AND kind = 'turn' ORDER BY created DESC LIMIT -1 OFFSET ?)",
                    (owner, MAX_TURNS_PER_OWNER),
                )
            return bool(added)

        return await self._db.run(add)

    async def _swap(self, owner: str, ids: list[str], record: Record) -> None:
        def swap(db: sqlite3.Connection) -> None:
            _delete_owned(db, owner, ids)
            db.execute(
                "INSERT INTO memories (id, owner, kind, text, created) VALUES (?, ?, 'fact', ?, ?)",
                (record.id, owner, record.text, record.created),
            )

        await self._db.run(swap)

    async def _remove(self, owner: str, ids: list[str]) -> None:
        await self._db.run(lambda db: _delete_owned(db, owner, ids))

    async def _latest(self, owner: str, limit: int, kind: Kind | None) -> list[Record]:
        # Equalities only, so the index's order is the answer's (a walk of
        # ``limit`` entries, not a sort of the owner's records).
        args: tuple[object, ...]
        if kind is None:
            where, args = "m.owner = ?", (owner, limit)
        else:
            where, args = "m.owner = ? AND m.kind = ?", (owner, kind, limit)

        def read(db: sqlite3.Connection) -> list[Record]:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM memories m WHERE {where}"
                " ORDER BY m.created DESC, m.rowid DESC LIMIT ?",
                args,
            ).fetchall()
            return [_record(r) for r in rows]

        return await self._db.run(read)

    async def _search(
        self, owner: str, words: list[str], limit: int, kind: Kind | None
    ) -> list[Record]:
        expression = fts_expression(words)

        def read(db: sqlite3.Connection) -> list[Record]:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM memories_fts JOIN memories m"
                " ON m.rowid = memories_fts.rowid"
                " WHERE memories_fts MATCH ? AND m.owner = ? AND (? IS NULL OR m.kind = ?)"
                " ORDER BY bm25(memories_fts), m.created DESC LIMIT ?",
                (expression, owner, kind, kind, limit),
            ).fetchall()
            return [_record(r) for r in rows]

        return await self._db.run(read)

    async def _count(self, owner: str) -> int:
        def read(db: sqlite3.Connection) -> int:
            (n,) = db.execute("SELECT count(*) FROM memories WHERE owner = ?", (owner,)).fetchone()
            return int(n)

        return await self._db.run(read)

    async def _profile(self, owner: str) -> Profile:
        return await self._db.run(lambda db: _read_profile(db, owner))

    async def _edit_profile(
        self, owner: str, managed: str | None, user_section: str | None
    ) -> Profile:
        def write(db: sqlite3.Connection) -> Profile:
            db.execute(
                "INSERT INTO profiles (owner, updated) VALUES (?, 0)"
                " ON CONFLICT (owner) DO NOTHING",
                (owner,),
            )
            db.execute(
                "UPDATE profiles SET managed = coalesce(?, managed),"
                " user_section = coalesce(?, user_section), updated = ? WHERE owner = ?",
                (managed, user_section, time.time(), owner),
            )
            return _read_profile(db, owner)

        return await self._db.run(write)

    async def _forget_owner(self, owner: str) -> int:
        def remove(db: sqlite3.Connection) -> int:
            n = db.execute("DELETE FROM memories WHERE owner = ?", (owner,)).rowcount
            db.execute("DELETE FROM profiles WHERE owner = ?", (owner,))
            return int(n)

        return await self._db.run(remove)

    async def close(self) -> None:
        self._db.close()


def _read_profile(db: sqlite3.Connection, owner: str) -> Profile:
    row = db.execute(
        "SELECT user_section, managed FROM profiles WHERE owner = ?", (owner,)
    ).fetchone()
    return Profile(row[0], row[1]) if row else Profile()


def _delete_owned(db: sqlite3.Connection, owner: str, ids: list[str]) -> None:
    marks = ", ".join("?" * len(ids))  # placeholders only: the ids are bound
    found = {
        row[0]
        for row in db.execute(
            f"SELECT id FROM memories WHERE owner = ? AND id IN ({marks})", (owner, *ids)
        )
    }
    unknown_ids(ids, found)
    db.executemany("DELETE FROM memories WHERE owner = ? AND id = ?", [(owner, i) for i in ids])
