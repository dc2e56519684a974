"""Client-side helpers for the server tests."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import websockets

from audiocore_server import Settings, create_app

REPO = Path(__file__).resolve().parents[2]


def receive_until(ws: Any, kind: str, limit: int = 2000) -> list[dict[str, Any]]:
    """Messages up to and including the first of type ``kind``."""
    seen = []
    for _ in range(limit):
        message = ws.receive_json()
        seen.append(message)
        if message["type"] == kind:
            return seen
    raise AssertionError(f"no {kind!r} in {limit} messages: {[m['type'] for m in seen[-20:]]}")


def start(ws: Any, **fields: Any) -> dict[str, Any]:
    ws.send_text(json.dumps({"type": "start", **fields}))
    session = ws.receive_json()
    assert session["type"] == "data-session"
    return session


# ---------------------------------------------------------------- real-socket client

FRAME_S = 0.020


async def stream_realtime(ws: Any, samples: np.ndarray, rate: int) -> None:
    """Send float32 mono samples as binary 20 ms frames on a real-time schedule."""
    step = int(rate * FRAME_S)
    t0 = time.monotonic()
    for k, i in enumerate(range(0, len(samples), step)):
        delay = t0 + k * FRAME_S - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await ws.send(samples[i : i + step].astype("<f4").tobytes())


class Collector:
    """Reads a socket in the background; keeps messages with arrival times."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.messages: list[tuple[float, dict[str, Any]]] = []
        self.binary: list[tuple[float, bytes]] = []
        self._new = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for frame in self.ws:
                now = time.monotonic()
                if isinstance(frame, bytes):
                    self.binary.append((now, frame))
                else:
                    self.messages.append((now, json.loads(frame)))
                self._new.set()
        except websockets.ConnectionClosed:
            pass

    def types(self) -> list[str]:
        return [m["type"] for _, m in self.messages]

    async def wait_for(self, kind: str, count: int = 1, timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            found = [m for _, m in self.messages if m["type"] == kind]
            if len(found) >= count:
                return found[count - 1]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"no {kind!r} #{count} within {timeout}s: {self.types()[-30:]}"
                )
            self._new.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new.wait(), remaining)

    def pcm(self, *, after: int = 0) -> bytes:
        """Concatenated data-pcm audio (and binary frames) received so far."""
        pcm = b"".join(
            base64.b64decode(m["data"]["content"])
            for _, m in self.messages[after:]
            if m["type"] == "data-pcm"
        )
        return pcm + b"".join(frame for _, frame in self.binary)

    async def close(self) -> None:
        await self.ws.close()
        await self.task


def check_padded(pcm: bytes, samples: int, frame: int) -> np.ndarray:
    """A turn's audio is exactly ``samples`` long, then silence to a whole frame
    (the jitter buffer releases the tail in whole frames). Returns the audio."""
    audio = np.frombuffer(pcm, "<i2")
    assert len(audio) == -(-samples // frame) * frame, (len(audio), samples, frame)
    assert not audio[samples:].any(), "padding must be silence"
    return audio[:samples]


# ---------------------------------------------------------------- server processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def uvicorn_thread(app: Any, **options: Any) -> Iterator[tuple[str, int]]:
    """``app`` on real uvicorn (its lifespan on) in a thread of this process,
    on an ephemeral port of 127.0.0.1: yields (host, port) once it serves,
    and stops it after. ``options``: uvicorn's own."""
    import uvicorn  # only the tests that serve over a real socket need it

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.01)
    assert server.started, "uvicorn did not start"
    try:
        yield sock.getsockname()
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextlib.contextmanager
def serve_ws(settings: Settings) -> Iterator[str]:
    """The app of ``settings`` on real uvicorn (``uvicorn_thread``); yields its ws:// URL."""
    with uvicorn_thread(
        create_app(settings),
        log_level="warning",
        ws_max_size=settings.max_message_bytes,
        ws_per_message_deflate=False,
    ) as (host, port):
        yield f"ws://{host}:{port}/ws"


@contextlib.contextmanager
def server_process(
    data_dir: Path, log: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """``python -m server`` on a free port, with ``env`` added to its
    environment; yields (http base URL, process)."""
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
    environ["AUDIOCORE_MODEL"] = "offline"
    environ.update(env or {})
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "server", "--port", str(port), "--data-dir", str(data_dir)]
            + list(args),
            cwd=REPO,
            env=environ,
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


async def open_ws(base: str, **start: object) -> tuple[Collector, dict]:
    ws = await websockets.connect(_ws(base), max_size=None)
    await ws.send(json.dumps({"type": "start", **start}))
    collector = Collector(ws)
    return collector, await collector.wait_for("data-session")


async def say(collector: Collector, text: str, count: int) -> str:
    await collector.ws.send(json.dumps({"type": "text", "text": text}))
    await collector.wait_for("finish", count)
    deltas = [m["delta"] for _, m in collector.messages if m["type"] == "text-delta"]
    return deltas[-1]


def assert_clean(*logs: Path) -> None:
    for log in logs:
        text = log.read_text()
        # ADK refuses appends to a session another run has written since
        # ("last_update_time ... earlier than the update_time in storage").
        assert "stale session" not in text and "last_update_time" not in text, text[-3000:]
        assert "Traceback" not in text, text[-3000:]


async def take_over(old_base: str, new_base: str) -> None:
    """Open a session on ``old_base``, resume it on ``new_base`` while the first
    socket is still open; check the hand-over and the history."""
    old, session = await open_ws(old_base)
    session_id = session["data"]["sessionId"]
    assert (await say(old, "one", 1)).startswith("You said: one")

    new, resumed = await open_ws(new_base, sessionId=session_id)
    resumed_at = time.monotonic()
    await asyncio.wait_for(old.task, 5)  # the old socket is closed by the server
    assert old.ws.close_code == 1008
    error_at, error = old.messages[-1]
    assert error == {"type": "error", "errorText": "this session was resumed by another connection"}
    # The old run was over (and its client told) before the new one read the session.
    assert error_at <= resumed_at
    assert resumed["data"]["resumed"] and resumed["data"]["sessionId"] == session_id
    assert {"role": "user", "text": "one"} in resumed["data"]["history"]
    answer = await say(new, "two", 1)
    assert answer.startswith("You said: two (") and "earlier turns" in answer
    await new.close()
