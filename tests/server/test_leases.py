"""The session lease on its own: two owners (as two processes would be) on one
real SQLite file."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from server.leases import SessionLeases

SESSION = "s" * 32


def test_a_wanted_lease_is_reported_to_its_owner_and_taken_after_release(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        a, b = SessionLeases(tmp_path / "l.db"), SessionLeases(tmp_path / "l.db")
        await a.heartbeat()
        await b.heartbeat()
        assert await a.acquire(SESSION, 1.0)
        assert await a.heartbeat() == []
        assert not await b.acquire(SESSION, 0.2)  # a is alive: b may only ask
        assert await a.heartbeat() == [SESSION]
        waiting = asyncio.create_task(b.acquire(SESSION, 2.0))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        await a.release(SESSION)
        assert await waiting
        assert SESSION in b.held and SESSION not in a.held
        assert await a.heartbeat() == []
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_a_lease_within_one_owner_waits_for_the_holder(tmp_path: Path) -> None:
    async def scenario() -> None:
        a = SessionLeases(tmp_path / "l.db")
        await a.heartbeat()
        assert await a.acquire(SESSION, 1.0)
        assert not await a.acquire(SESSION, 0.1)  # another connection here holds it
        await a.release(SESSION)
        assert await a.acquire(SESSION, 0.1)
        await a.close()

    asyncio.run(scenario())


def test_an_owner_that_stops_beating_loses_its_leases_after_the_ttl(tmp_path: Path) -> None:
    async def scenario() -> float:
        crashed = SessionLeases(tmp_path / "l.db", ttl_s=0.5)
        other = SessionLeases(tmp_path / "l.db", ttl_s=0.5)
        await crashed.heartbeat()
        await other.heartbeat()
        assert await crashed.acquire(SESSION, 1.0)
        started = time.monotonic()  # crashed never beats again
        assert await other.acquire(SESSION, 3.0)
        waited = time.monotonic() - started
        await crashed.close()
        await other.close()
        return waited

    waited = asyncio.run(scenario())
    assert 0.3 < waited < 1.0, waited


def test_a_stray_row_of_a_live_owner_is_freed_when_wanted(tmp_path: Path) -> None:
    async def scenario() -> None:
        a, b = SessionLeases(tmp_path / "l.db"), SessionLeases(tmp_path / "l.db")
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


def test_a_late_heartbeat_reports_the_leases_another_owner_took(tmp_path: Path) -> None:
    async def scenario() -> None:
        late, other = (
            SessionLeases(tmp_path / "l.db", ttl_s=0.3),
            SessionLeases(tmp_path / "l.db", ttl_s=600),
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
