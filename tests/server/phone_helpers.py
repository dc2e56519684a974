"""A Twilio Media Streams client, written from Twilio's documentation of
its WebSocket messages: what Twilio sends a bidirectional ``<Connect>
<Stream>`` (``connected``, ``start``, ``media`` every 20 ms, ``dtmf``,
``mark`` replies, ``stop``) and what it does with what it gets (plays
``media`` in order, sends each ``mark`` back once the audio before it has
played, and on ``clear`` drops what it holds and sends every pending mark
back at once)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from typing import Any

import numpy as np
import websockets

import audiocore
from audiocore_server.gate.twilio_signature import signature

AUTH_TOKEN = "twilio-auth-token-for-tests-0123"
FRAME_S = 0.020
FRAME_CODES = 160  # μ-law bytes in 20 ms at 8 kHz
RATE = 8000


def signed_headers(url: str, params: list[tuple[str, str]] | None = None, token: str = AUTH_TOKEN):
    return {"X-Twilio-Signature": signature(token, url, params or [])}


def mulaw(samples: np.ndarray) -> bytes:
    """float32 samples at 8 kHz → μ-law codes."""
    return audiocore.float32_to_ulaw(samples.astype(np.float32))


def decoded(codes: bytes) -> np.ndarray:
    return np.frombuffer(audiocore.ulaw_to_pcm16(codes), "<i2").astype(np.float64) / 32768


class TwilioCall:
    """One call's stream, as Twilio drives it. ``reply_marks``: False keeps
    the mark replies back (a caller's phone that has not played anything);
    replies that fall due together are sent in reverse order (Twilio's
    replies may come in any order)."""

    def __init__(
        self,
        ws: Any,
        *,
        stream_sid: str = "MZ0001",
        call_sid: str = "CA0001",
        carrier: str = "twilio",
    ) -> None:
        self.ws = ws
        # Telnyx's envelope: snake_case, and what it is sent names no stream.
        self.telnyx = carrier == "telnyx"
        self.stream_sid = stream_sid
        self.call_sid = call_sid
        self.sequence = 0
        self.chunk = 0
        self.audio = bytearray()  # every μ-law byte received, in order
        self.events: list[dict[str, Any]] = []  # every message received
        self.replied: list[str] = []  # mark names sent back, in order
        self.mark_at: dict[str, int] = {}  # mark name → audio received before it (bytes)
        self.reply_marks = True
        self._queue: list[tuple[float, str]] = []  # (plays out at, mark name)
        self._play_end = 0.0
        self._new = asyncio.Event()  # for the waiters
        self._wake_player = asyncio.Event()
        self.reader = asyncio.create_task(self._read())
        self.player = asyncio.create_task(self._play())

    # ------------------------------------------------------------ Twilio → server
    async def _send(self, event: str, **fields: Any) -> None:
        self.sequence += 1
        sequence, stream = (
            ("sequence_number", "stream_id") if self.telnyx else ("sequenceNumber", "streamSid")
        )
        message: dict[str, Any] = {"event": event, sequence: str(self.sequence)}
        if event != "connected":
            message[stream] = self.stream_sid
        message.update(fields)
        await self.ws.send(json.dumps(message))

    async def connect(self, parameters: dict[str, str] | None = None) -> None:
        if self.telnyx:
            await self.ws.send(json.dumps({"event": "connected", "version": "1.0.0"}))
            await self._send(
                "start",
                start={
                    "call_control_id": self.call_sid,
                    "from": "+15550100",
                    "to": "+15550199",
                    "custom_parameters": parameters or {},
                    "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1},
                },
            )
            return
        connected = {"event": "connected", "protocol": "Call", "version": "1.0.0"}
        await self.ws.send(json.dumps(connected))
        await self._send(
            "start",
            start={
                "streamSid": self.stream_sid,
                "accountSid": "AC0001",
                "callSid": self.call_sid,
                "tracks": ["inbound"],
                "customParameters": parameters or {},
                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
            },
        )

    async def media(self, codes: bytes, chunk: int | None = None) -> None:
        chunk = chunk or self.chunk + 1
        self.chunk = max(self.chunk, chunk)
        await self._send(
            "media",
            media={
                "track": "inbound",
                "chunk": str(chunk),
                "timestamp": str(chunk * 20),
                "payload": base64.b64encode(codes).decode(),
            },
        )

    async def speak(self, codes: bytes, *, swapped: bool = False) -> None:
        """μ-law codes as 20 ms media messages on a real-time schedule;
        ``swapped``: each pair of frames sent the wrong way round (Telnyx's
        frames may come out of order), counted as they should be."""
        frames = [codes[i : i + FRAME_CODES] for i in range(0, len(codes), FRAME_CODES)]
        first = self.chunk + 1
        order = list(range(len(frames)))
        if swapped:
            for k in range(0, len(order) - 1, 2):
                order[k], order[k + 1] = order[k + 1], order[k]
        t0 = time.monotonic()
        for k, index in enumerate(order):
            delay = t0 + k * FRAME_S - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.media(frames[index], first + index)

    async def dtmf(self, digit: str) -> None:
        await self._send("dtmf", dtmf={"track": "inbound_track", "digit": digit})

    async def stop(self) -> None:
        if self.telnyx:
            await self._send("stop", stop={"call_control_id": self.call_sid})
            return
        await self._send("stop", stop={"accountSid": "AC0001", "callSid": self.call_sid})

    async def raw(self, frame: str | bytes) -> None:
        await self.ws.send(frame)

    # ------------------------------------------------------------ server → Twilio
    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for frame in self.ws:
                message = json.loads(frame)
                if self.telnyx:
                    assert "streamSid" not in message and "stream_id" not in message, message
                else:
                    assert message.get("streamSid") == self.stream_sid, message
                self.events.append(message)
                event = message["event"]
                if event == "media":
                    codes = base64.b64decode(message["media"]["payload"])
                    self.audio += codes
                    now = time.monotonic()
                    self._play_end = max(self._play_end, now) + len(codes) / RATE
                elif event == "mark":
                    self.mark_at[message["mark"]["name"]] = len(self.audio)
                    self._queue.append((self._play_end, message["mark"]["name"]))
                elif event == "clear":
                    # Twilio drops what it holds and sends every pending mark back.
                    self._play_end = time.monotonic()
                    pending, self._queue = self._queue, []
                    for _, name in reversed(pending):
                        await self._reply(name)
                else:
                    raise AssertionError(f"not a message Twilio takes: {message}")
                self._new.set()
                self._wake_player.set()
        self._new.set()

    async def _reply(self, name: str) -> None:
        self.replied.append(name)
        with contextlib.suppress(websockets.ConnectionClosed):
            await self._send("mark", mark={"name": name})
        self._new.set()

    def release_marks(self) -> None:
        """The phone plays again: held replies go as their audio plays."""
        self.reply_marks = True
        self._wake_player.set()

    async def _play(self) -> None:
        while True:
            now = time.monotonic()
            due = [item for item in self._queue if item[0] <= now] if self.reply_marks else []
            if due:
                self._queue = [item for item in self._queue if item[0] > now]
                for _, name in reversed(due):  # out of order, as Twilio may
                    await self._reply(name)
            waits = [at - now for at, _ in self._queue if at > now]
            timeout = min(waits) if waits and self.reply_marks else None
            self._wake_player.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake_player.wait(), timeout)

    # ------------------------------------------------------------ waiting
    def count(self, event: str) -> int:
        return sum(1 for m in self.events if m["event"] == event)

    async def wait_for(self, condition: Any, timeout: float = 20.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.reader.done():
                last = [m["event"] for m in self.events[-10:]]
                raise AssertionError(
                    f"not {what or condition} within {timeout}s "
                    f"(received {last}, closed: {self.reader.done()})"
                )
            self._new.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new.wait(), min(remaining, 0.5))

    async def hang_up(self) -> None:
        await self.ws.close()
        await self.finish()

    async def finish(self) -> None:
        await self.reader
        self.player.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.player
