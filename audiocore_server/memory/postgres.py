"""The memory store in PostgreSQL: several hosts on one database (the one
``--database-url`` names for the sessions), with PostgreSQL's full-text
search.

A search reads its owner's records only, however large the store: as in
SQLite, the full-text index (``tokens``, a ``tsvector`` under a GIN index)
holds each record's words as tokens of its owner and kind
(``memory_store.scoped_tokens``: 16 letters, one word to PostgreSQL's
parser, the ``simple`` configuration keeping them as they are), not the
words, so a word's posting list is one owner's. A search's tokens are
bound as a ``text[]`` and become the ``tsquery`` through ``quote_literal``
(no query syntax of the user's ever applies); the owner's newest
``MAX_CANDIDATES`` matches are ranked by ``ts_rank``, newest first among
equals. A table of the schema before (a ``tsvector`` of every owner's
words, generated from the text) is re-indexed at the first call of a
process. One owner's writes are
serialised by a transaction-scoped advisory lock on the owner, so the fact
limit holds across hosts.

asyncpg directly, as ``pg_leases.py`` (which says why): a small pool opened
at the first call, the schema created under the same advisory lock as the
other stores', every statement bounded by ``STATEMENT_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from ..storage.pg_leases import asyncpg_dsn, open_pool
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

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audiocore_memories (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    author TEXT,
    source TEXT,
    created DOUBLE PRECISION NOT NULL,
    tokens TSVECTOR NOT NULL
);
ALTER TABLE audiocore_memories ADD COLUMN IF NOT EXISTS tokens TSVECTOR;
CREATE INDEX IF NOT EXISTS audiocore_memories_by_owner
    ON audiocore_memories (owner, kind, created, seq);
CREATE INDEX IF NOT EXISTS audiocore_memories_by_time
    ON audiocore_memories (owner, created, seq);
CREATE UNIQUE INDEX IF NOT EXISTS audiocore_memories_by_source
    ON audiocore_memories (owner, source) WHERE source IS NOT NULL;
CREATE INDEX IF NOT EXISTS audiocore_memories_tokens ON audiocore_memories USING GIN (tokens);
CREATE TABLE IF NOT EXISTS audiocore_memory_profiles (
    owner TEXT PRIMARY KEY,
    user_section TEXT NOT NULL DEFAULT '',
    managed TEXT NOT NULL DEFAULT '',
    updated TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
"""
_LOCK_OWNER = "SELECT pg_advisory_xact_lock(hashtext('audiocore_memory:' || $1))"
_COLUMNS = "id, kind, text, created, author"
# Any of the tokens, each a quoted lexeme.
_QUERY = (
    "to_tsquery('simple', array_to_string("
    "ARRAY(SELECT quote_literal(t) FROM unnest($2::text[]) AS t), ' | '))"
)
# A record's tokens as to_tsvector cuts them (positions for ts_rank).
TOKENS = "to_tsvector('simple', {})"
# Matches ranked in one search, the owner's newest: every fact an owner
# holds at the default limit (as sqlite_memory.MAX_CANDIDATES).
MAX_CANDIDATES = 1_000
_REINDEX_LOCK = "SELECT pg_advisory_xact_lock(hashtext('audiocore_memory:reindex'))"
# Records read and rewritten a statement while re-indexing: each statement
# is held to STATEMENT_TIMEOUT_S, however large the table.
REINDEX_BATCH = 1_000


def token_text(owner: str, kind: Kind, text: str) -> str:
    """What ``TOKENS`` makes the ``tokens`` of a record from."""
    return " ".join(scoped_tokens(owner, kind, index_words(text)))


def _record(row: Any) -> Record:
    return Record(row["id"], row["kind"], row["text"], row["created"], row["author"])


