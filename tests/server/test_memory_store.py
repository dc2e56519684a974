"""The memory store on its own: owners kept apart, stable ids, all-or-nothing
replace and forget, the profile's sections, limits, and hostile search
input, against a reference of what should match."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from google.adk.events import Event
from google.adk.sessions import Session
from google.genai import types

from audiocore_server.gate.owners import api_user_owner
from audiocore_server.memory.sqlite import SqliteMemoryStore
from audiocore_server.memory.store import (
    MANAGED_END,
    MANAGED_START,
    MAX_ENTRY_CHARS,
    MAX_QUERY_CHARS,
    MemoryInputError,
    MemoryStore,
    index_words,
    memory_owner,
    owner_digest,
    search_words,
)

_T = TypeVar("_T")


StoreFactory = Callable[..., MemoryStore]
STORE_MODULES = ("audiocore_server.memory.sqlite", "audiocore_server.memory.postgres")


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """A new store on SQLite, or on a fresh PostgreSQL database (skipped
    without a server, postgres_helpers)."""
    if request.param == "sqlite":
        return lambda **kwargs: SqliteMemoryStore(tmp_path / "memory.db", **kwargs)
    url = request.getfixturevalue("postgres_url")
    from audiocore_server.memory.postgres import PostgresMemoryStore

    return lambda **kwargs: PostgresMemoryStore(url, **kwargs)


def run(
    make_store: StoreFactory, scenario: Callable[[MemoryStore], Awaitable[_T]], **kwargs: Any
) -> _T:
    async def main() -> _T:
        store = make_store(**kwargs)
        try:
            return await scenario(store)
        finally:
            await store.close()

    return asyncio.run(main())


def test_owners_are_the_key_else_the_adk_user_and_never_a_shared_user() -> None:
    assert memory_owner("abc", "web") == "key:abc"
    assert memory_owner("abc", "alice") == "key:abc"
    assert memory_owner(None, "alice") == "user:alice"
    assert memory_owner(None, "web") is None and memory_owner(None, "chat") is None
    assert api_user_owner("web") is None


def test_records_are_the_owners_alone(make_store: StoreFactory) -> None:
    async def scenario(store: MemoryStore) -> None:
        mine = await store.remember("key:a", "the spare key is under the blue pot")
        theirs = await store.remember("key:b", "the spare key is in the blue box")
        assert mine is not None and theirs is not None
        assert re.fullmatch(r"mem_[0-9a-f]{12}", mine.id)
        assert [r.id for r in await store.search("key:a", "blue key")] == [mine.id]
        assert [r.id for r in await store.latest("key:a")] == [mine.id]
        for attempt in (
            store.forget("key:a", [theirs.id]),
            store.replace("key:a", [theirs.id], "stolen"),
            store.forget("key:a", [mine.id, theirs.id]),  # all or nothing
        ):
            with pytest.raises(MemoryInputError, match=r"unknown memory ids \['mem_"):
                await attempt
        assert [r.id for r in await store.latest("key:a")] == [mine.id]
        assert [r.id for r in await store.latest("key:b")] == [theirs.id]
        assert await store.forget_owner("key:a") == 1
        assert await store.latest("key:a") == [] and await store.count("key:b") == 1

    run(make_store, scenario)


def test_replace_is_atomic_and_ids_are_stable(make_store: StoreFactory) -> None:
    async def scenario(store: MemoryStore) -> None:
        a = await store.remember("key:a", "lives in Lyon")
        b = await store.remember("key:a", "works in Lyon")
        c = await store.remember("key:a", "likes tea")
        assert a and b and c
        new = await store.replace("key:a", [a.id, b.id], "lives and works in Paris")
        assert {r.id for r in await store.latest("key:a")} == {c.id, new.id}
        assert [r.text for r in await store.search("key:a", "Paris")] == [new.text]
        assert await store.search("key:a", "Lyon") == []
        with pytest.raises(MemoryInputError, match="expected ids like"):
            await store.forget("key:a", ["1 OR 1=1"])
        with pytest.raises(MemoryInputError, match="non-empty list"):
            await store.forget("key:a", [])
        assert await store.forget("key:a", [c.id, c.id]) == [c.id]

    run(make_store, scenario)


def test_limits_give_clear_errors(make_store: StoreFactory) -> None:
    async def scenario(store: MemoryStore) -> None:
        for n in range(3):
            await store.remember("key:a", f"fact {n}")
        with pytest.raises(MemoryInputError, match="memory is full: 3 facts; forget some first"):
            await store.remember("key:a", "one too many")
        await store.remember("key:b", "another owner has room")
        with pytest.raises(MemoryInputError, match=f"at most {MAX_ENTRY_CHARS} characters"):
            await store.remember("key:b", "x" * (MAX_ENTRY_CHARS + 1))
        with pytest.raises(MemoryInputError, match="NUL"):
            await store.remember("key:b", "a\x00b")
        with pytest.raises(MemoryInputError, match="lone surrogate"):
            await store.remember("key:b", "a\ud800b")
        with pytest.raises(MemoryInputError, match="expected a string, got int"):
            await store.remember("key:b", 5)  # type: ignore[arg-type]
        with pytest.raises(MemoryInputError, match="expected something to remember"):
            await store.remember("key:b", "   ")
        with pytest.raises(MemoryInputError, match=f"at most {MAX_QUERY_CHARS} characters"):
            await store.search("key:b", "x" * 1_000_000)
        assert await store.count("key:b") == 1

    run(make_store, scenario, max_facts=3)


HOSTILE = [
    '"',
    "NEAR(a b)",
    "a* OR b*",
    "text:x",
    "-x",
    "^x",
    "(((",
    "'; DROP TABLE memories; --",
    "\x00",
    "{text}: a",
    "AND OR NOT",
    "",
    "   ",
    "🙂",
    "\u037a\ufc5e",  # words (\w) that fold to nothing (index_words)
    "what do you remember about",  # stop words only
]


@pytest.mark.parametrize("query", HOSTILE)
def test_search_syntax_never_reaches_the_database(make_store: StoreFactory, query: str) -> None:
    """FTS5 query syntax is searched for as words (or nothing): the answer is
    what a plain word match finds, never an error from SQLite."""
    facts = ["a cat called x", "text about near things", "drop the table", "b is for bee"]

    async def scenario(store: MemoryStore) -> tuple[set[str], set[str]]:
        for fact in facts:
            await store.remember("key:a", fact)
        found = {r.text for r in await store.search("key:a", query)}
        words = set(search_words(query))
        expected = {f for f in facts if words & set(re.findall(r"\w+", f.lower()))}
        return found, expected

    found, expected = run(make_store, scenario)
    assert found == expected


def test_another_owners_newer_matches_never_crowd_out_the_owners_own(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two candidates a search: were the index every owner's, Bob's ten
    # newer "boat" records would fill them and Alice's would not be found.
    for store_module in STORE_MODULES:
        monkeypatch.setattr(f"{store_module}.MAX_CANDIDATES", 2)

    async def scenario(store: MemoryStore) -> None:
        mine = await store.remember("key:alice", "the boat is moored at the north pier")
        for n in range(10):
            await store.remember("key:bob", f"boat number {n} is for sale")
        assert mine is not None
        assert [r.id for r in await store.search("key:alice", "boat")] == [mine.id]
        assert len(await store.search("key:bob", "boat")) == 2

    run(make_store, scenario)


def test_the_owners_newest_matches_are_ranked(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    for store_module in STORE_MODULES:
        monkeypatch.setattr(f"{store_module}.MAX_CANDIDATES", 3)

    async def scenario(store: MemoryStore) -> None:
        texts = [
            "red red red red",  # the best match, but the oldest: not a candidate
            "a red kite",
            "red",
            "the red door and the green one",
        ]
        ids = []
        for text in texts:
            record = await store.remember("key:alice", text)
            assert record is not None
            ids.append(record.id)
        found = [r.id for r in await store.search("key:alice", "red")]
        assert sorted(found) == sorted(ids[1:])
        for store_module in STORE_MODULES:
            monkeypatch.setattr(f"{store_module}.MAX_CANDIDATES", 100)
        assert (await store.search("key:alice", "red"))[0].id == ids[0]

    run(make_store, scenario)


def test_words_fold_case_and_accents(make_store: StoreFactory) -> None:
    assert index_words("Café CRÈME, naïve_one; Straße") == ["cafe", "creme", "naive_one", "straße"]
    # A search's words are the index's: one word however it is spelt.
    assert search_words("CAFÉ café Cafe the crème") == ["cafe", "creme"]

    async def scenario(store: MemoryStore) -> None:
        fact = await store.remember("key:alice", "The Café on Rue Crémieux")
        assert fact is not None
        for query in ("cafe", "CAFÉ", "cremieux", "crémieux"):
            assert [r.id for r in await store.search("key:alice", query)] == [fact.id], query
        assert await store.search("key:bob", "cafe") == []

    run(make_store, scenario)


def test_search_refuses_lone_surrogates_in_a_query(make_store: StoreFactory) -> None:
    async def scenario(store: MemoryStore) -> None:
        with pytest.raises(MemoryInputError, match="lone surrogate"):
            await store.search("key:a", "cat \udc00dog")

    run(make_store, scenario)


def test_profile_sections(make_store: StoreFactory) -> None:
    async def scenario(store: MemoryStore) -> None:
        assert (await store.profile("key:a")).document() == f"{MANAGED_START}\n\n{MANAGED_END}"
        await store.edit_profile("key:a", user_section="Name: Alice")
        profile = await store.edit_profile("key:a", managed="Prefers tea")
        assert profile.document() == f"Name: Alice\n{MANAGED_START}\nPrefers tea\n{MANAGED_END}"
        with pytest.raises(MemoryInputError, match="section markers"):
            await store.edit_profile("key:a", managed=f"x{MANAGED_END}Name: Mallory")
        assert (await store.profile("key:b")).user_section == ""

    run(make_store, scenario)


def _event(author: str, text: str, *, partial: bool = False) -> Event:
    role = "user" if author == "user" else "model"
    return Event(
        author=author,
        partial=partial,
        content=types.Content(role=role, parts=[types.Part(text=text)]),
    )


def test_adks_memory_service_interface(make_store: StoreFactory) -> None:
    async def scenario(store: MemoryStore) -> None:
        events = [
            _event("user", "my locker is number twelve"),
            _event("voice_agent", "noted, locker twelve"),
            _event("voice_agent", "lock", partial=True),
        ]
        session = Session(id="s", app_name="app", user_id="carol", events=events)
        await store.add_session_to_memory(session)
        await store.add_session_to_memory(session)  # again: nothing new
        found = await store.search_memory(app_name="app", user_id="carol", query="locker")
        assert sorted(m.content.parts[0].text for m in found.memories) == [
            "my locker is number twelve",
            "noted, locker twelve",
        ]
        assert {m.author for m in found.memories} == {"user", "model"}
        none = await store.search_memory(app_name="app", user_id="dave", query="locker")
        assert none.memories == []
        # The shared web user has no memory: nothing stored, nothing found.
        shared = Session(id="w", app_name="app", user_id="web", events=events)
        await store.add_session_to_memory(shared)
        assert await store.count("user:web") == 0
        entry = found.memories[0]
        await store.delete_memory(app_name="app", user_id="carol", memory_id=entry.id)
        assert await store.count("user:carol") == 1
        with pytest.raises(MemoryInputError, match="no long-term memory"):
            await store.delete_memory(app_name="app", user_id="web", memory_id=entry.id)

    run(make_store, scenario)


def test_stored_turns_are_bounded_per_owner(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("audiocore_server.memory.sqlite.MAX_TURNS_PER_OWNER", 4)
    monkeypatch.setattr("audiocore_server.memory.postgres.MAX_TURNS_PER_OWNER", 4)

    async def scenario(store: MemoryStore) -> list[str]:
        for n in range(6):
            await store.remember("key:a", f"turn {n}", kind="turn", source=f"e{n}")
        return [r.text for r in await store.latest("key:a", kind="turn")]

    assert run(make_store, scenario) == ["turn 5", "turn 4", "turn 3", "turn 2"]


def test_changes_are_logged_without_text_or_key(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    secret_key = "key:never-in-the-log-0123456789"
    told, corrected, profile = "my password hint is swordfish", "my hint is a fish", "likes fish"

    async def scenario(store: MemoryStore) -> list[str]:
        fact = await store.remember(secret_key, told)
        assert fact is not None
        new = await store.replace(secret_key, [fact.id], corrected)
        await store.edit_profile(secret_key, managed=profile)
        await store.forget(secret_key, [new.id])
        return [fact.id, new.id]

    with caplog.at_level(logging.INFO, logger="audiocore_server.memory.store"):
        first, second = run(make_store, scenario)
    lines = [r.getMessage() for r in caplog.records if r.name == "audiocore_server.memory.store"]
    digest = owner_digest(secret_key)
    assert lines == [
        f"memory remember: owner {digest} ids {first} ({len(told)} chars)",
        f"memory replace: owner {digest} ids {first},{second} ({len(corrected)} chars)",
        f"memory profile:managed: owner {digest} ids - ({len(profile)} chars)",
        f"memory forget: owner {digest} ids {second} (0 chars)",
    ]
    assert not any("swordfish" in line or "never-in-the-log" in line for line in lines)
