r"""The memory store in SQLite: ``memory.db`` in the data directory, with
FTS5 full-text search, owner first.

A search reads its owner's records only, however large the store: the
full-text index (``memory_words``) holds each record's words as tokens of
its owner and kind — a keyed 64-bit BLAKE2b of (owner, kind, word) as 16
letters (``memory_store.scoped_tokens``) — so a word's list of records is
one owner's, and the index holds no text. A search is its words' tokens
(``search_tokens``), each a quoted FTS5 string (no query syntax of the
user's ever applies), OR-ed; the owner's newest ``MAX_CANDIDATES`` (1000)
matches are ranked by bm25 (every fact at the default limit of 1000 an
owner; of its up to 2000 turns, the newest 1000 that match), newest first
among equals. The owner and kind are checked again on the records.

With the words of every owner in one index (the schema before), a common
word's list was the whole store's: at 1M records a 16-word query took
~160 ms at the median for an owner of 1,000 (benchmarks/README.md, "Memory
recall"). A file of that schema is re-indexed as it is opened.

The statements run on one thread of their own (``sqlite_thread.py``: WAL,
one ``BEGIN IMMEDIATE`` transaction a call), never on the event loop; the
processes of one machine share the file.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from ..storage.sqlite_thread import SqliteThread
from .store import (
    MAX_TURNS_PER_OWNER,
    Kind,
    MemoryInputError,
    MemoryStore,
    Profile,
    Record,
    index_words,
    scoped_tokens,
    search_tokens,
    unknown_ids,
)

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
CREATE VIRTUAL TABLE IF NOT EXISTS memory_words USING fts5 (tokens, tokenize='ascii');
CREATE TRIGGER IF NOT EXISTS memory_words_removed AFTER DELETE ON memories BEGIN
    DELETE FROM memory_words WHERE rowid = old.rowid;
END;
CREATE TABLE IF NOT EXISTS profiles (
    owner TEXT PRIMARY KEY,
    user_section TEXT NOT NULL DEFAULT '',
    managed TEXT NOT NULL DEFAULT '',
    updated REAL NOT NULL
);
"""
_COLUMNS = "m.id, m.kind, m.text, m.created, m.author"
# Matches ranked by bm25 in one search, the owner's newest: every fact an
# owner holds at the default limit (max_memories_per_owner). bm25 costs
# ~2.5 µs a match here: 3000 took a common 16-word search to ~9 ms.
MAX_CANDIDATES = 1_000
# The store's one connection reads a large file's index pages from its own
# cache, not the system's (a read each): 64 MiB at most.
CACHE_PRAGMA = "PRAGMA cache_size=-65536"


def _record(row: tuple[Any, ...]) -> Record:
    return Record(row[0], row[1], row[2], row[3], row[4])


def index_record(db: sqlite3.Connection, rowid: int, owner: str, kind: Kind, text: str) -> None:
    """The index row of the record ``rowid``: what each insert writes."""
    tokens = " ".join(scoped_tokens(owner, kind, index_words(text)))
    db.execute("INSERT INTO memory_words (rowid, tokens) VALUES (?, ?)", (rowid, tokens))


def _prepare(db: sqlite3.Connection) -> None:
    """The connection's cache; a file of the schema before (one full-text
    index of every owner's text) re-indexed, owner first."""
    db.execute(CACHE_PRAGMA)
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories_fts'").fetchone() is None:
        return
    db.execute("DROP TRIGGER IF EXISTS memories_added")
    db.execute("DROP TRIGGER IF EXISTS memories_removed")
    db.execute("DROP TABLE memories_fts")
    db.execute("DELETE FROM memory_words")
    for rowid, owner, kind, text in db.execute("SELECT rowid, owner, kind, text FROM memories"):
        index_record(db, rowid, owner, kind, text)


class SqliteMemoryStore(MemoryStore):
    def __init__(self, path: Path, *, max_facts: int = 1_000) -> None:
        super().__init__(max_facts=max_facts)
        self._db = SqliteThread(path, SCHEMA, "memory-store", prepare=_prepare)

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
            cursor = db.execute(
                "INSERT OR IGNORE INTO memories (id, owner, kind, text, author, source, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (record.id, owner, record.kind, record.text, record.author, source, record.created),
            )
            added = cursor.rowcount
            if added:
                assert cursor.lastrowid is not None
                index_record(db, cursor.lastrowid, owner, record.kind, record.text)
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
            cursor = db.execute(
                "INSERT INTO memories (id, owner, kind, text, created) VALUES (?, ?, 'fact', ?, ?)",
                (record.id, owner, record.text, record.created),
            )
            assert cursor.lastrowid is not None
            index_record(db, cursor.lastrowid, owner, "fact", record.text)

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
        tokens = search_tokens(owner, words, kind)
        expression = " OR ".join(f'"{t}"' for t in tokens)  # letters a-p: nothing to escape

        def read(db: sqlite3.Connection) -> list[Record]:
            # The newest matches (FTS5 walks its lists newest first and
            # stops) ranked, and only the best read from the records: never
            # a sort of every match, nor a record read per candidate.
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM (SELECT rowid, rank FROM"
                " (SELECT rowid, rank FROM memory_words WHERE memory_words MATCH ?"
                " ORDER BY rowid DESC LIMIT ?) ORDER BY rank, rowid DESC LIMIT ?) AS f"
                " JOIN memories m ON m.rowid = f.rowid"
                " WHERE m.owner = ? AND (? IS NULL OR m.kind = ?)"
                " ORDER BY f.rank, m.rowid DESC",
                (expression, MAX_CANDIDATES, limit, owner, kind, kind),
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
