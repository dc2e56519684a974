"""What the decoders of client input share (``protocol.py`` for the /ws
frames, ``chat_messages.py`` for an AI SDK chat's messages): the recoverable
``InputError``, the ``Limits`` they hold input to, validators of single
fields, and the messages both of them produce (an image, a tool's answer).
Pure: no I/O here.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import zoneinfo
from typing import Any

SUPPORTED_RATES = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)
IMAGE_TYPES = ("image/jpeg", "image/png", "image/webp")
# An IANA zone name as the tz database spells them (the longest is 32
# characters): checked before the zone is looked up, so no path or odd name
# reaches the zone files.
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+){0,2}")
MAX_ZONE_CHARS = 64
# A client's key to its memory and tasks (a capability: random, ASCII).
USER_KEY = re.compile(r"[A-Za-z0-9_-]{20,100}")


class InputError(ValueError):
    """A recoverable mistake: answer with an ``error`` chunk, keep the socket."""


@dataclasses.dataclass(frozen=True)
class Limits:
    max_message_bytes: int = 4 * 1024 * 1024
    max_image_bytes: int = 2 * 1024 * 1024
    max_text_chars: int = 16_000
    max_id_chars: int = 200  # tool call and approval ids
    max_history_messages: int = 2_000  # in a `message`'s resubmitted history
    max_message_parts: int = 100  # parts of the message submitted (text, files, tools)
    max_message_images: int = 4  # images in one user message


@dataclasses.dataclass(frozen=True)
class Image:
    media_type: str
    data: bytes


@dataclasses.dataclass(frozen=True)
class ToolApproval:
    approval_id: str
    approved: bool
    reason: str | None = None
    # Read from a resubmitted chat history: an answer the server may already
    # have had, so an unknown id is ignored rather than reported.
    from_history: bool = False
    # What the user filled in for a tool that asked for a confirmation with
    # a payload (ADK's ToolConfirmation.payload); None: nothing sent.
    payload: Any = None


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """A client-executed tool's result: ``output``, or ``error_text`` if it failed."""

    tool_call_id: str
    output: Any = None
    error_text: str | None = None
    from_history: bool = False


def optional_object(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{key}: expected an object, got {type(value).__name__}")
    return value


def identifier(value: Any, what: str, limits: Limits) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"{what}: expected a non-empty string, got {type(value).__name__}")
    if len(value) > limits.max_id_chars:
        raise InputError(
            f"{what}: {len(value)} characters exceeds the limit of {limits.max_id_chars}"
        )
    return value


def user_key(value: Any) -> str | None:
    """A ``userKey`` (/ws's start message, the HTTP chat's body), or None
    when absent."""
    if value is not None and (not isinstance(value, str) or not USER_KEY.fullmatch(value)):
        raise InputError("userKey: expected 20 to 100 of A-Z a-z 0-9 _ - (a random key)")
    return value


def optional_text(value: Any, what: str, limits: Limits) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(f"{what}: expected a string, got {type(value).__name__}")
    if len(value) > limits.max_text_chars:
        raise InputError(
            f"{what}: {len(value)} characters exceeds the limit of {limits.max_text_chars}"
        )
    return value


MAX_PAYLOAD_BYTES = 16_384  # an approval's payload, as compact JSON


def approval_payload(value: Any, what: str) -> Any:
    """An approval's ``payload``: any JSON value (None when absent) of at
    most ``MAX_PAYLOAD_BYTES`` as compact JSON."""
    if value is None:
        return None
    try:
        size = len(json.dumps(value, separators=(",", ":"), allow_nan=False).encode())
    except (TypeError, ValueError):
        raise InputError(f"{what}: expected a JSON value") from None
    if size > MAX_PAYLOAD_BYTES:
        raise InputError(f"{what}: {size} bytes of JSON exceeds the limit of {MAX_PAYLOAD_BYTES}")
    return value


def time_zone(value: Any, what: str) -> str:
    """An IANA time zone name the system knows ("Europe/Paris", "UTC")."""
    if not isinstance(value, str):
        raise InputError(f"{what}: expected an IANA time zone name, got {type(value).__name__}")
    if len(value) > MAX_ZONE_CHARS or not _ZONE_NAME.fullmatch(value):
        raise InputError(f'{what}: expected an IANA time zone name such as "Europe/Paris"')
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InputError(f"{what}: unknown time zone {value!r}") from None
    return value


def sample_rate(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in SUPPORTED_RATES:
        raise InputError(f"{what}: expected one of {list(SUPPORTED_RATES)}, got {value!r}")
    return value


def b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise InputError(f"{what}: expected a base64 string, got {type(value).__name__}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        pass
    try:  # URL-safe alphabet, as ADK's own JSON uses
        return base64.b64decode(value.encode("ascii"), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise InputError(f"{what}: malformed base64") from None


def image(media_type: Any, data: Any, limits: Limits) -> Image:
    """An image of one of ``IMAGE_TYPES``, its base64 ``data`` within the limit."""
    _check_image_type(media_type, "image: mediaType")
    # Refused before decoding: the text alone tells the size, within 3 bytes.
    if isinstance(data, str) and len(data) * 3 // 4 > limits.max_image_bytes + 3:
        raise InputError(
            f"image: about {len(data) * 3 // 4} bytes exceeds the limit of {limits.max_image_bytes}"
        )
    return image_bytes(media_type, b64(data, "image data"), limits)


def image_bytes(media_type: str, raw: bytes, limits: Limits, what: str = "image") -> Image:
    """An image whose bytes are what ``media_type`` says, within the limit."""
    _check_image_type(media_type, f"{what}: mediaType")
    if len(raw) > limits.max_image_bytes:
        raise InputError(f"{what}: {len(raw)} bytes exceeds the limit of {limits.max_image_bytes}")
    # The declared type is the client's word; the model is given the bytes.
    actual = image_type_of(raw)
    if actual != media_type:
        found = f"those of {actual}" if actual else "no PNG, JPEG or WebP signature"
        raise InputError(f"{what}: declared {media_type}, but its bytes begin with {found}")
    return Image(media_type, raw)


def image_type_of(data: bytes) -> str | None:
    """The type of ``IMAGE_TYPES`` whose signature ``data`` begins with."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):  # SOI, then a marker
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _check_image_type(media_type: Any, what: str) -> None:
    if media_type not in IMAGE_TYPES:
        raise InputError(f"{what} must be one of {list(IMAGE_TYPES)}, got {media_type!r}")


_APP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")


def app_name(value: Any, where: str) -> str:
    """An app's name as a client selects it: ADK's rule for app names (a
    letter, then letters, digits and underscores), at most 128 characters."""
    if not isinstance(value, str):
        raise InputError(f"{where}: expected a string, got {type(value).__name__}")
    if not _APP_NAME.fullmatch(value):
        raise InputError(f"{where}: expected an app name (a letter, then [A-Za-z0-9_])")
    return value
