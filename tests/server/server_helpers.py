"""Client-side helpers for the server tests."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from typing import Any

import numpy as np
import websockets


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
