"""The session lease stores on their own: owners (as processes, or hosts,
would be) on one real store. One suite runs on both stores, SQLite
(``SessionLeases``, a file) and PostgreSQL (``PostgresLeases``, a fresh
database from ``postgres_helpers``); what only PostgreSQL has is in
``TestPostgresOnly`` below."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from postgres_helpers import refuse_connections

from audiocore_server.storage.claims import SessionClaims
from audiocore_server.storage.leases import Leases, SessionLeases
from audiocore_server.storage.pg_leases import PostgresLeases, asyncpg_dsn

SESSION = "s" * 32

NewOwner = Callable[..., Leases]


@pytest.fixture(params=["sqlite", "postgres"])
def new_owner(request: pytest.FixtureRequest, tmp_path: Path) -> NewOwner:
    """Makes one more owner of the same store (keyword arguments: the
    store's timings)."""
    if request.param == "sqlite":
        return lambda **timings: SessionLeases(tmp_path / "leases.db", **timings)
    url = request.getfixturevalue("postgres_url")
    return lambda **timings: PostgresLeases(url, **timings)


def test_a_wanted_lease_is_reported_to_its_owner_and_taken_after_release(
    new_owner: NewOwner,
) -> None:
    async def scenario() -> None:
        a, b = new_owner(), new_owner()
        await a.heartbeat()
        await b.heartbeat()
        assert await a.acquire(SESSION, 1.0)
        assert await a.heartbeat() == []
        assert not await b.acquire(SESSION, 0.2)  # a is alive: b may only ask
        assert await a.heartbeat() == [SESSION]
        waiting = asyncio.create_task(b.acquire(SESSION, 30.0))
        await asyncio.sleep(0.1)
        assert not waiting.done()  # a still holds it
        await a.release(SESSION)
        assert await waiting
        assert SESSION in b.held and SESSION not in a.held
        assert await a.heartbeat() == []
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_a_lease_within_one_owner_waits_for_the_holder(new_owner: NewOwner) -> None:
    async def scenario() -> None:
        a = new_owner()
        await a.heartbeat()
        assert await a.acquire(SESSION, 1.0)
        assert not await a.acquire(SESSION, 0.1)  # another connection here holds it
        await a.release(SESSION)
        assert await a.acquire(SESSION, 0.1)
        await a.close()

    asyncio.run(scenario())


def test_waiting_for_a_holder_here_lets_the_event_loop_run(new_owner: NewOwner) -> None:
    async def scenario() -> None:
        a = new_owner(ttl_s=600)
        await a.heartbeat()
        assert await a.acquire(SESSION, 1.0)
        # Another connection here waits for it; a wait that spun without
        # yielding would keep the release below from running until it gave up.
        waiting = asyncio.create_task(a.acquire(SESSION, 30.0))
        await asyncio.sleep(0)
        await a.release(SESSION)
        assert await waiting
        await a.close()

    asyncio.run(scenario())


def test_an_owner_that_stops_beating_loses_its_leases_after_the_ttl(
    new_owner: NewOwner,
) -> None:
    ttl_s = 0.5

    async def scenario() -> float:
        crashed, other = new_owner(ttl_s=ttl_s), new_owner(ttl_s=ttl_s)
        started = time.monotonic()  # crashed's last beat is after this
        await crashed.heartbeat()
        await other.heartbeat()
        assert await crashed.acquire(SESSION, 1.0)
        assert await other.live_owners() == {crashed.owner, other.owner}
        # crashed never beats again: its lease is free once the ttl is past.
        assert await other.acquire(SESSION, 30.0)
        waited = time.monotonic() - started
        await other.heartbeat()
        assert await other.live_owners() == {other.owner}
        await crashed.close()
        await other.close()
        return waited

    # Never before the ttl (less a little for the store's clock's grain);
    # how long after depends on the machine's load, so it is not bounded.
    assert asyncio.run(scenario()) > ttl_s - 0.1


def test_concurrent_takers_of_a_free_lease_get_it_once(new_owner: NewOwner) -> None:
    async def scenario() -> None:
        owners = [new_owner() for _ in range(4)]
        for owner in owners:
            await owner.heartbeat()
        taken = await asyncio.gather(*(o.acquire(SESSION, 0.0) for o in owners))
        assert sorted(taken) == [False, False, False, True]
        for owner in owners:
            await owner.close()

    asyncio.run(scenario())


def test_a_stray_row_of_a_live_owner_is_freed_when_wanted(new_owner: NewOwner) -> None:
    async def scenario() -> None:
        a, b = new_owner(), new_owner()
        await a.heartbeat()
        await b.heartbeat()
        assert await a.acquire(SESSION, 1.0)
        a.held.clear()  # as if its release had failed
        assert not await b.acquire(SESSION, 0.1)
        assert await a.heartbeat() == []  # not running it: the row is deleted
        assert await b.acquire(SESSION, 0.1)
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_a_late_heartbeat_reports_the_leases_another_owner_took(new_owner: NewOwner) -> None:
    async def scenario() -> None:
        late, other = new_owner(ttl_s=0.3), new_owner(ttl_s=600)
        await late.heartbeat()
        await other.heartbeat()
        assert await late.acquire(SESSION, 1.0)
        # late does not beat (a stalled process): its lease expires and is taken.
        assert await other.acquire(SESSION, 30.0)
        assert await late.heartbeat() == [SESSION]  # its run here must stop
        await late.release(SESSION)  # and letting go leaves the new owner's row
        assert await other.heartbeat() == []
        assert not await late.acquire(SESSION, 0.0)
        await late.close()
        await other.close()

    asyncio.run(scenario())


class TestPostgresOnly:
    """What PostgreSQL's store has and SQLite's has not: notifications
    between hosts, a server that can go away, and URLs."""

    def test_asking_for_a_lease_wakes_its_owner_and_a_release_wakes_the_asker(
        self, postgres_url: str
    ) -> None:
        # Heartbeat and poll far longer than the test's bound: only the
        # notifications can make the hand-over happen within it.
        slow: dict[str, Any] = {"heartbeat_s": 60.0, "poll_s": 60.0, "ttl_s": 120.0}

        async def scenario() -> None:
            a, b = PostgresLeases(postgres_url, **slow), PostgresLeases(postgres_url, **slow)
            await a.heartbeat()
            await b.heartbeat()
            assert await a.acquire(SESSION, 1.0)
            woken = asyncio.create_task(a.next_beat())
            taking = asyncio.create_task(b.acquire(SESSION, 120.0))
            await asyncio.wait_for(woken, 10)
            assert await a.heartbeat() == [SESSION]
            await a.release(SESSION)
            assert await asyncio.wait_for(taking, 10)
            await a.close()
            await b.close()

        asyncio.run(scenario())

    def test_a_process_whose_heartbeat_fails_for_the_ttl_stops_its_runs(
        self, postgres_url: str
    ) -> None:
        async def scenario() -> None:
            claims = SessionClaims(PostgresLeases(postgres_url, ttl_s=0.5))
            await claims.start()
            stopped = asyncio.Event()
            async with claims.claim(SESSION, stopped.set):
                await refuse_connections(postgres_url)
                # Another host may have its lease by now: the run here must end.
                await asyncio.wait_for(stopped.wait(), 30)
            await claims.close()  # the database is gone: logged, not raised

        asyncio.run(scenario())

    def test_an_unreachable_database_fails_the_call_with_a_clear_error(self) -> None:
        async def scenario() -> None:
            leases = PostgresLeases("postgresql+asyncpg://u:secret-pw@127.0.0.1:1/none")
            with pytest.raises(OSError) as failed:
                await leases.acquire(SESSION, 1.0)
            assert "secret-pw" not in str(failed.value)
            assert SESSION not in leases.held
            await leases.close()

        asyncio.run(scenario())

    def test_only_postgresql_urls_are_taken(self) -> None:
        assert asyncpg_dsn("postgresql+asyncpg://u:p@h:5/d") == "postgresql://u:p@h:5/d"
        with pytest.raises(ValueError, match="expected a postgresql:// database URL, got scheme"):
            asyncpg_dsn("sqlite+aiosqlite:///x.db")
