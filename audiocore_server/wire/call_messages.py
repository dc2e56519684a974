"""What phone carriers' media streams say, in one vocabulary: Twilio's and
Telnyx's JSON messages (``twilio.py``, ``telnyx.py``) decode into these,
with the checks they share (bounds, UTF-8, JSON, base64 μ-law, digits).
Pure: no I/O. A mistake is an ``InputError`` saying what was expected.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Callable
from typing import Any, Protocol

from .fields import InputError

# A media message of 20 ms is about 300 characters and a start with its
# parameters a few hundred more; nothing a carrier sends comes near this.
MAX_MESSAGE_CHARS = 16 * 1024
MAX_PAYLOAD_BYTES = 8000  # one second of μ-law: carriers send 160 bytes (20 ms)
DTMF_DIGITS = frozenset("0123456789*#ABCD")


@dataclasses.dataclass(frozen=True)
class Connected:
    protocol: str


@dataclasses.dataclass(frozen=True)
class StreamStart:
    stream_sid: str  # the stream's id (Twilio's streamSid, Telnyx's stream_id)
    call_sid: str  # the call's (Twilio's callSid, Telnyx's call_control_id)
    account_sid: str
    custom_parameters: dict[str, str]


@dataclasses.dataclass(frozen=True)
class Media:
    payload: bytes  # μ-law codes, 8 kHz mono
    chunk: int | None = None  # the carrier's count, where frames may come out of order


@dataclasses.dataclass(frozen=True)
class Dtmf:
    digit: str


@dataclasses.dataclass(frozen=True)
class MarkReply:
    name: str


@dataclasses.dataclass(frozen=True)
class Stop:
    pass


@dataclasses.dataclass(frozen=True)
class CarrierError:
    """The carrier reports a mistake of ours (Telnyx's ``error``)."""

    text: str


CallMessage = Connected | StreamStart | Media | Dtmf | MarkReply | Stop | CarrierError
Decoder = Callable[[dict[str, Any]], CallMessage]


class CallEncoder(Protocol):
    """What the server sends a carrier's stream: audio, marks, a clear."""

    def media(self, mulaw: bytes) -> str: ...

    def mark(self, name: str) -> str: ...

    def clear(self) -> str: ...


def decode(carrier: str, raw: str | bytes, decoders: dict[str, Decoder]) -> CallMessage:
    """One frame: UTF-8 JSON text, an object, an ``event`` this carrier sends."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(
                f"{carrier}: expected a UTF-8 JSON message, got bytes that are not UTF-8"
            ) from None
    if len(raw) > MAX_MESSAGE_CHARS:
        raise InputError(
            f"{carrier}: message of {len(raw)} characters exceeds the limit of {MAX_MESSAGE_CHARS}"
        )
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        raise InputError(f"{carrier}: expected a JSON message, got text that is not JSON") from None
    if not isinstance(obj, dict):
        raise InputError(f"{carrier}: expected a JSON object, got {type(obj).__name__}")
    event = obj.get("event")
    decoder = decoders.get(event) if isinstance(event, str) else None
    if decoder is None:
        raise InputError(f"{carrier}: expected an event of {sorted(decoders)}, got {event!r}")
    return decoder(obj)


def object_field(obj: dict[str, Any], name: str) -> dict[str, Any]:
    value = obj.get(name)
    if not isinstance(value, dict):
        raise InputError(f"{obj['event']}.{name}: expected an object, got {kind(value)}")
    return value


def string_field(obj: dict[str, Any], name: str, where: str, *, max_chars: int = 256) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value or len(value) > max_chars:
        raise InputError(
            f"{where}.{name}: expected a string of 1 to {max_chars} characters, got {kind(value)}"
        )
    return value


def kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return f"a string of {len(value)} characters" if value else "an empty string"
    return type(value).__name__


def parameters(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InputError(f"{where}: expected an object of strings")
    return dict(value)


def mulaw_payload(media: dict[str, Any]) -> bytes:
    """``media.payload``: base64 μ-law, at most a second of it."""
    payload = media.get("payload")
    if not isinstance(payload, str):
        raise InputError(f"media.payload: expected base64 μ-law, got {kind(payload)}")
    if len(payload) > MAX_PAYLOAD_BYTES * 4 // 3 + 4:
        raise InputError(
            f"media.payload: expected at most {MAX_PAYLOAD_BYTES} bytes of μ-law, "
            f"got {len(payload)} characters of base64"
        )
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(
            "media.payload: expected base64 μ-law, got text that is not base64"
        ) from None


def dtmf(obj: dict[str, Any]) -> Dtmf:
    digit = object_field(obj, "dtmf").get("digit")
    if not isinstance(digit, str) or digit not in DTMF_DIGITS:
        raise InputError(f"dtmf.digit: expected one of 0-9, *, #, A-D, got {digit!r}")
    return Dtmf(digit)


def mark(obj: dict[str, Any]) -> MarkReply:
    return MarkReply(string_field(object_field(obj, "mark"), "name", "mark"))


def stop(obj: dict[str, Any]) -> Stop:
    return Stop()


def to_base64(mulaw: bytes) -> str:
    return base64.b64encode(mulaw).decode("ascii")
