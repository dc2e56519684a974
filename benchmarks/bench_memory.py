"""Long-term memory: how long a recall takes as an owner's memory grows, on
SQLite and on PostgreSQL, and what injection adds to a session's first
answer.

    python benchmarks/bench_memory.py --sizes 1000,10000,100000 --total 1000000

**Recall.** One store per backend holds ``--total`` records: owners with
``--sizes`` facts each (the measured ones) and filler owners of 1,000 facts
each, all inserted in one shuffled order (an owner's rows are spread over
the store, as they would be after months of use). Texts are facts of 6 to
24 words from a Zipf-distributed vocabulary of 40,000 made-up words among
everyday function words. Each size is timed with ``MemoryStore.search`` as
``user_memory``'s recall calls it (20 facts, best first):

* **rare**: one word of the owner's that the whole store holds at most a
  few dozen times (what a recall of a name or a place looks like);
* **common**: 16 words among the 100 most frequent (a query as long as
  search reads, every word matching thousands of records);
* **injection read**: what a connection reads before the model is told its
  memory (the profile, and the newest 10 facts).

The records are built outside the timed region through a bulk path that
writes the rows the store's ``remember`` writes (the same statement on
SQLite, its columns through ``COPY`` on PostgreSQL; the indexes and the
full-text index are the store's own, kept by its schema), then checked
through the store's API: each owner's count, and every timed answer
against what the generated texts say it must be (a rare word's matches
exactly, the common query's answers each holding one of its words).

**Injection.** Two servers (``python -m server``, offline model) on one
data directory, one with ``inject_memory_context`` on and one with it off;
sessions alternate between them. A session opens ``/ws`` with the
100k-size owner's ``userKey``, sends "what were you told about me" at once
and times ``start`` → the answer's first ``text-delta``. With injection the
answer holds the owner's newest facts; without it, none (checked).

Prints Markdown tables (p50 and p99 in ms) and the machine's load.
PostgreSQL is a throwaway cluster (``tests/server/postgres_helpers.py``),
or ``AUDIOCORE_TEST_POSTGRES_URL``'s server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "server"))

from bench_server_client import our_server  # noqa: E402

from audiocore_server.memory import sqlite as sqlite_memory  # noqa: E402
from audiocore_server.memory.sqlite import SqliteMemoryStore  # noqa: E402
from audiocore_server.memory.store import MemoryStore, Record, search_words  # noqa: E402

FILLER_SIZE = 1_000
RECALL_LIMIT = 20  # user_memory's recall (memory_tool.RECALL_LIMIT)
INJECTED = 10  # max_memory_injection's default
VOCABULARY = 40_000
FUNCTION_RANKS = 50
COMMON_POOL = 100  # the common query's words come from the most frequent
RARE_AT_MOST = 40  # a rare word's matches in the whole store
FUNCTION_WORDS = tuple(
    [
        "the",
        "a",
        "my",
        "is",
        "was",
        "and",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "her",
        "his",
        "our",
        "their",
        "it",
    ]
)
SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["an", "el", "or", "is"]
ASKED = "what were you told about me"


def vocabulary(rng: random.Random) -> list[str]:
    """Made-up words, distinct, 2 to 4 syllables; rank 0 the most frequent."""
    words: set[str] = set()
    while len(words) < VOCABULARY:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        if search_words(word) == [word]:  # not one of the words search drops
            words.add(word)
    ordered = sorted(words)
    rng.shuffle(ordered)
    return ordered


def fact_texts(rng: random.Random, words: list[str], n: int) -> list[str]:
    """``n`` facts: 6 to 24 words, a third function words, the rest drawn
    as the content words of English prose: Zipf's law (s = 1.07) over the
    whole vocabulary, whose first ``FUNCTION_RANKS`` ranks are function
    words — so the most frequent content word is 0.4% of the content
    (English's most frequent noun, "time", is about 0.2% of all words)."""
    weights = list(
        itertools.accumulate(1 / (r + FUNCTION_RANKS) ** 1.07 for r in range(len(words)))
    )
    texts = []
    for _ in range(n):
        length = rng.randint(6, 24)
        content = rng.choices(words, cum_weights=weights, k=length - length // 3)
        glue = rng.choices(FUNCTION_WORDS, k=length // 3)
        mixed = content + glue
        rng.shuffle(mixed)
        texts.append(" ".join(mixed))
    return texts


class Corpus:
    """Who holds which text, in insertion order, and the word counts a
    query's expected answer is computed from."""

    def __init__(self, sizes: list[int], total: int, seed: int) -> None:
        rng = random.Random(seed)
        self.words = vocabulary(rng)
        self.owners = {size: f"key:bench-owner-{size}-{secrets.token_hex(8)}" for size in sizes}
        measured = sum(sizes)
        if total < measured:
            raise SystemExit(f"--total {total} is below the measured owners' {measured} records")
        fillers = [
            (f"key:bench-filler-{i:06d}-{secrets.token_hex(6)}", FILLER_SIZE)
            for i in range((total - measured + FILLER_SIZE - 1) // FILLER_SIZE)
        ]
        counts = [(owner, size) for size, owner in self.owners.items()] + fillers
        slots = [owner for owner, size in counts for _ in range(size)][:total]
        rng.shuffle(slots)
        self.rows = list(zip(slots, fact_texts(rng, self.words, len(slots)), strict=True))
        # Document frequency of each word in the store, and per measured owner.
        self.store_df: Counter[str] = Counter()
        self.owner_texts: dict[str, list[str]] = {o: [] for o in self.owners.values()}
        for owner, text in self.rows:
            self.store_df.update(set(text.split()))
            if owner in self.owner_texts:
                self.owner_texts[owner].append(text)
        self.owner_set = {o: set(texts) for o, texts in self.owner_texts.items()}
        self.rng = rng

    def newest(self, owner: str, n: int) -> list[str]:
        return self.owner_texts[owner][::-1][:n]

    def rare_queries(self, owner: str, n: int) -> list[str]:
        """Words of the owner's texts the store holds at most ``RARE_AT_MOST`` times."""
        mine = {w for t in self.owner_texts[owner] for w in t.split()}
        rare = sorted(w for w in mine if self.store_df[w] <= RARE_AT_MOST)
        if not rare:
            raise SystemExit(f"no rare word for {owner}: the corpus is too small")
        return [self.rng.choice(rare) for _ in range(n)]

    def common_queries(self, n: int) -> list[str]:
        content = [w for w, _ in self.store_df.most_common() if w not in FUNCTION_WORDS]
        pool = content[:COMMON_POOL]
        return [" ".join(self.rng.sample(pool, 16)) for _ in range(n)]

    def expected_rare(self, owner: str, word: str) -> set[str]:
        return {t for t in self.owner_texts[owner] if word in t.split()}


# ------------------------------------------------------------------ stores
async def fill_sqlite(store: SqliteMemoryStore, corpus: Corpus) -> None:
    """The rows ``remember`` inserts (``SqliteMemoryStore._insert``'s
    statement, and its full-text index row, ``index_record``), in one
    transaction, without the per-row fact count that caps an owner."""
    rows = _record_rows(corpus)
    # The schema before the owner-first index kept it by triggers (for the
    # before/after figures, run against that commit).
    index_record = getattr(sqlite_memory, "index_record", None)

    def insert(db: sqlite3.Connection) -> None:
        for rowid, (memory_id, owner, kind, text, author, source, created) in enumerate(rows, 1):
            db.execute(
                "INSERT INTO memories (rowid, id, owner, kind, text, author, source, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (rowid, memory_id, owner, kind, text, author, source, created),
            )
            if index_record is not None:
                index_record(db, rowid, owner, kind, text)

    await store._db.run(insert)  # the store's own connection, thread and schema


async def fill_postgres(url: str, store: MemoryStore, corpus: Corpus) -> None:
    """The rows ``remember`` inserts, through ``COPY`` into a staging table
    and one ``INSERT … SELECT`` with the store's own ``tokens`` expression
    (the GIN index kept by PostgreSQL), then ``ANALYZE``."""
    import asyncpg

    from audiocore_server.memory import postgres as pg_memory
    from audiocore_server.storage.pg_leases import asyncpg_dsn

    await store.count("key:none")  # the store creates its schema
    columns = ["id", "owner", "kind", "text", "author", "source", "created"]
    rows = _record_rows(corpus)
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        token_text = getattr(pg_memory, "token_text", None)
        if token_text is None:  # the schema before: a tsvector generated from the text
            await conn.copy_records_to_table("audiocore_memories", records=rows, columns=columns)
        else:
            await conn.execute(
                "CREATE TEMP TABLE staging (id text, owner text, kind text, text text,"
                " author text, source text, created float8, tokens text)"
            )
            staged = [(*row, token_text(row[1], row[2], row[3])) for row in rows]
            await conn.copy_records_to_table("staging", records=staged)
            listed = ", ".join(columns)
            await conn.execute(
                f"INSERT INTO audiocore_memories ({listed}, tokens)"
                f" SELECT {listed}, {pg_memory.TOKENS.format('tokens')} FROM staging ORDER BY id"
            )
        await conn.execute("ANALYZE audiocore_memories")
    finally:
        await conn.close()


def _record_rows(corpus: Corpus) -> list[tuple[Any, ...]]:
    start = time.time() - len(corpus.rows)
    return [
        (f"mem_{i:012x}", owner, "fact", text, None, None, start + i)
        for i, (owner, text) in enumerate(corpus.rows)
    ]


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A new database on ``AUDIOCORE_TEST_POSTGRES_URL``'s server, else on
    a throwaway cluster of the installed PostgreSQL."""
    from postgres_helpers import new_database, server_url

    def unavailable(reason: str) -> None:
        raise SystemExit(reason)

    with server_url(unavailable) as url, new_database(url, "audiocore_bench_") as database:
        yield database


# ------------------------------------------------------------------ timing
async def timed(calls: list[Callable[[], Awaitable[object]]]) -> tuple[list[float], list[object]]:
    times, answers = [], []
    for call in calls:
        started = time.perf_counter()
        answer = await call()
        times.append(time.perf_counter() - started)
        answers.append(answer)
    return times, answers


def p(values: list[float], q: float) -> float:
    if q == 0.5:
        return statistics.median(values)
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def check_rare(corpus: Corpus, owner: str, word: str, found: list[Record]) -> None:
    expected = corpus.expected_rare(owner, word)
    got = {r.text for r in found}
    want = len(expected) if len(expected) < RECALL_LIMIT else RECALL_LIMIT
    if not got <= expected or len(found) != want:
        raise AssertionError(f"rare {word!r}: {len(found)} answers, {len(expected)} expected")


def check_common(corpus: Corpus, owner: str, query: str, found: list[Record]) -> None:
    words = set(search_words(query))
    matching = (t for t in corpus.owner_texts[owner] if words & set(t.split()))
    expected = len(list(itertools.islice(matching, RECALL_LIMIT)))
    if len(found) != expected:
        raise AssertionError(f"common: {len(found)} answers, {expected} expected")
    for record in found:
        if record.text not in corpus.owner_set[owner] or not words & set(record.text.split()):
            raise AssertionError(f"common: {record.text!r} is not a match of the owner's")


async def measure_store(
    name: str, store: MemoryStore, corpus: Corpus, queries: int
) -> list[dict[str, object]]:
    rows = []
    for size, owner in corpus.owners.items():
        count = await store.count(owner)
        if count != size:
            raise AssertionError(f"{name}: {owner} holds {count} records, expected {size}")
        rare = corpus.rare_queries(owner, queries)
        common = corpus.common_queries(queries)
        warm = [lambda q=q, o=owner: store.search(o, q, RECALL_LIMIT, "fact") for q in rare[:20]]
        await timed(warm)  # the pages a first query reads from disk
        row: dict[str, object] = {"backend": name, "owner": size, "store": len(corpus.rows)}
        for label, qs, check in (("rare", rare, check_rare), ("common", common, check_common)):
            calls = [lambda q=q, o=owner: store.search(o, q, RECALL_LIMIT, "fact") for q in qs]
            times, answers = await timed(calls)
            for q, found in zip(qs, answers, strict=True):
                check(corpus, owner, q, found)  # type: ignore[arg-type]
            row[label] = times
        calls = [lambda o=owner: injection_read(store, o) for _ in range(queries)]
        times, answers = await timed(calls)
        if any(a != corpus.newest(owner, INJECTED) for a in answers):
            raise AssertionError(f"{name}: the injection read is not the owner's newest facts")
        row["injection read"] = times
        rows.append(row)
        print_recall([row], header=False)  # as it comes: the run is long

    return rows


async def injection_read(store: MemoryStore, owner: str) -> list[str]:
    await store.profile(owner)
    return [r.text for r in await store.latest(owner, INJECTED)]


async def sqlite_rows(folder: Path, corpus: Corpus, queries: int) -> list[dict[str, object]]:
    store = SqliteMemoryStore(folder / "memory.db")
    try:
        started = time.perf_counter()
        await fill_sqlite(store, corpus)
        built = time.perf_counter() - started
        size = sum(f.stat().st_size for f in folder.glob("memory.db*")) / 1e6
        print(f"# sqlite: {len(corpus.rows)} rows in {built:.0f} s, {size:.0f} MB", flush=True)
        return await measure_store("SQLite", store, corpus, queries)
    finally:
        await store.close()


def postgres_rows(corpus: Corpus, queries: int) -> list[dict[str, object]]:
    from audiocore_server.memory.postgres import PostgresMemoryStore

    with postgres_database() as url:

        async def main() -> list[dict[str, object]]:
            store = PostgresMemoryStore(url)
            try:
                started = time.perf_counter()
                await fill_postgres(url, store, corpus)
                built = time.perf_counter() - started
                print(f"# postgres: {len(corpus.rows)} rows in {built:.0f} s", flush=True)
                return await measure_store("PostgreSQL", store, corpus, queries)
            finally:
                await store.close()

        return asyncio.run(main())


# --------------------------------------------------------------- injection
def first_answer(url: str, user_key: str) -> tuple[float, str]:
    """``start`` → the first ``text-delta`` of the answer to ``ASKED``; and
    the answer's whole text."""
    from websockets.sync.client import connect

    with connect(url, max_size=None) as ws:
        started = time.perf_counter()
        ws.send(json.dumps({"type": "start", "userKey": user_key, "turnDetection": "manual"}))
        ws.send(json.dumps({"type": "text", "text": ASKED}))
        first, text = None, []
        while True:
            frame = ws.recv(timeout=60)
            if isinstance(frame, bytes):
                continue
            message = json.loads(frame)
            if message["type"] == "text-delta":
                first = first or time.perf_counter()
                text.append(message["delta"])
            elif message["type"] == "finish" and first is not None:
                return first - started, "".join(text)
            elif message["type"] == "error":
                raise AssertionError(f"the server said {message}")


def injection_rows(folder: Path, corpus: Corpus, sessions: int) -> list[dict[str, object]]:
    size = max(corpus.owners)
    owner = corpus.owners[size]
    newest = corpus.newest(owner, INJECTED)
    times: dict[str, list[float]] = {"on": [], "off": []}
    stats = folder / "stats.json"
    data = {"AUDIOCORE_DATA_DIR": str(folder)}
    with (
        our_server(stats, **data, AUDIOCORE_INJECT_MEMORY_CONTEXT="true") as (on, _),
        our_server(stats, **data, AUDIOCORE_INJECT_MEMORY_CONTEXT="false") as (off, _),
    ):
        for i in range(sessions + 2):  # two warm-up sessions each
            for label, url in (("on", on), ("off", off)):
                seconds, answer = first_answer(url, owner.removeprefix("key:"))
                told = [t for t in newest if t in answer]
                if (label == "on" and len(told) != INJECTED) or (label == "off" and told):
                    raise AssertionError(f"injection {label}: told {len(told)} of the facts")
                if i >= 2:
                    times[label].append(seconds)
    return [{"injection": label, "owner": size, "sessions": t} for label, t in times.items()]


# ------------------------------------------------------------------ output
def ms(values: list[float], q: float) -> str:
    return f"{1000 * p(values, q):.2f}"


def print_recall(rows: list[dict[str, object]], *, header: bool = True) -> None:
    if header:
        print(
            "| backend | owner's facts | store | rare p50 | rare p99 | common (16 words) p50"
            " | common p99 | injection read p50 | injection read p99 |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        cells = [row["backend"], f"{row['owner']:,}", f"{row['store']:,}"]
        for label in ("rare", "common", "injection read"):
            values = row[label]
            cells += [ms(values, 0.5), ms(values, 0.99)]  # type: ignore[arg-type]
        print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def print_injection(rows: list[dict[str, object]]) -> None:
    print("| injection | owner's facts | sessions | first answer p50 | p99 |")
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        t: list[float] = row["sessions"]  # type: ignore[assignment]
        print(
            f"| {row['injection']} | {row['owner']:,} | {len(t)} | {ms(t, 0.5)} | {ms(t, 0.99)} |"
        )
    on, off = (statistics.median(row["sessions"]) for row in rows)  # type: ignore[arg-type]
    print(f"\ninjection adds {1000 * (on - off):.2f} ms to the median first answer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="measured owners' facts")
    parser.add_argument("--total", type=int, default=1_000_000, help="records in the store")
    parser.add_argument("--queries", type=int, default=300, help="timed per case")
    parser.add_argument("--sessions", type=int, default=30, help="first answers per setting")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--seed", type=int, default=22)
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    backends = args.backends.split(",")
    unknown = set(backends) - {"sqlite", "postgres"}
    if unknown:
        raise SystemExit(f"--backends: expected sqlite and/or postgres, got {sorted(unknown)}")
    started = time.perf_counter()
    corpus = Corpus(sizes, args.total, args.seed)
    print(
        f"# corpus: {len(corpus.rows)} facts in {time.perf_counter() - started:.0f} s", flush=True
    )
    print(f"# load at start {load()}, seed {args.seed}", flush=True)
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as name:
        folder = Path(name)
        if "sqlite" in backends:
            rows += asyncio.run(sqlite_rows(folder, corpus, args.queries))
        if "postgres" in backends:
            rows += postgres_rows(corpus, args.queries)
        injection = injection_rows(folder, corpus, args.sessions) if "sqlite" in backends else []
    print(f"\n## Recall (ms; {args.queries} queries a case; load at end {load()})\n")
    print_recall(rows)
    if injection:
        print(f"\n## Injection (ms, start → first text-delta; load {load()})\n")
        print_injection(injection)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main()
