"""Twilio Media Streams' messages (bidirectional ``<Connect><Stream>``),
decoded and encoded; pure, no I/O (docs/telephony.md).

Twilio → us, one JSON text frame each: ``connected``, then ``start``
(``streamSid``, ``start.callSid``, ``start.customParameters``,
``start.mediaFormat``), ``media`` (``media.payload``: base64 μ-law at
8 kHz, 20 ms a message), ``dtmf`` (``dtmf.digit``), ``mark`` (a mark we
sent, back when the audio before it has played or a ``clear`` dropped
it) and ``stop``. Us → Twilio: ``media``, ``mark`` and ``clear``.

A message that is not one of these, or not as documented, is an
``InputError`` saying what was expected: the call goes on without it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Callable
from typing import Any

from .fields import InputError

# A media message of 20 ms is about 300 characters and a start with its
# parameters a few hundred more; nothing Twilio sends comes near this.
MAX_MESSAGE_CHARS = 16 * 1024
MAX_PAYLOAD_BYTES = 8000  # one second of μ-law: Twilio sends 160 bytes (20 ms)
DTMF_DIGITS = frozenset("0123456789*#ABCD")
MULAW_FORMAT = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}


@dataclasses.dataclass(frozen=True)
class Connected:
    protocol: str


@dataclasses.dataclass(frozen=True)
class StreamStart:
    stream_sid: str
    call_sid: str
    account_sid: str
    custom_parameters: dict[str, str]


@dataclasses.dataclass(frozen=True)
class Media:
    payload: bytes  # μ-law codes, 8 kHz mono


@dataclasses.dataclass(frozen=True)
class Dtmf:
    digit: str


@dataclasses.dataclass(frozen=True)
class MarkReply:
    name: str


@dataclasses.dataclass(frozen=True)
class Stop:
    pass


TwilioMessage = Connected | StreamStart | Media | Dtmf | MarkReply | Stop


def decode(raw: str | bytes) -> TwilioMessage:
    """One frame from Twilio; ``InputError`` says what was wrong with it."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(
                "twilio: expected a UTF-8 JSON message, got bytes that are not UTF-8"
            ) from None
    if len(raw) > MAX_MESSAGE_CHARS:
        raise InputError(
            f"twilio: message of {len(raw)} characters exceeds the limit of {MAX_MESSAGE_CHARS}"
        )
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        raise InputError("twilio: expected a JSON message, got text that is not JSON") from None
    if not isinstance(obj, dict):
        raise InputError(f"twilio: expected a JSON object, got {type(obj).__name__}")
    event = obj.get("event")
    decoder = _DECODERS.get(event) if isinstance(event, str) else None
    if decoder is None:
        raise InputError(f"twilio: expected an event of {sorted(_DECODERS)}, got {event!r}")
    return decoder(obj)


def _object(obj: dict[str, Any], name: str) -> dict[str, Any]:
    value = obj.get(name)
    if not isinstance(value, dict):
        raise InputError(f"{obj['event']}.{name}: expected an object, got {_kind(value)}")
    return value


def _string(obj: dict[str, Any], name: str, where: str, *, max_chars: int = 256) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value or len(value) > max_chars:
        raise InputError(
            f"{where}.{name}: expected a string of 1 to {max_chars} characters, got {_kind(value)}"
        )
    return value


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return f"a string of {len(value)} characters" if value else "an empty string"
    return type(value).__name__


def _connected(obj: dict[str, Any]) -> Connected:
    value = obj.get("protocol")
    return Connected(value if isinstance(value, str) else "")


def _start(obj: dict[str, Any]) -> StreamStart:
    start = _object(obj, "start")
    stream_sid = obj.get("streamSid", start.get("streamSid"))
    if not isinstance(stream_sid, str) or not stream_sid:
        raise InputError(f"start.streamSid: expected a string, got {_kind(stream_sid)}")
    fmt = start.get("mediaFormat")
    if fmt is not None and fmt != MULAW_FORMAT:
        raise InputError(f"start.mediaFormat: expected {MULAW_FORMAT}, got {fmt!r}")
    params = start.get("customParameters", {})
    if not isinstance(params, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in params.items()
    ):
        raise InputError("start.customParameters: expected an object of strings")
    return StreamStart(
        stream_sid,
        _string(start, "callSid", "start"),
        _string(start, "accountSid", "start"),
        dict(params),
    )


def _media(obj: dict[str, Any]) -> Media:
    media = _object(obj, "media")
    track = media.get("track", "inbound")
    if track not in ("inbound", "inbound_track"):
        raise InputError(f"media.track: expected 'inbound', got {track!r}")
    payload = media.get("payload")
    if not isinstance(payload, str):
        raise InputError(f"media.payload: expected base64 μ-law, got {_kind(payload)}")
    if len(payload) > MAX_PAYLOAD_BYTES * 4 // 3 + 4:
        raise InputError(
            f"media.payload: expected at most {MAX_PAYLOAD_BYTES} bytes of μ-law, "
            f"got {len(payload)} characters of base64"
        )
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(
            "media.payload: expected base64 μ-law, got text that is not base64"
        ) from None
    return Media(data)


def _dtmf(obj: dict[str, Any]) -> Dtmf:
    digit = _object(obj, "dtmf").get("digit")
    if not isinstance(digit, str) or digit not in DTMF_DIGITS:
        raise InputError(f"dtmf.digit: expected one of 0-9, *, #, A-D, got {digit!r}")
    return Dtmf(digit)


def _mark(obj: dict[str, Any]) -> MarkReply:
    return MarkReply(_string(_object(obj, "mark"), "name", "mark"))


def _stop(obj: dict[str, Any]) -> Stop:
    return Stop()


_DECODERS: dict[str, Callable[[dict[str, Any]], TwilioMessage]] = {
    "connected": _connected,
    "start": _start,
    "media": _media,
    "dtmf": _dtmf,
    "mark": _mark,
    "stop": _stop,
}


# ---------------------------------------------------------------- to Twilio


def media(stream_sid: str, mulaw: bytes) -> str:
    payload = base64.b64encode(mulaw).decode("ascii")
    return json.dumps({"event": "media", "streamSid": stream_sid, "media": {"payload": payload}})


def mark(stream_sid: str, name: str) -> str:
    return json.dumps({"event": "mark", "streamSid": stream_sid, "mark": {"name": name}})


def clear(stream_sid: str) -> str:
    return json.dumps({"event": "clear", "streamSid": stream_sid})