class PostgresMemoryStore(MemoryStore):
    def __init__(self, url: str, *, max_facts: int = 1_000) -> None:
        super().__init__(max_facts=max_facts)
        self._dsn = asyncpg_dsn(url)
        self._pool: asyncpg.Pool | None = None
        self._connecting = asyncio.Lock()

    async def _ready(self) -> asyncpg.Pool:
        async with self._connecting:
            if self._pool is None:
                # A plan for each search's owner and words: a generic plan
                # (asyncpg prepares every statement) reads an owner's rows
                # as if every owner held as many.
                settings = {"plan_cache_mode": "force_custom_plan"}
                pool = await open_pool(self._dsn, _SCHEMA, server_settings=settings)
                try:
                    await _reindex_earlier_schema(pool)
                except BaseException:
                    await pool.close()
                    raise
                self._pool = pool
            return self._pool

    async def _insert(self, owner: str, record: Record, source: str | None) -> bool:
        pool = await self._ready()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(_LOCK_OWNER, owner)
            if record.kind == "fact":
                held = await conn.fetchval(
                    "SELECT count(*) FROM audiocore_memories WHERE owner = $1 AND kind = 'fact'",
                    owner,
                )
                if held >= self.max_facts:
                    raise MemoryInputError(
                        f"memory is full: {self.max_facts} facts; forget some first"
                    )
            added = await conn.fetchval(
                "INSERT INTO audiocore_memories"
                " (id, owner, kind, text, author, source, created, tokens)"
                f" VALUES ($1, $2, $3, $4, $5, $6, $7, {TOKENS.format('$8')})"
                " ON CONFLICT (owner, source) WHERE source IS NOT NULL DO NOTHING RETURNING 1",
                record.id,
                owner,
                record.kind,
                record.text,
                record.author,
                source,
                record.created,
                token_text(owner, record.kind, record.text),
            )
            if record.kind == "turn":
                await conn.execute(
                    "DELETE FROM audiocore_memories WHERE seq IN (SELECT seq FROM"
                    " audiocore_memories WHERE owner = $1 AND kind = 'turn'"
                    " ORDER BY created DESC OFFSET $2)",
                    owner,
                    MAX_TURNS_PER_OWNER,
                )
            return added is not None

    async def _swap(self, owner: str, ids: list[str], record: Record) -> None:
        pool = await self._ready()
        async with pool.acquire() as conn, conn.transaction():
            await _delete_owned(conn, owner, ids)
            await conn.execute(
                "INSERT INTO audiocore_memories (id, owner, kind, text, created, tokens)"
                f" VALUES ($1, $2, 'fact', $3, $4, {TOKENS.format('$5')})",
                record.id,
                owner,
                record.text,
                record.created,
                token_text(owner, "fact", record.text),
            )

    async def _remove(self, owner: str, ids: list[str]) -> None:
        pool = await self._ready()
        async with pool.acquire() as conn, conn.transaction():
            await _delete_owned(conn, owner, ids)

    async def _latest(self, owner: str, limit: int, kind: Kind | None) -> list[Record]:
        pool = await self._ready()
        # Equalities only, so an index's order is the answer's.
        args: tuple[object, ...]
        if kind is None:
            where, args = "owner = $1", (owner, limit)
        else:
            where, args = "owner = $1 AND kind = $3", (owner, limit, kind)
        rows = await pool.fetch(
            f"SELECT {_COLUMNS} FROM audiocore_memories WHERE {where}"
            " ORDER BY created DESC, seq DESC LIMIT $2",
            *args,
        )
        return [_record(r) for r in rows]

    async def _search(
        self, owner: str, words: list[str], limit: int, kind: Kind | None
    ) -> list[Record]:
        tokens = search_tokens(owner, words, kind)
        pool = await self._ready()
        rows = await pool.fetch(
            # The tokens are the owner's: the owner is checked on the
            # candidates, outside the LIMIT, so that no plan ANDs the GIN
            # index with all of the owner's rows in the owner's index.
            f"SELECT {_COLUMNS} FROM (SELECT {_COLUMNS}, owner, seq, tokens, q"
            f" FROM audiocore_memories, {_QUERY} AS q"
            " WHERE tokens @@ q AND ($3::text IS NULL OR kind = $3)"
            " ORDER BY seq DESC LIMIT $5) AS candidates"
            " WHERE owner = $1"
            " ORDER BY ts_rank(tokens, q) DESC, seq DESC LIMIT $4",
            owner,
            tokens,
            kind,
            limit,
            MAX_CANDIDATES,
        )
        return [_record(r) for r in rows]

    async def _count(self, owner: str) -> int:
        pool = await self._ready()
        n = await pool.fetchval("SELECT count(*) FROM audiocore_memories WHERE owner = $1", owner)
        return int(n)

    async def _profile(self, owner: str) -> Profile:
        pool = await self._ready()
        row = await pool.fetchrow(
            "SELECT user_section, managed FROM audiocore_memory_profiles WHERE owner = $1", owner
        )
        return Profile(row["user_section"], row["managed"]) if row else Profile()

    async def _edit_profile(
        self, owner: str, managed: str | None, user_section: str | None
    ) -> Profile:
        pool = await self._ready()
        row = await pool.fetchrow(
            "INSERT INTO audiocore_memory_profiles (owner, user_section, managed)"
            " VALUES ($1, coalesce($3, ''), coalesce($2, ''))"
            " ON CONFLICT (owner) DO UPDATE SET"
            " managed = coalesce($2, audiocore_memory_profiles.managed),"
            " user_section = coalesce($3, audiocore_memory_profiles.user_section),"
            " updated = clock_timestamp()"
            " RETURNING user_section, managed",
            owner,
            managed,
            user_section,
        )
        assert row is not None  # RETURNING of an upsert
        return Profile(row["user_section"], row["managed"])

    async def _forget_owner(self, owner: str) -> int:
        pool = await self._ready()
        async with pool.acquire() as conn, conn.transaction():
            status = await conn.execute("DELETE FROM audiocore_memories WHERE owner = $1", owner)
            await conn.execute("DELETE FROM audiocore_memory_profiles WHERE owner = $1", owner)
        return int(status.split()[-1])  # "DELETE <n>"

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()


