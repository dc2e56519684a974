"""Bounds on how a request's head may arrive, under uvicorn.

uvicorn bounds neither how long a client may take to send a request's line
and headers (a few sockets that send a byte now and then are never closed:
slowloris) nor, with its default parser, how large the headers may grow (a
handful of multi-megabyte header lines cost hundreds of MB). The server
runs on h11, whose buffer for an incomplete request head is bounded
(``h11_max_incomplete_event_size``: a larger head is answered 400 and
closed), with this protocol, which closes a connection whose request head
has not arrived in ``header_timeout_s`` — for the first request and for
every later one on a kept-alive connection.

A WebSocket's kernel send buffer is bounded too (``WEBSOCKET_SEND_BUFFER``).
Linux grows it on its own up to megabytes (``tcp_wmem``): a client that
stops reading then soaks up a minute of audio before a send blocks, and
``send_timeout_s`` (which starts only then) never fires; the keepalive ping
closed it after 40 s instead, as 1011.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from ..settings import Settings


def _timeout_from_env() -> float:
    try:
        return Settings.from_env().header_timeout_s
    except ValueError:  # python -m server reports the bad setting itself
        return Settings.header_timeout_s


class BoundedH11Protocol(H11Protocol):
    # uvicorn builds the protocol from its own config, which has no room for
    # this: worker processes read it from the environment like every other
    # setting; ``with_timeout`` makes a class with another.
    header_timeout_s: float = _timeout_from_env()

    @classmethod
    def with_timeout(cls, seconds: float) -> type[BoundedH11Protocol]:
        return type(cls.__name__, (cls,), {"header_timeout_s": seconds})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._head_timer is None:
            self._arm()  # a new request begins on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # its head is in

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.debug("closing a connection whose request head came too slowly")
            self.transport.close()


# 128 KiB (Linux doubles it for its bookkeeping): 2 s of the fastest stream
# we send (48 kHz audio as JSON, 128 KB/s), and at a 300 ms round trip room
# for three times that rate.
WEBSOCKET_SEND_BUFFER = 128 * 1024
WEBSOCKET_RECEIVE_BUFFER = 64 * 1024


# The bytes of one read parsed in one turn of the loop, at most. uvicorn
# parses a whole read at once, and one read may hold some 3,000 small frames
# (each parsed and queued: 15-30 ms with the loop held); a slice holds about
# 350 of them (2-3 ms). Large frames are unaffected: they arrive in many reads.
WEBSOCKET_READ_SLICE = 16 * 1024


class _ReadGate:
    """A transport whose ``resume_reading`` waits while the protocol still
    holds read bytes to parse: uvicorn resumes reading whenever its app has
    taken every message, and reads would pile up behind the slices."""

    def __init__(self, transport: asyncio.Transport, backlog: bytearray) -> None:
        self._transport = transport
        self._backlog = backlog  # the protocol's (not the protocol: no cycle)
        # Every frame sent writes: the transport's own method, not __getattr__.
        self.write = transport.write

    def resume_reading(self) -> None:
        if not self._backlog:
            self._transport.resume_reading()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class BoundedSendWebSockets(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol with fixed kernel buffers, and reads
    parsed a slice per turn of the loop (``WEBSOCKET_READ_SLICE``)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, WEBSOCKET_SEND_BUFFER)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, WEBSOCKET_RECEIVE_BUFFER)
        self.backlog = bytearray()  # read, not yet parsed
        # (uvloop's transports are not asyncio.Transport subclasses.)
        gate = _ReadGate(cast(asyncio.Transport, transport), self.backlog)
        super().connection_made(cast(asyncio.Transport, gate))

    def data_received(self, data: bytes) -> None:
        if not self.backlog and len(data) <= WEBSOCKET_READ_SLICE:
            super().data_received(data)
            return
        # No more reads until this one is parsed (the gate holds uvicorn's
        # resumes): at most one read is held here.
        was_idle = not self.backlog
        self.backlog += data
        self.transport.pause_reading()
        if was_idle:
            self._parse_slice()

    def _parse_slice(self) -> None:
        if self.transport.is_closing():
            self.backlog.clear()  # nobody is left to read it
            return
        piece = bytes(self.backlog[:WEBSOCKET_READ_SLICE])
        del self.backlog[:WEBSOCKET_READ_SLICE]
        super().data_received(piece)
        if self.backlog:
            self.loop.call_soon(self._parse_slice)
        elif not self.read_paused:  # uvicorn wants more (else it resumes later)
            self.transport.resume_reading()
