"""The opening of a /ws connection: the client's optional ``start``.

A client may begin with ``start`` (formats both ways, turn detection, the
session to resume) or go straight to audio with the defaults. The server
waits ``timeout_s`` for it; any other first message is kept and handled as
the first message of the conversation.
"""

from __future__ import annotations

import dataclasses

import anyio
from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..wire import fields, protocol

DEFAULT_START = protocol.Start(protocol.InputFormat(), protocol.OutputFormat(), None, None)


@dataclasses.dataclass(frozen=True)
class Hello:
    start: protocol.Start  # DEFAULT_START when the client sent none
    first: Message | None  # the first message, when it was not a `start`


async def read_hello(ws: WebSocket, timeout_s: float, limits: fields.Limits) -> Hello:
    """Raises ``ProtocolError`` (close with its code) and ``WebSocketDisconnect``."""
    message: Message | None = None
    with anyio.move_on_after(timeout_s):
        message = await ws.receive()
    if message is None:
        return Hello(DEFAULT_START, None)
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    text = message.get("text")
    if text is not None:
        try:
            decoded = protocol.decode_text(text, DEFAULT_START.input, limits)
        except fields.InputError:
            return Hello(DEFAULT_START, message)  # reported when it is handled
        if isinstance(decoded, protocol.Start):
            return Hello(decoded, None)
    return Hello(DEFAULT_START, message)
