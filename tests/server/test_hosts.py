"""Several hosts on one PostgreSQL: real processes, real sockets, a real
database.

Two ``python -m server`` processes with data directories of their own share
nothing but the database (a fresh one per test, ``postgres_helpers``): the
sessions and their leases are there, so a client may move between the hosts
as between the processes of ``--workers``. Skipped without a PostgreSQL
server; CI always has one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import websockets
from postgres_helpers import postgres_url, refuse_connections  # noqa: F401 (a fixture)
from server_helpers import (
    Collector,
    assert_clean,
    open_ws,
    say,
    server_process,
    take_over,
)

from audiocore_server.storage.pg_leases import asyncpg_dsn

Hosts = tuple[str, subprocess.Popen, str, subprocess.Popen]


@contextlib.contextmanager
def two_hosts(tmp_path: Path, url: str) -> Iterator[Hosts]:
    """Host a and host b on ``url``; after them, neither left a session or
    lease file on its disk, nor the database password in its log."""
    env = {"AUDIOCORE_DATABASE_URL": url}
    dirs, logs = (tmp_path / "a", tmp_path / "b"), (tmp_path / "a.log", tmp_path / "b.log")
    with (
        server_process(dirs[0], logs[0], env=env) as (a, proc_a),
        server_process(dirs[1], logs[1], env=env) as (b, proc_b),
    ):
        yield a, proc_a, b, proc_b
    password = urlsplit(url).password
    for data_dir, log in zip(dirs, logs, strict=True):
        assert not list(data_dir.glob("*.db")), list(data_dir.iterdir())
        assert password and password not in log.read_text()


def _logs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "a.log", tmp_path / "b.log"


async def _start(base: str, **start: object) -> Collector:
    """A socket that has asked for a session, whatever the answer."""
    ws = await websockets.connect(base.replace("http://", "ws://") + "/ws", max_size=None)
    await ws.send(json.dumps({"type": "start", **start}))
    return Collector(ws)


def _connections(base: str) -> int:
    return int(
        json.loads(urllib.request.urlopen(f"{base}/healthz", timeout=5).read())["connections"]
    )


async def _until(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Wait (bounded) until ``condition()`` holds: e.g. until a closed
    socket has been counted out on the server."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"not {what} within {timeout} s"
        await asyncio.sleep(0.05)


async def _leases_of(url: str, session_id: str) -> int:
    conn = await asyncpg.connect(asyncpg_dsn(url), timeout=5)
    try:
        count = await conn.fetchval(
            "SELECT count(*) FROM audiocore_leases WHERE session_id = $1", session_id
        )
        return int(count)
    finally:
        await conn.close()


def test_a_client_moves_between_hosts_and_takes_its_live_run_along(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    with two_hosts(tmp_path, postgres_url) as (a, _, b, _):
        asyncio.run(take_over(a, b))
        asyncio.run(take_over(b, a))  # and back: leases are released and retaken
    assert_clean(*_logs(tmp_path))


def test_a_killed_host_gives_its_sessions_up_when_its_lease_expires(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    async def scenario(a: str, b: str, killed: subprocess.Popen) -> None:
        old, session = await open_ws(a)
        session_id = session["data"]["sessionId"]
        await say(old, "before the crash", 1)
        killed.send_signal(signal.SIGKILL)  # holding the lease, socket open
        killed.wait()
        # b waits for a's lease to expire (2 s), well within its claim's wait
        # (10 s): a resume that had to wait longer would be refused as busy.
        new, resumed = await open_ws(b, sessionId=session_id)
        assert resumed["data"]["resumed"] and resumed["data"]["sessionId"] == session_id
        assert {"role": "user", "text": "before the crash"} in resumed["data"]["history"]
        assert (await say(new, "after", 1)).startswith("You said: after (")
        await new.close()

    with two_hosts(tmp_path, postgres_url) as (a, proc_a, b, _):
        asyncio.run(scenario(a, b, proc_a))
    assert_clean(_logs(tmp_path)[1])


def test_concurrent_resumes_on_two_hosts_leave_exactly_one_live_run(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    async def scenario(a: str, b: str) -> None:
        first, session = await open_ws(a)
        session_id = session["data"]["sessionId"]
        await say(first, "turn 0", 1)
        await first.close()
        for turn in range(1, 4):
            both = await asyncio.gather(
                _start(a, sessionId=session_id), _start(b, sessionId=session_id)
            )
            # One is stopped (taken over, or refused as busy); the other runs.
            done, _ = await asyncio.wait(
                [c.task for c in both], timeout=30, return_when=asyncio.FIRST_COMPLETED
            )
            assert len(done) == 1, [c.types() for c in both]
            loser, winner = both if both[0].task in done else both[::-1]
            assert loser.ws.close_code in (1008, 1013), loser.ws.close_code
            assert loser.messages[-1][1]["type"] == "error"
            resumed = await winner.wait_for("data-session")
            assert resumed["data"]["resumed"] and resumed["data"]["sessionId"] == session_id
            answer = await say(winner, f"turn {turn}", 1)
            assert answer.startswith(f"You said: turn {turn} (")
            # Exactly one live run: one socket served, on either host, and one lease.
            await _until(lambda: _connections(a) + _connections(b) == 1, "one live socket")
            assert await _leases_of(postgres_url, session_id) == 1
            await winner.close()
        # The turns of every round, once each and in order: the session never forked.
        last, session = await open_ws(b, sessionId=session_id)
        users = [h["text"] for h in session["data"]["history"] if h["role"] == "user"]
        assert users == [f"turn {turn}" for turn in range(4)], users
        await last.close()

    with two_hosts(tmp_path, postgres_url) as (a, _, b, _):
        asyncio.run(scenario(a, b))
    assert_clean(*_logs(tmp_path))


def test_a_connection_whose_lease_store_is_unreachable_gets_an_error_and_a_close(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    async def scenario(a: str) -> None:
        first, session = await open_ws(a)
        session_id = session["data"]["sessionId"]
        await first.close()
        await refuse_connections(postgres_url)
        resuming = await _start(a, sessionId=session_id)
        await asyncio.wait_for(resuming.task, 30)  # closed by the server, not left open
        assert resuming.ws.close_code == 1011
        error = resuming.messages[-1][1]
        assert error["type"] == "error" and "server log reference" in error["errorText"]

    with two_hosts(tmp_path, postgres_url) as (a, _, _, _):
        asyncio.run(scenario(a))
    # Its leases could not be deleted: they expire; the shutdown is clean.
    assert "Application shutdown complete" in _logs(tmp_path)[0].read_text()
