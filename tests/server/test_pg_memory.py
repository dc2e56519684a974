"""The PostgreSQL memory store's owner-first index (test_memory_store.py has
what it means for a search, on both stores): it holds each owner's words
as tokens, never the words, and a table of the earlier schema (a
``tsvector`` generated from every owner's text) is re-indexed at the first
call of a process, one host at a time."""

from __future__ import annotations

import asyncio

import pytest

from audiocore_server.memory.store import Kind, index_words, scoped_tokens

ALICE, BOB = "key:alice-0123456789abcdef", "key:bob-0123456789abcdef01"

# The table before the owner-first index (its other indexes are the same).
EARLIER_TABLE = """
CREATE TABLE audiocore_memories (
    seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, owner TEXT NOT NULL,
    kind TEXT NOT NULL, text TEXT NOT NULL, author TEXT, source TEXT,
    created DOUBLE PRECISION NOT NULL,
    words TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
);
CREATE INDEX audiocore_memories_words ON audiocore_memories USING GIN (words);
INSERT INTO audiocore_memories (id, owner, kind, text, created) VALUES
    ('mem_000000000001', 'key:alice-0123456789abcdef', 'fact', 'my dog is called Rex', 1),
    ('mem_000000000002', 'key:bob-0123456789abcdef01', 'fact', 'my dog is called Fido', 2),
    ('mem_000000000003', 'key:alice-0123456789abcdef', 'turn', 'we talked about the dog', 3);
"""


def test_the_index_holds_tokens_and_an_earlier_table_is_reindexed(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncpg

    from audiocore_server.memory.postgres import PostgresMemoryStore
    from audiocore_server.storage.pg_leases import asyncpg_dsn

    # The three records in two batches (a statement each, however many).
    monkeypatch.setattr("audiocore_server.memory.postgres.REINDEX_BATCH", 2)

    async def main() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(postgres_url))
        try:
            await conn.execute(EARLIER_TABLE)
            store = PostgresMemoryStore(postgres_url)
            try:
                assert [r.id for r in await store.search(ALICE, "dog", kind="fact")] == [
                    "mem_000000000001"
                ]
                assert [r.id for r in await store.search(ALICE, "dog")] == [
                    "mem_000000000003",
                    "mem_000000000001",
                ]
                assert [r.id for r in await store.search(BOB, "dog")] == ["mem_000000000002"]
                added = await store.remember(ALICE, "the dog sleeps in the shed")
                assert added is not None
            finally:
                await store.close()
            columns = {
                row["column_name"]
                for row in await conn.fetch(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_name = 'audiocore_memories'"
                )
            }
            assert "words" not in columns and "tokens" in columns
            lexemes = await conn.fetchval(
                "SELECT tsvector_to_array(tokens) FROM audiocore_memories WHERE id = $1", added.id
            )
            expected = scoped_tokens(ALICE, "fact", index_words("the dog sleeps in the shed"))
            assert sorted(lexemes) == sorted(set(expected))
            assert not {"dog", "sleeps", "shed"} & set(lexemes)
            # Opened again: nothing to re-index, the same answers.
            again = PostgresMemoryStore(postgres_url)
            try:
                found = await again.search(ALICE, "dog", kind="fact")
                assert sorted(r.id for r in found) == sorted([added.id, "mem_000000000001"])
            finally:
                await again.close()
        finally:
            await conn.close()

    asyncio.run(main())


def test_a_reindex_cut_short_leaves_the_earlier_table_to_redo(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-index is one transaction: a failure in its second batch leaves
    the first batch's tokens unwritten and ``words`` in place, and the next
    process does it whole."""
    import asyncpg

    from audiocore_server.memory import postgres as pg_memory
    from audiocore_server.memory.postgres import PostgresMemoryStore
    from audiocore_server.storage.pg_leases import asyncpg_dsn

    monkeypatch.setattr(pg_memory, "REINDEX_BATCH", 2)
    written = pg_memory.token_text
    calls = 0

    def cut_short(owner: str, kind: Kind, text: str) -> str:
        nonlocal calls
        calls += 1
        if calls == 3:  # the second batch's first record
            raise OSError("connection lost")
        return written(owner, kind, text)

    async def main() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(postgres_url))
        try:
            await conn.execute(EARLIER_TABLE)
            monkeypatch.setattr(pg_memory, "token_text", cut_short)
            store = PostgresMemoryStore(postgres_url)
            try:
                with pytest.raises(OSError, match="connection lost"):
                    await store.search(ALICE, "dog")
            finally:
                await store.close()
            tokens = await conn.fetch("SELECT tokens FROM audiocore_memories")
            assert [row["tokens"] for row in tokens] == [None, None, None]
            assert await conn.fetchval("SELECT count(words) FROM audiocore_memories") == 3
            monkeypatch.setattr(pg_memory, "token_text", written)
            again = PostgresMemoryStore(postgres_url)
            try:
                found = await again.search(ALICE, "dog")
                assert [r.id for r in found] == ["mem_000000000003", "mem_000000000001"]
            finally:
                await again.close()
        finally:
            await conn.close()

    asyncio.run(main())