async def _reindex_earlier_schema(pool: asyncpg.Pool) -> None:
    """A table of the schema before (``words``, generated from every owner's
    text): each record's ``tokens`` written, then ``words`` (and its index)
    dropped, in one transaction of short statements. One host at a time;
    nothing to do the next time."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(_REINDEX_LOCK)
        earlier = await conn.fetchval(
            "SELECT 1 FROM information_schema.columns"
            " WHERE table_name = 'audiocore_memories' AND column_name = 'words'"
            " AND table_schema = current_schema()"
        )
        if earlier is None:
            return
        last = 0  # seq counts from 1
        while rows := await conn.fetch(
            "SELECT seq, owner, kind, text FROM audiocore_memories"
            " WHERE seq > $1 ORDER BY seq LIMIT $2",
            last,
            REINDEX_BATCH,
        ):
            await conn.executemany(
                f"UPDATE audiocore_memories SET tokens = {TOKENS.format('$2')} WHERE seq = $1",
                [(r["seq"], token_text(r["owner"], r["kind"], r["text"])) for r in rows],
            )
            last = rows[-1]["seq"]
        await conn.execute("ALTER TABLE audiocore_memories DROP COLUMN words")
        await conn.execute("ALTER TABLE audiocore_memories ALTER COLUMN tokens SET NOT NULL")


async def _delete_owned(conn: Any, owner: str, ids: list[str]) -> None:
    await conn.execute(_LOCK_OWNER, owner)
    found = await conn.fetch(
        "SELECT id FROM audiocore_memories WHERE owner = $1 AND id = ANY($2::text[])", owner, ids
    )
    unknown_ids(ids, {row["id"] for row in found})
    await conn.execute(
        "DELETE FROM audiocore_memories WHERE owner = $1 AND id = ANY($2::text[])", owner, ids
    )
