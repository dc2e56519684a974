"""What the provider paths' end-to-end tests (test_gemini_*, test_openai_*)
share: a client session on /ws that waits until its provider connection is
ready, reading the agent's words and errors off a ``Collector``, and a typed
turn through ``python -m server`` exactly as a user runs it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from server_helpers import Collector, free_port, serve_ws, stream_realtime
from test_e2e import START_F32, connect

from audiocore_server import Settings
from audiocore_server.audio.pacer import OutputPacer

REPO = Path(__file__).resolve().parents[2]
FRAME_24K = 960  # the pacer's 40 ms frames at the default output rate


def use_only_key(
    monkeypatch: pytest.MonkeyPatch, variable: str, key: str, cleared: Iterable[str]
) -> None:
    """The environment a user has: ``variable`` set to ``key``, none of
    ``cleared`` (other credentials, base URLs, CA bundles), no proxy for loopback."""
    for name in cleared:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, key)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


async def open_ready_session(
    url: str, endpoint: Any, ready: Callable[[Any], object], **start: Any
) -> tuple[Any, Collector]:
    """A client session whose provider connection is ``ready`` (a predicate
    on the endpoint's newest record), so no audio waits for it."""
    before = len(endpoint.records)
    ws, col, _ = await connect(url, {**START_F32, **start})
    await endpoint.wait_for_async(lambda rs: len(rs) > before and ready(rs[-1]))
    return ws, col


def spy_on_played_seconds(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every position the pacer says was played, as it is asked, in order."""
    positions: list[float] = []
    played_seconds = OutputPacer.played_seconds

    def spy(pacer: OutputPacer) -> float:
        positions.append(played_seconds(pacer))
        return positions[-1]

    monkeypatch.setattr(OutputPacer, "played_seconds", spy)
    return positions


async def push_to_talk(ws: Any, audio: Any, rate: int) -> None:
    """One manual turn: ``activity_start``, ``audio`` streamed at real time,
    ``activity_end``."""
    await ws.send(json.dumps({"type": "activity_start"}))
    await stream_realtime(ws, audio, rate)
    await ws.send(json.dumps({"type": "activity_end"}))


def approve(request: dict[str, Any]) -> str:
    """The client's approval of a ``tool-approval-request``."""
    return json.dumps(
        {"type": "tool_approval", "approvalId": request["approvalId"], "approved": True}
    )


async def say(ws: Any, text: str) -> None:
    await ws.send(json.dumps({"type": "text", "text": text}))


def said(col: Collector, turn: int = -1) -> str:
    """The agent's words in a turn (its text deltas)."""
    turns: list[list[str]] = [[]]
    for _, m in col.messages:
        if m["type"] == "text-delta":
            turns[-1].append(m["delta"])
        elif m["type"] == "finish":
            turns.append([])
    return "".join([t for t in turns if t][turn])


def errors(col: Collector) -> list[str]:
    return [m["errorText"] for _, m in col.messages if m["type"] == "error"]


def refused_turn(settings: Settings) -> Collector:
    """Says "hello" on a server with ``settings`` whose provider refuses its
    key: the server must close the socket 1011 (within 30 s, not hang).
    Returns what the client got."""

    async def scenario(url: str) -> Collector:
        ws, col, _ = await connect(url, START_F32)
        await say(ws, "hello")
        await col.task  # the server closes the socket
        assert ws.close_code == 1011
        return col

    with serve_ws(settings) as url:
        return asyncio.run(asyncio.wait_for(scenario(url), 30))


def python_m_server_hello(
    args: list[str], env: dict[str, str], open_session: Callable[[str], Awaitable[tuple[Any, Any]]]
) -> tuple[dict[str, Any], Collector, str]:
    """``python -m server --port <free> *args`` with exactly ``env``: waits
    for /healthz, says "hello" in a session from ``open_session(ws_url)``
    until its finish, then stops the server. Returns the health answer, the
    session's ``Collector`` and the server's stderr."""
    port = free_port()
    command = [sys.executable, "-m", "server", "--port", str(port), *args]
    proc = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    try:
        health = None
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    health = json.loads(r.read())
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                threading.Event().wait(0.1)  # polling for the port, bounded
        assert health is not None, "python -m server did not answer /healthz"

        async def scenario() -> Collector:
            ws, col = await open_session(f"ws://127.0.0.1:{port}/ws")
            await say(ws, "hello")
            await col.wait_for("finish")
            await col.close()
            return col

        col = asyncio.run(scenario())
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=10)
    return health, col, stderr
