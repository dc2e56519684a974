"""Twilio Media Streams' messages (bidirectional ``<Connect><Stream>``),
decoded into the call vocabulary (``call_messages.py``) and encoded; pure
(docs/telephony.md).

Twilio → us, one JSON text frame each: ``connected``, then ``start``
(``streamSid``, ``start.callSid``, ``start.customParameters``,
``start.mediaFormat``), ``media`` (``media.payload``: base64 μ-law at
8 kHz, 20 ms a message), ``dtmf`` (``dtmf.digit``), ``mark`` (a mark we
sent, back when the audio before it has played or a ``clear`` dropped
it) and ``stop``. Us → Twilio: ``media``, ``mark`` and ``clear``, each
naming the stream.
"""

from __future__ import annotations

import json
from typing import Any

from .call_messages import (
    CallMessage,
    Connected,
    Decoder,
    Media,
    StreamStart,
    dtmf,
    kind,
    mark,
    mulaw_payload,
    object_field,
    parameters,
    stop,
    string_field,
    to_base64,
)
from .call_messages import decode as decode_call
from .fields import InputError

MULAW_FORMAT = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}


def decode(raw: str | bytes) -> CallMessage:
    """One frame from Twilio; ``InputError`` says what was wrong with it."""
    return decode_call("twilio", raw, _DECODERS)


def _connected(obj: dict[str, Any]) -> Connected:
    value = obj.get("protocol")
    return Connected(value if isinstance(value, str) else "")


def _start(obj: dict[str, Any]) -> StreamStart:
    start = object_field(obj, "start")
    stream_sid = obj.get("streamSid", start.get("streamSid"))
    if not isinstance(stream_sid, str) or not stream_sid:
        raise InputError(f"start.streamSid: expected a string, got {kind(stream_sid)}")
    fmt = start.get("mediaFormat")
    if fmt is not None and fmt != MULAW_FORMAT:
        raise InputError(f"start.mediaFormat: expected {MULAW_FORMAT}, got {fmt!r}")
    return StreamStart(
        stream_sid,
        string_field(start, "callSid", "start"),
        string_field(start, "accountSid", "start"),
        parameters(start.get("customParameters"), "start.customParameters"),
    )


def _media(obj: dict[str, Any]) -> Media:
    media = object_field(obj, "media")
    track = media.get("track", "inbound")
    if track not in ("inbound", "inbound_track"):
        raise InputError(f"media.track: expected 'inbound', got {track!r}")
    return Media(mulaw_payload(media))


_DECODERS: dict[str, Decoder] = {
    "connected": _connected,
    "start": _start,
    "media": _media,
    "dtmf": dtmf,
    "mark": mark,
    "stop": stop,
}


class TwilioEncoder:
    """Us → Twilio: every message names the stream."""

    def __init__(self, stream_sid: str) -> None:
        self._sid = stream_sid

    def media(self, mulaw: bytes) -> str:
        return json.dumps(
            {"event": "media", "streamSid": self._sid, "media": {"payload": to_base64(mulaw)}}
        )

    def mark(self, name: str) -> str:
        return json.dumps({"event": "mark", "streamSid": self._sid, "mark": {"name": name}})

    def clear(self) -> str:
        return json.dumps({"event": "clear", "streamSid": self._sid})
