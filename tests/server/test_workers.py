"""Several server processes on one data directory: real processes, real sockets.

Two ``python -m server`` processes on different ports sharing a data
directory are what ``--workers 2`` is, with the choice of process made
explicit: a session opened on one and resumed on the other must move through
the cross-process lease (audiocore_server/storage/leases.py).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from server_helpers import assert_clean, open_ws, say, server_process, take_over


def test_takeover_between_two_processes(tmp_path: Path) -> None:
    logs = tmp_path / "a.log", tmp_path / "b.log"
    with (
        server_process(tmp_path, logs[0]) as (a, _),
        server_process(tmp_path, logs[1]) as (b, _),
    ):
        asyncio.run(take_over(a, b))
        asyncio.run(take_over(b, a))  # and back: leases are released and retaken
    assert_clean(*logs)


def test_a_crashed_owner_blocks_its_session_only_until_the_lease_expires(
    tmp_path: Path,
) -> None:
    from audiocore_server.storage.leases import SessionLeases

    ttl = SessionLeases(tmp_path / "unused.db").ttl_s
    logs = tmp_path / "a.log", tmp_path / "b.log"

    async def scenario(a: str, b: str, crashed: subprocess.Popen) -> float:
        old, session = await open_ws(a)
        session_id = session["data"]["sessionId"]
        await say(old, "before the crash", 1)
        crashed.send_signal(signal.SIGKILL)  # holding the lease, socket open
        crashed.wait()
        killed = time.monotonic()
        new, resumed = await open_ws(b, sessionId=session_id)
        waited = time.monotonic() - killed
        assert resumed["data"]["resumed"] and resumed["data"]["sessionId"] == session_id
        assert {"role": "user", "text": "before the crash"} in resumed["data"]["history"]
        assert (await say(new, "after", 1)).startswith("You said: after (")
        await new.close()
        return waited

    with (
        server_process(tmp_path, logs[0]) as (a, proc_a),
        server_process(tmp_path, logs[1]) as (b, _),
    ):
        waited = asyncio.run(scenario(a, b, proc_a))
    assert waited <= ttl + 1.0, waited
    assert_clean(logs[1])


def test_workers_2_serve_the_page_and_a_round_trip(tmp_path: Path) -> None:
    log = tmp_path / "audiocore_server.log"

    async def scenario(base: str) -> None:
        collector, session = await open_ws(base)
        assert not session["data"]["resumed"]
        assert (await say(collector, "hello", 1)).startswith("You said: hello")
        await collector.close()
        # Whichever workers the kernel hands the sockets to, a takeover holds.
        await take_over(base, base)

    with server_process(tmp_path, log, "--workers", "2") as (base, _):
        page = urllib.request.urlopen(f"{base}/", timeout=2)
        assert page.status == 200 and b"<html" in page.read().lower()
        health = json.loads(urllib.request.urlopen(f"{base}/healthz", timeout=2).read())
        assert health["status"] == "ok" and health["model"] == "offline"
        asyncio.run(scenario(base))
    assert_clean(log)
    assert "Started parent process" in log.read_text()
