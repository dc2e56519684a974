"""Several server processes on one data directory: real processes, real sockets.

Two ``python -m server`` processes on different ports sharing a data
directory are what ``--workers 2`` is, with the choice of process made
explicit: a session opened on one and resumed on the other must move through
the cross-process lease (server/leases.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import websockets
from server_helpers import Collector

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server_process(data_dir: Path, log: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """``python -m server`` on a free port; yields (http base URL, process)."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
    env["AUDIOCORE_MODEL"] = "offline"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "server", "--port", str(port), "--data-dir", str(data_dir)]
            + list(args),
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=1).read()
                break
            except OSError:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.1)
        else:
            raise AssertionError(f"server did not start: {log.read_text()}")
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _ws(base: str) -> str:
    return base.replace("http://", "ws://") + "/ws"


async def _open(base: str, **start: object) -> tuple[Collector, dict]:
    ws = await websockets.connect(_ws(base), max_size=None)
    await ws.send(json.dumps({"type": "start", **start}))
    collector = Collector(ws)
    return collector, await collector.wait_for("data-session")


async def _say(collector: Collector, text: str, count: int) -> str:
    await collector.ws.send(json.dumps({"type": "text", "text": text}))
    await collector.wait_for("finish", count)
    deltas = [m["delta"] for _, m in collector.messages if m["type"] == "text-delta"]
    return deltas[-1]


def _assert_clean(*logs: Path) -> None:
    for log in logs:
        text = log.read_text()
        # ADK refuses appends to a session another run has written since
        # ("last_update_time ... earlier than the update_time in storage").
        assert "stale session" not in text and "last_update_time" not in text, text[-3000:]
        assert "Traceback" not in text, text[-3000:]


async def _take_over(old_base: str, new_base: str) -> None:
    """Open a session on ``old_base``, resume it on ``new_base`` while the first
    socket is still open; check the hand-over and the history."""
    old, session = await _open(old_base)
    session_id = session["data"]["sessionId"]
    assert (await _say(old, "one", 1)).startswith("You said: one")

    new, resumed = await _open(new_base, sessionId=session_id)
    resumed_at = time.monotonic()
    await asyncio.wait_for(old.task, 5)  # the old socket is closed by the server
    assert old.ws.close_code == 1008
    error_at, error = old.messages[-1]
    assert error == {"type": "error", "errorText": "this session was resumed by another connection"}
    # The old run was over (and its client told) before the new one read the session.
    assert error_at <= resumed_at
    assert resumed["data"]["resumed"] and resumed["data"]["sessionId"] == session_id
    assert {"role": "user", "text": "one"} in resumed["data"]["history"]
    answer = await _say(new, "two", 1)
    assert answer.startswith("You said: two (") and "earlier turns" in answer
    await new.close()


def test_takeover_between_two_processes(tmp_path: Path) -> None:
    logs = tmp_path / "a.log", tmp_path / "b.log"
    with (
        server_process(tmp_path, logs[0]) as (a, _),
        server_process(tmp_path, logs[1]) as (b, _),
    ):
        asyncio.run(_take_over(a, b))
        asyncio.run(_take_over(b, a))  # and back: leases are released and retaken
    _assert_clean(*logs)


def test_a_crashed_owner_blocks_its_session_only_until_the_lease_expires(
    tmp_path: Path,
) -> None:
    from server.leases import SessionLeases

    ttl = SessionLeases(tmp_path / "unused.db").ttl_s
    logs = tmp_path / "a.log", tmp_path / "b.log"

    async def scenario(a: str, b: str, crashed: subprocess.Popen) -> float:
        old, session = await _open(a)
        session_id = session["data"]["sessionId"]
        await _say(old, "before the crash", 1)
        crashed.send_signal(signal.SIGKILL)  # holding the lease, socket open
        crashed.wait()
        killed = time.monotonic()
        new, resumed = await _open(b, sessionId=session_id)
        waited = time.monotonic() - killed
        assert resumed["data"]["resumed"] and resumed["data"]["sessionId"] == session_id
        assert {"role": "user", "text": "before the crash"} in resumed["data"]["history"]
        assert (await _say(new, "after", 1)).startswith("You said: after (")
        await new.close()
        return waited

    with (
        server_process(tmp_path, logs[0]) as (a, proc_a),
        server_process(tmp_path, logs[1]) as (b, _),
    ):
        waited = asyncio.run(scenario(a, b, proc_a))
    assert waited <= ttl + 1.0, waited
    _assert_clean(logs[1])


def test_workers_2_serve_the_page_and_a_round_trip(tmp_path: Path) -> None:
    log = tmp_path / "server.log"

    async def scenario(base: str) -> None:
        collector, session = await _open(base)
        assert not session["data"]["resumed"]
        assert (await _say(collector, "hello", 1)).startswith("You said: hello")
        await collector.close()
        # Whichever workers the kernel hands the sockets to, a takeover holds.
        await _take_over(base, base)

    with server_process(tmp_path, log, "--workers", "2") as (base, _):
        page = urllib.request.urlopen(f"{base}/", timeout=2)
        assert page.status == 200 and b"<html" in page.read().lower()
        health = json.loads(urllib.request.urlopen(f"{base}/healthz", timeout=2).read())
        assert health["status"] == "ok" and health["model"] == "offline"
        asyncio.run(scenario(base))
    _assert_clean(log)
    assert "Started parent process" in log.read_text()
