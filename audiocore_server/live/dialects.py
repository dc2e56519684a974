"""The kinds of live client, and what each needs of the data path.

A ``LiveConnection`` (the data path) is the same for every client; a
``Dialect`` supplies how the conversation opens, how client frames decode
into ``protocol`` messages, how ADK events translate, and how the results
are framed (``audiocore_server/live/frames.py``):

* ``UI_STREAM`` — ``/ws``, our protocol (docs/protocol.md): an optional
  ``start``, AI SDK v6 UI message chunks, binary audio both ways.
* ``SEED`` — ``/live``, the seed project's BIDI transport: the same messages
  and chunks, framed as one Server-Sent Event per text frame, and the
  user's words as a text part as well (``audiocore_server/turns/seed.py``).
* ADK's ``/run_live`` — in ``audiocore_server/live/run_live.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Protocol

from starlette.types import Message
from starlette.websockets import WebSocket

from ..gate.owners import NotOwner, bind_user_key
from ..tools.spec import ToolSpec
from ..turns.events import Translator, TurnTranslator
from ..turns.seed import SeedTurnTranslator
from ..wire import fields, protocol
from .frames import SseOverWebSocketWire, UiStreamWire, Wire
from .handshake import read_hello
from .opening import Opening


class Dialect(Protocol):
    name: str
    # Whether the reason a connection ends goes out as an ``error`` chunk
    # before the close frame (not to a phone: Twilio takes only its own).
    error_before_close: bool

    async def open(self, ws: WebSocket, timeout_s: float, limits: fields.Limits) -> Opening: ...

    def decode(
        self, message: Message, fmt: protocol.InputFormat, limits: fields.Limits
    ) -> Sequence[protocol.ClientMessage]: ...

    def translator(self, tools: Mapping[str, ToolSpec], model_name: str) -> Translator: ...

    def wire(self, output: protocol.OutputFormat) -> Wire: ...


def decode_frame(
    message: Message, fmt: protocol.InputFormat, limits: fields.Limits
) -> protocol.ClientMessage:
    """Our clients' frames: binary audio, or one JSON message per text frame."""
    data = message.get("bytes")
    if data is not None:
        return protocol.decode_binary(data, fmt, limits)
    return protocol.decode_text(message.get("text") or "", fmt, limits)


class UiStreamDialect:
    name = "ws"
    error_before_close = True

    async def open(self, ws: WebSocket, timeout_s: float, limits: fields.Limits) -> Opening:
        hello = await read_hello(ws, timeout_s, limits)
        # A token speaks for its owner: the owner's key, whatever was sent.
        try:
            user_key = bind_user_key(ws.scope, hello.start.user_key)
        except NotOwner as exc:
            raise protocol.ProtocolError(protocol.CLOSE_POLICY_VIOLATION, str(exc)) from None
        return Opening(dataclasses.replace(hello.start, user_key=user_key), hello.first)

    def decode(
        self, message: Message, fmt: protocol.InputFormat, limits: fields.Limits
    ) -> Sequence[protocol.ClientMessage]:
        return [decode_frame(message, fmt, limits)]

    def translator(self, tools: Mapping[str, ToolSpec], model_name: str) -> Translator:
        return TurnTranslator(tools, model_name)

    def wire(self, output: protocol.OutputFormat) -> Wire:
        return UiStreamWire(binary_audio=output.binary)


class SeedDialect(UiStreamDialect):
    name = "live"

    def translator(self, tools: Mapping[str, ToolSpec], model_name: str) -> Translator:
        return SeedTurnTranslator(tools, model_name)

    def wire(self, output: protocol.OutputFormat) -> Wire:
        return SseOverWebSocketWire()


UI_STREAM = UiStreamDialect()
SEED = SeedDialect()
