"""The SQLite memory store's search, owner first: the full-text index holds
each owner's words apart (as keyed hashes, never the text), so another
owner's records never take a search's place among the ranked candidates;
the index follows every insert and delete; accents fold as FTS5's
``unicode61`` folded them; and a file of the earlier schema (one index of
every owner's text) is re-indexed as it is opened."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from server import sqlite_memory
from server.memory_store import MAX_TURNS_PER_OWNER
from server.sqlite_memory import SqliteMemoryStore, index_words, scoped_tokens

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


def test_another_owners_newer_matches_never_crowd_out_the_owners_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two candidates a search: were the index every owner's, Bob's ten
    # newer "boat" records would fill them and Alice's would not be found.
    monkeypatch.setattr(sqlite_memory, "MAX_CANDIDATES", 2)

    async def scenario(store: SqliteMemoryStore) -> None:
        mine = await store.remember(ALICE, "the boat is moored at the north pier")
        for n in range(10):
            await store.remember(BOB, f"boat number {n} is for sale")
        assert mine is not None
        assert [r.id for r in await store.search(ALICE, "boat")] == [mine.id]
        assert len(await store.search(BOB, "boat")) == 2

    run(tmp_path / "memory.db", scenario)


def test_the_owners_newest_candidates_are_ranked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_memory, "MAX_CANDIDATES", 3)

    async def scenario(store: SqliteMemoryStore) -> None:
        texts = [
            "red red red red",  # the best match, but the oldest: not a candidate
            "a red kite",
            "red",
            "the red door and the green one",
        ]
        ids = [(await store.remember(ALICE, t)).id for t in texts]  # type: ignore[union-attr]
        found = [r.id for r in await store.search(ALICE, "red")]
        # bm25 among the newest three: the shortest first.
        assert found == [ids[2], ids[1], ids[3]]
        monkeypatch.setattr(sqlite_memory, "MAX_CANDIDATES", 100)
        assert [r.id for r in await store.search(ALICE, "red")][0] == ids[0]

    run(tmp_path / "memory.db", scenario)


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


def test_words_fold_case_and_accents_as_before(tmp_path: Path) -> None:
    assert index_words("Café CRÈME, naïve_one; Straße") == ["cafe", "creme", "naive_one", "straße"]

    async def scenario(store: SqliteMemoryStore) -> None:
        fact = await store.remember(ALICE, "The Café on Rue Crémieux")
        assert fact is not None
        for query in ("cafe", "CAFÉ", "cremieux", "crémieux"):
            assert [r.id for r in await store.search(ALICE, query)] == [fact.id], query

    run(tmp_path / "memory.db", scenario)


def test_a_file_of_the_earlier_schema_is_reindexed_as_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with sqlite3.connect(path) as db:
        db.executescript(EARLIER_SCHEMA)
        db.executemany(
            "INSERT INTO memories (id, owner, kind, text, created) VALUES (?, ?, ?, ?, ?)",
            [
                ("mem_000000000001", ALICE, "fact", "my dog is called Rex", 1.0),
                ("mem_000000000002", BOB, "fact", "my dog is called Fido", 2.0),
                ("mem_000000000003", ALICE, "turn", "we talked about the dog", 3.0),
            ],
        )
    db.close()

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
