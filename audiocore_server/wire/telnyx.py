"""Telnyx media streaming's messages (bidirectional, RTP mode), decoded
into the call vocabulary (``call_messages.py``) and encoded; pure
(docs/telephony.md#telnyx).

Telnyx → us: ``connected``, then ``start`` (``stream_id``,
``start.call_control_id``, ``start.media_format`` — PCMU at 8 kHz, mono,
which Telnyx's pages spell ``PCMU`` or ``audio/x-mulaw`` — and the call's
parameters: ``start.custom_parameters``, or ``start.client_state``, which
Telnyx documents in ``start``: the base64 of what the Call Control command
set, here a JSON object of strings), ``media`` (``media.payload``: a base64
RTP payload, no header; ``media.chunk`` counts them: **frames may come out
of order**), ``dtmf``, ``mark`` (a mark we sent, back), ``error`` (a
mistake of ours) and ``stop``. Us → Telnyx: ``media``, ``mark``,
``clear``; they name no stream (the socket is the stream).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from .call_messages import (
    CallMessage,
    CarrierError,
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

PCMU_FORMAT = {"encoding": "PCMU", "sample_rate": 8000, "channels": 1}
# Both spellings of μ-law in Telnyx's documentation of ``start``.
PCMU_ENCODINGS = ("PCMU", "audio/x-mulaw")
MAX_CLIENT_STATE = 4096  # characters of base64: Telnyx bounds its own far lower


def decode(raw: str | bytes) -> CallMessage:
    """One frame from Telnyx; ``InputError`` says what was wrong with it."""
    return decode_call("telnyx", raw, _DECODERS)


def _connected(obj: dict[str, Any]) -> Connected:
    return Connected("telnyx")


def _start(obj: dict[str, Any]) -> StreamStart:
    start = object_field(obj, "start")
    stream_id = obj.get("stream_id", start.get("stream_id"))
    if not isinstance(stream_id, str) or not stream_id:
        raise InputError(f"start.stream_id: expected a string, got {kind(stream_id)}")
    fmt = start.get("media_format")
    if fmt is not None and (
        not isinstance(fmt, dict)
        or fmt.get("encoding") not in PCMU_ENCODINGS
        or str(fmt.get("sample_rate")) != "8000"
        or str(fmt.get("channels", 1)) != "1"
    ):
        raise InputError(f"start.media_format: expected {PCMU_FORMAT}, got {fmt!r}")
    custom = start.get("custom_parameters")
    if custom is None:
        found = _client_state(start.get("client_state"))
    elif isinstance(custom, list):  # as Call Control takes them: [{name, value}]
        found = _named(custom)
    else:
        found = parameters(custom, "start.custom_parameters")
    return StreamStart(stream_id, string_field(start, "call_control_id", "start"), "", found)


def _named(items: list[object]) -> dict[str, str]:
    found = {}
    for item in items:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            raise InputError(
                "start.custom_parameters: expected an object of strings or a list of "
                f"{{name, value}} strings, got an item {kind(item)}"
            )
        found[item["name"]] = item["value"]
    return found


def _client_state(value: object) -> dict[str, str]:
    """The call's parameters from ``client_state``: base64 of a JSON object
    of strings. Any other state is the application's own, not ours: none."""
    if not isinstance(value, str) or not value or len(value) > MAX_CLIENT_STATE:
        return {}
    try:
        state = json.loads(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return {}
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in state.items()
    ):
        return {}
    return state


def _media(obj: dict[str, Any]) -> Media:
    media = object_field(obj, "media")
    track = media.get("track", "inbound")
    if track not in ("inbound", "inbound_track"):
        raise InputError(f"media.track: expected 'inbound', got {track!r}")
    chunk = media.get("chunk")
    if isinstance(chunk, str) and chunk.isascii() and chunk.isdigit() and len(chunk) < 12:
        chunk = int(chunk)
    if chunk is not None and (type(chunk) is not int or chunk < 1):
        raise InputError(f"media.chunk: expected a count from 1, got {chunk!r}")
    return Media(mulaw_payload(media), chunk)


def _error(obj: dict[str, Any]) -> CarrierError:
    payload = obj.get("payload")
    if not isinstance(payload, dict):
        return CarrierError("telnyx reported an error")
    words = [str(payload.get(k))[:200] for k in ("code", "title", "detail") if payload.get(k)]
    return CarrierError("telnyx reported: " + " ".join(words))


_DECODERS: dict[str, Decoder] = {
    "connected": _connected,
    "start": _start,
    "media": _media,
    "dtmf": dtmf,
    "mark": mark,
    "error": _error,
    "stop": stop,
}


class TelnyxEncoder:
    """Us → Telnyx: the socket is the stream."""

    def media(self, mulaw: bytes) -> str:
        return json.dumps({"event": "media", "media": {"payload": to_base64(mulaw)}})

    def mark(self, name: str) -> str:
        return json.dumps({"event": "mark", "mark": {"name": name}})

    def clear(self) -> str:
        return json.dumps({"event": "clear"})
