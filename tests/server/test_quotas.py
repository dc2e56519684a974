"""Quotas per token owner across processes (audiocore_server/gate/quotas.py): the stores
on their own, two owners of one store standing for two processes (a SQLite
file; a PostgreSQL database from ``postgres_helpers``), then two apps on
one data directory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from audiocore_server import Settings, create_app
from audiocore_server.gate.quotas import OwnerQuotas, PostgresQuotas, QuotaExceeded, SqliteQuotas
from tests.server.server_helpers import start

KEY = "test-api-key-0123456789"
NewStore = Callable[..., OwnerQuotas]


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0  # 2027-01-15 08:00 UTC

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sqlite", "postgres"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> NewStore:
    """Makes one more process's store (arguments: the quotas, timings)."""
    if request.param == "sqlite":
        return lambda *a, **k: SqliteQuotas(tmp_path / "quotas.db", *a, **k)
    url = request.getfixturevalue("postgres_url")
    return lambda *a, **k: PostgresQuotas(url, *a, **k)


def test_live_sessions_are_counted_across_processes(new_store: NewStore) -> None:
    async def scenario() -> None:
        a, b = new_store(2, None), new_store(2, None)
        try:
            first = await a.admit("alice")
            await b.admit("alice")
            for store in (a, b):
                with pytest.raises(QuotaExceeded) as over:
                    await store.admit("alice")
                assert over.value.reason == "sessions"
            await b.admit("bob")  # another owner counts apart
            await a.release(first)
            await b.admit("alice")
        finally:
            await a.close()
            await b.close()

    asyncio.run(scenario())


def test_a_crashed_processs_sockets_stop_counting(new_store: NewStore) -> None:
    async def scenario() -> None:
        clock = Clock()
        crashed = new_store(1, None, ttl_s=0.0, clock=clock)  # its rows expire at once
        other = new_store(1, None, clock=clock)
        try:
            await crashed.admit("alice")  # and never beats nor releases
            clock.now += 1
            await other.admit("alice")
        finally:
            await crashed.close()
            await other.close()

    asyncio.run(scenario())


def test_live_minutes_per_day_across_processes(new_store: NewStore) -> None:
    async def scenario() -> None:
        clock = Clock()
        a = new_store(None, 1.0, clock=clock)  # 60 s a day
        b = new_store(None, 1.0, clock=clock)
        try:
            first = await a.admit("alice")
            assert first.seconds_left == 60
            clock.now += 45
            await a.beat()  # 45 s counted while it runs
            second = await b.admit("alice")
            assert second.seconds_left == pytest.approx(15)
            clock.now += 20
            await a.release(first)
            await b.release(second)  # 65 + 20 s used
            with pytest.raises(QuotaExceeded) as over:
                await b.admit("alice")
            assert over.value.reason == "minutes"
            assert (await a.admit("bob")).seconds_left == 60
            clock.now += 24 * 3600  # a new UTC day
            assert (await b.admit("alice")).seconds_left == 60
        finally:
            await a.close()
            await b.close()

    asyncio.run(scenario())


def mint(client: TestClient, owner: str = "alice") -> str:
    response = client.post("/tokens", json={"owner": owner}, headers={"x-api-key": KEY})
    assert response.status_code == 200, response.text
    token: str = response.json()["token"]
    return token


def refused_code(client: TestClient, token: str) -> int | None:
    try:
        with client.websocket_connect(f"/ws?token={token}") as ws:
            start(ws)
            return None
    except WebSocketDisconnect as exc:
        return exc.code


def test_two_apps_on_one_data_directory_share_the_owners_quota(settings: Settings) -> None:
    keyed = replace(settings, api_key=KEY, max_live_sessions_per_owner=1)
    with TestClient(create_app(keyed)) as one, TestClient(create_app(keyed)) as two:
        with one.websocket_connect(f"/ws?token={mint(one)}") as ws:
            start(ws)
            assert refused_code(two, mint(two)) == 1013  # the other process counts it
            assert refused_code(two, mint(two, "bob")) is None
            with two.websocket_connect("/ws", headers={"x-api-key": KEY}) as keyed_ws:
                start(keyed_ws)  # the key holder is nobody's quota
        assert refused_code(two, mint(two)) is None  # released
        metrics = two.get("/metrics", headers={"x-api-key": KEY}).text
        assert 'audiocore_requests_refused_total{reason="over_quota"} 1.0' in metrics


def test_the_days_minutes_bound_a_socket_and_then_refuse(settings: Settings) -> None:
    keyed = replace(settings, api_key=KEY, live_minutes_per_owner_per_day=0.001)  # 60 ms
    with TestClient(create_app(keyed)) as client:
        token = mint(client)
        with client.websocket_connect(f"/ws?token={token}") as ws:
            start(ws)
            with pytest.raises(WebSocketDisconnect) as ended:
                while True:
                    ws.receive_text()
        assert ended.value.code == 1008 and ended.value.reason == "live time limit reached"
        assert refused_code(client, token) == 1013


def test_quota_settings(tmp_path: Path) -> None:
    fine = Settings(data_dir=tmp_path)
    assert replace(fine, max_live_sessions_per_owner=0).problems() == [
        "max_live_sessions_per_owner: expected more than 0, got 0"
    ]
    assert replace(fine, live_minutes_per_owner_per_day=0.0).problems() == [
        "live_minutes_per_owner_per_day: expected more than 0, got 0.0"
    ]
    env = {
        "AUDIOCORE_MAX_LIVE_SESSIONS_PER_OWNER": "3",
        "AUDIOCORE_LIVE_MINUTES_PER_OWNER_PER_DAY": "90",
    }
    read = Settings.from_env(env)
    assert (read.max_live_sessions_per_owner, read.live_minutes_per_owner_per_day) == (3, 90.0)
