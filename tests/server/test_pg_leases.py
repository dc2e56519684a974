"""The PostgreSQL lease store on its own: owners (as processes on different
hosts would be) on one real database. Skipped without a PostgreSQL server
(``postgres_helpers``)."""

from __future__ import annotations

import asyncio

import pytest
from postgres_helpers import postgres_url, refuse_connections  # noqa: F401 (a fixture)

from server.claims import SessionClaims
from server.pg_leases import PostgresLeases, asyncpg_dsn

SESSION = "s" * 32


def test_a_wanted_lease_is_reported_to_its_owner_and_taken_after_release(
    postgres_url: str,  # noqa: F811
) -> None:
    async def scenario() -> None:
        a, b = PostgresLeases(postgres_url), PostgresLeases(postgres_url)
        await a.heartbeat()
        await b.heartbeat()
        assert await a.acquire(SESSION, 1.0)
        assert await a.heartbeat() == []
        assert not await b.acquire(SESSION, 0.2)  # a is alive: b may only ask
        assert await a.heartbeat() == [SESSION]
        waiting = asyncio.create_task(b.acquire(SESSION, 30.0))
        await a.release(SESSION)
        assert await waiting
        assert SESSION in b.held and SESSION not in a.held
        assert await a.heartbeat() == []
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_asking_for_a_lease_wakes_its_owner_and_a_release_wakes_the_asker(
    postgres_url: str,  # noqa: F811
) -> None:
    # Heartbeat and poll far longer than the test's bound: only the
    # notifications can make the hand-over happen within it.
    slow = {"heartbeat_s": 60.0, "poll_s": 60.0, "ttl_s": 120.0}

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


def test_a_lease_within_one_owner_waits_for_the_holder(postgres_url: str) -> None:  # noqa: F811
    async def scenario() -> None:
        a = PostgresLeases(postgres_url)
        await a.heartbeat()
        assert await a.acquire(SESSION, 1.0)
        assert not await a.acquire(SESSION, 0.1)  # another connection here holds it
        await a.release(SESSION)
        assert await a.acquire(SESSION, 0.1)
        await a.close()

    asyncio.run(scenario())


def test_waiting_for_a_holder_here_lets_the_event_loop_run(postgres_url: str) -> None:  # noqa: F811
    async def scenario() -> None:
        a = PostgresLeases(postgres_url, ttl_s=600)
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
    postgres_url: str,  # noqa: F811
) -> None:
    async def scenario() -> None:
        crashed = PostgresLeases(postgres_url, ttl_s=0.5)
        other = PostgresLeases(postgres_url, ttl_s=0.5)
        await crashed.heartbeat()
        await other.heartbeat()
        assert await crashed.acquire(SESSION, 1.0)
        assert await other.live_owners() == {crashed.owner, other.owner}
        # crashed never beats again: its lease is free once the ttl is past.
        assert await other.acquire(SESSION, 30.0)
        await other.heartbeat()
        assert await other.live_owners() == {other.owner}
        await crashed.close()
        await other.close()

    asyncio.run(scenario())


def test_concurrent_takers_of_a_free_lease_get_it_once(postgres_url: str) -> None:  # noqa: F811
    async def scenario() -> None:
        owners = [PostgresLeases(postgres_url) for _ in range(4)]
        for owner in owners:
            await owner.heartbeat()
        taken = await asyncio.gather(*(o.acquire(SESSION, 0.0) for o in owners))
        assert sorted(taken) == [False, False, False, True]
        for owner in owners:
            await owner.close()

    asyncio.run(scenario())


def test_a_stray_row_of_a_live_owner_is_freed_when_wanted(postgres_url: str) -> None:  # noqa: F811
    async def scenario() -> None:
        a, b = PostgresLeases(postgres_url), PostgresLeases(postgres_url)
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


def test_a_process_whose_heartbeat_fails_for_the_ttl_stops_its_runs(
    postgres_url: str,  # noqa: F811
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


def test_an_unreachable_database_fails_the_call_with_a_clear_error() -> None:
    async def scenario() -> None:
        leases = PostgresLeases("postgresql+asyncpg://u:secret-pw@127.0.0.1:1/none")
        with pytest.raises(OSError) as failed:
            await leases.acquire(SESSION, 1.0)
        assert "secret-pw" not in str(failed.value)
        assert SESSION not in leases.held
        await leases.close()

    asyncio.run(scenario())


def test_only_postgresql_urls_are_taken() -> None:
    assert asyncpg_dsn("postgresql+asyncpg://u:p@h:5/d") == "postgresql://u:p@h:5/d"
    with pytest.raises(ValueError, match="expected a postgresql:// database URL, got scheme"):
        asyncpg_dsn("sqlite+aiosqlite:///x.db")


def test_a_late_heartbeat_reports_the_leases_another_owner_took(
    postgres_url: str,  # noqa: F811
) -> None:
    async def scenario() -> None:
        late, other = (
            PostgresLeases(postgres_url, ttl_s=0.3),
            PostgresLeases(postgres_url, ttl_s=600),
        )
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
