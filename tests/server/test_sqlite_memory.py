"""The SQLite memory store's owner-first index (test_memory_store.py has
what it means for a search, on both stores): it holds each owner's words
as keyed hashes, never the text, follows every insert and delete, and a
file of the earlier schema (one index of every owner's text) is re-indexed
as it is opened."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from audiocore_server.memory import sqlite as sqlite_memory
from audiocore_server.memory.sqlite import SqliteMemoryStore
from audiocore_server.memory.store import MAX_TURNS_PER_OWNER, index_words, scoped_tokens
from audiocore_server.storage.sqlite_thread import SqliteThread

_T = TypeVar("_T")
ALICE, BOB = "key:alice-0123456789abcdef", "key:bob-0123456789abcdef01"

# The schema before the owner-first index: one external-content FTS5 table
# of every owner's text, kept by triggers.
EARLIER_SCHEMA = """
CREATE TABLE memories (
    rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, owner TEXT NOT NULL,
    kind TEXT NOT NULL, text TEXT NOT NULL, author TEXT, source TEXT, created REAL NOT NULL
);
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    text, content='memories', content_rowid='rowid', tokenize='unicode61'
);
CREATE TRIGGER memories_added AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER memories_removed AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
END;
"""


def run(path: Path, scenario: Callable[[SqliteMemoryStore], Awaitable[_T]]) -> _T:
    async def main() -> _T:
        store = SqliteMemoryStore(path)
        try:
            return await scenario(store)
        finally:
            await store.close()

    return asyncio.run(main())


def index_rows(path: Path) -> tuple[int, int, list[str]]:
    """Records, index rows, and the index's token lists."""
    with sqlite3.connect(path) as db:
        (records,) = db.execute("SELECT count(*) FROM memories").fetchone()
        tokens = [row[0] for row in db.execute("SELECT tokens FROM memory_words")]
    return records, len(tokens), tokens


def test_the_index_holds_hashes_and_follows_every_insert_and_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_memory, "MAX_TURNS_PER_OWNER", 3)
    path = tmp_path / "memory.db"

    async def scenario(store: SqliteMemoryStore) -> None:
        kept = await store.remember(ALICE, "the spare key is under the blue pot")
        gone = await store.remember(ALICE, "the boat is blue")
        assert kept is not None and gone is not None
        await store.replace(ALICE, [kept.id], "the spare key is under the red pot")
        await store.forget(ALICE, [gone.id])
        for n in range(5):  # the oldest two go
            await store.remember(ALICE, f"turn {n} about the pot", kind="turn", source=f"e{n}")
        await store.remember(BOB, "a blue pot of his own")
        records, indexed, tokens = index_rows(path)
        assert (records, indexed) == (5, 5)
        assert not any(w in " ".join(tokens) for w in ("spare", "blue", "pot", "turn"))
        bobs = " ".join(scoped_tokens(BOB, "fact", index_words("a blue pot of his own")))
        assert tokens.count(bobs) == 1
        assert [r.text for r in await store.search(ALICE, "blue")] == []
        assert [r.text for r in await store.search(ALICE, "red pot", kind="fact")] == [
            "the spare key is under the red pot"
        ]
        turns = await store.search(ALICE, "pot", kind="turn")
        assert sorted(r.text for r in turns) == [f"turn {n} about the pot" for n in (2, 3, 4)]
        await store.forget_owner(ALICE)
        assert index_rows(path)[:2] == (1, 1)

    run(path, scenario)
    assert MAX_TURNS_PER_OWNER > 3  # the patch above was the test's own


def earlier_file(folder: Path, rows: list[tuple[str, str, str, str, float]]) -> Path:
    """A memory file of the schema before (one index of every owner's words)."""
    path = folder / "memory.db"
    with sqlite3.connect(path) as db:
        db.executescript(EARLIER_SCHEMA)
        db.executemany(
            "INSERT INTO memories (id, owner, kind, text, created) VALUES (?, ?, ?, ?, ?)", rows
        )
    db.close()
    return path


def test_a_file_of_the_earlier_schema_is_reindexed_as_it_opens(tmp_path: Path) -> None:
    path = earlier_file(
        tmp_path,
        [
            ("mem_000000000001", ALICE, "fact", "my dog is called Rex", 1.0),
            ("mem_000000000002", BOB, "fact", "my dog is called Fido", 2.0),
            ("mem_000000000003", ALICE, "turn", "we talked about the dog", 3.0),
        ],
    )

    async def scenario(store: SqliteMemoryStore) -> None:
        assert [r.id for r in await store.search(ALICE, "dog", kind="fact")] == ["mem_000000000001"]
        assert [r.id for r in await store.search(ALICE, "dog")] == [
            "mem_000000000003",
            "mem_000000000001",
        ]
        assert [r.id for r in await store.search(BOB, "dog")] == ["mem_000000000002"]
        await store.forget(ALICE, ["mem_000000000001"])  # the old delete trigger is gone

    run(path, scenario)
    with sqlite3.connect(path) as db:
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    db.close()
    assert "memories_fts" not in names and "memories_added" not in names
    assert index_rows(path)[:2] == (2, 2)
    # Opened again: nothing to do, the same answers.
    found = run(path, lambda store: store.search(ALICE, "dog"))
    assert [r.id for r in found] == ["mem_000000000003"]


def test_a_reindex_cut_short_leaves_the_earlier_schema_to_redo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-index is one transaction: a failure midway (here the second
    record's) leaves the file as it was, and the next open does it whole."""
    path = earlier_file(
        tmp_path,
        [
            ("mem_000000000001", ALICE, "fact", "my dog is called Rex", 1.0),
            ("mem_000000000002", ALICE, "fact", "the dog likes the park", 2.0),
        ],
    )
    indexed = sqlite_memory.index_record
    calls = 0

    def cut_short(*args: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError("disk I/O error")
        indexed(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_memory, "index_record", cut_short)
    with pytest.raises(OSError, match="disk I/O error"):
        run(path, lambda store: store.search(ALICE, "dog"))
    with sqlite3.connect(path) as db:
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        (rows,) = db.execute("SELECT count(*) FROM memory_words").fetchone()
    db.close()
    assert {"memories_fts", "memories_added", "memories_removed"} <= names
    assert rows == 0
    monkeypatch.setattr(sqlite_memory, "index_record", indexed)
    found = run(path, lambda store: store.search(ALICE, "dog"))
    assert sorted(r.id for r in found) == ["mem_000000000001", "mem_000000000002"]
    assert index_rows(path)[:2] == (2, 2)


def test_a_failed_prepare_raises_its_own_error_and_holds_no_lock(tmp_path: Path) -> None:
    """SQLite rolls a transaction back itself on some errors (a full disk, an
    I/O error): the open that failed says why, and leaves no connection
    holding the file's write lock."""
    path = tmp_path / "prepared.db"

    def failing(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO t VALUES (1)")
        db.execute("ROLLBACK")  # as SQLite does on SQLITE_FULL
        raise OSError("database or disk is full")

    async def main() -> None:
        thread = SqliteThread(path, "CREATE TABLE IF NOT EXISTS t (x);", "test", prepare=failing)
        try:
            with pytest.raises(OSError, match="disk is full"):
                await thread.run(lambda db: None)
        finally:
            thread.close()

    asyncio.run(main())
    with sqlite3.connect(path, timeout=0) as db:
        db.execute("BEGIN IMMEDIATE")  # nobody holds the write lock
        assert db.execute("SELECT count(*) FROM t").fetchone() == (0,)
        db.execute("ROLLBACK")
    db.close()
