"""The incoming half of the /ws wire protocol (docs/protocol.md): pure
decoding of client frames into typed messages. No I/O here; what the server
sends is ``audiocore_server/wire/chunks.py``; an AI SDK chat's ``message`` is decoded by
``audiocore_server/wire/chat_messages.py``, and the validators of single fields, with the
messages both decoders produce, are ``audiocore_server/wire/fields.py``.

Two kinds of failure:

* ``InputError`` (``fields.py``) — a recoverable mistake (bad field,
  malformed base64, unknown type). The caller answers with an ``error``
  chunk and the socket lives.
* ``ProtocolError`` — a violation of the protocol itself. It carries the
  WebSocket close code the caller must close with (1003, 1007, 1008, 1009).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, Literal

from google.genai import types

from . import fields, large_json, strict_json
from .chat_messages import ChatSubmit, decode_chat
from .fields import USER_KEY as USER_KEY
from .fields import Image, InputError, Limits, ToolApproval, ToolResult

# WebSocket close codes (RFC 6455 §7.4.1).
CLOSE_NORMAL = 1000
CLOSE_PROTOCOL_ERROR = 1002
CLOSE_UNSUPPORTED_DATA = 1003
CLOSE_INVALID_PAYLOAD = 1007
CLOSE_POLICY_VIOLATION = 1008
CLOSE_MESSAGE_TOO_BIG = 1009
CLOSE_INTERNAL_ERROR = 1011
CLOSE_TRY_AGAIN_LATER = 1013

INPUT_FORMATS = ("s16", "f32")
SAMPLE_BYTES = {"s16": 2, "f32": 4, "ulaw": 1}  # μ-law: a phone call's (wire/twilio.py)
# Who ends the user's turns: the model's voice activity detection ("server"),
# or the client's activity_start/activity_end alone ("manual", push-to-talk).
TURN_DETECTION = ("server", "manual")
TurnDetection = Literal["server", "manual"]
# Who cancels the echo of the agent's voice in the microphone: the client
# (a browser's own echo cancellation, a headset: the server does nothing), or
# the server, from what it played (audiocore_server/audio/echo.py).
ECHO_CANCELLATION = ("client", "server")
EchoCancellation = Literal["client", "server"]


class ProtocolError(Exception):
    """A protocol violation: close the socket with ``close_code``."""

    def __init__(self, close_code: int, reason: str) -> None:
        super().__init__(reason)
        self.close_code = close_code
        self.reason = reason


class UnparsableJson(InputError):
    """Not JSON, or nested past MAX_JSON_DEPTH (on /ws: close 1007)."""


class NotAnObject(InputError):
    """JSON, but not an object (on /ws: close 1003)."""


# ---------------------------------------------------------------- client frames


@dataclasses.dataclass(frozen=True)
class InputFormat:
    sample_rate: int = 16_000
    format: Literal["s16", "f32", "ulaw"] = "s16"
    channels: int = 1

    @property
    def frame_bytes(self) -> int:
        return SAMPLE_BYTES[self.format] * self.channels


@dataclasses.dataclass(frozen=True)
class OutputFormat:
    sample_rate: int = 24_000
    binary: bool = False


@dataclasses.dataclass(frozen=True)
class Start:
    input: InputFormat
    output: OutputFormat
    session_id: str | None
    turn_detection: TurnDetection | None = None  # None: the server's default
    # A stable key of the user (kept by the client, as unguessable as a
    # session id): their background tasks follow them from session to session.
    user_key: str | None = None
    # The client's IANA time zone, for the tools (get_current_time); None: UTC.
    time_zone: str | None = None
    # The app to talk to (the server's apps: /list-apps); None: the only one.
    app: str | None = None
    echo_cancellation: EchoCancellation = "client"


@dataclasses.dataclass(frozen=True)
class Audio:
    """Audio from a binary frame or an ``audio_chunk``: raw samples, validated."""

    data: bytes
    format: InputFormat


@dataclasses.dataclass(frozen=True)
class Text:
    text: str


@dataclasses.dataclass(frozen=True)
class ActivityStart:
    pass


@dataclasses.dataclass(frozen=True)
class ActivityEnd:
    pass


@dataclasses.dataclass(frozen=True)
class Interrupt:
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class Ping:
    timestamp: float | None


@dataclasses.dataclass(frozen=True)
class AudioControl:
    action: Literal["start", "stop"]


@dataclasses.dataclass(frozen=True)
class UserContent:
    """Content for the model as the client composed it (ADK's ``LiveRequest``
    content), and any session state changes riding on it."""

    content: types.Content | None
    state_delta: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class ToolResponse:
    """A function response for a delegated call, as an ADK client sends it:
    for a call awaiting approval, ``{"confirmed": bool}`` (ADK's confirmation
    convention); otherwise the tool's result."""

    tool_call_id: str
    response: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class TaskCancel:
    task_id: str | None  # None: the newest task still queued or running


@dataclasses.dataclass(frozen=True)
class Close:
    """The client is done: end the model's run, then the connection."""


ClientMessage = (
    Start
    | Audio
    | Text
    | ActivityStart
    | ActivityEnd
    | Interrupt
    | Image
    | ToolApproval
    | ToolResult
    | ChatSubmit
    | Ping
    | AudioControl
    | UserContent
    | ToolResponse
    | TaskCancel
    | Close
)


def decode_binary(data: bytes, fmt: InputFormat, limits: Limits) -> Audio:
    """A binary frame: audio in the negotiated input format."""
    if len(data) > limits.max_message_bytes:
        raise ProtocolError(
            CLOSE_MESSAGE_TOO_BIG,
            f"message of {len(data)} bytes exceeds the limit of {limits.max_message_bytes}",
        )
    _check_whole_frames(len(data), fmt)
    return Audio(data, fmt)


MAX_JSON_DEPTH = 64  # deeper is refused before anything walks it
# Objects and arrays in one message (braces and brackets in its texts
# count too): a 2,000-message history of text is about 6,000.
MAX_JSON_CONTAINERS = 20_000
_SURROGATE = re.compile("[\ud800-\udfff]")


def load_json(raw: str, limits: Limits) -> dict[str, Any]:
    """One JSON object, size- and depth-checked; ``InputError`` otherwise."""
    if len(raw) > limits.max_message_bytes:
        raise ProtocolError(
            CLOSE_MESSAGE_TOO_BIG,
            f"message of {len(raw)} characters exceeds the limit of {limits.max_message_bytes}",
        )
    # Objects and arrays, counted before any is built (two fast scans): past
    # the bound, a frame would be thousands of containers for the garbage
    # collector to walk, on the loop every conversation shares.
    containers = raw.count("{") + raw.count("[")
    if containers > MAX_JSON_CONTAINERS:
        raise InputError(
            f"message: about {containers} JSON objects and arrays exceeds the limit of "
            f"{MAX_JSON_CONTAINERS}"
        )
    try:
        obj = large_json.loads(raw, MAX_JSON_DEPTH)
    except strict_json.NonFiniteNumber as exc:
        raise InputError(str(exc)) from None
    except (RecursionError, large_json.TooDeep):
        raise UnparsableJson(f"expected JSON nested at most {MAX_JSON_DEPTH} deep") from None
    except ValueError as exc:
        raise UnparsableJson(f"expected a JSON text frame: {exc}") from None
    if containers > MAX_JSON_DEPTH or not raw.isascii() or "\\u" in raw:
        check_json_tree(obj)
    # Else nothing to find: no deeper than its containers, and a lone
    # surrogate in ASCII JSON is an escape. (Every audio message of /run_live.)
    if not isinstance(obj, dict):
        raise NotAnObject(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def check_json_tree(obj: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Without recursion (nothing may recurse on a client's nesting): at most
    ``limit`` deep, and no lone surrogates ("\\ud800" is valid JSON but no
    text: the model layer cannot encode it, and its run would die later).
    Level by level: every audio message passes here."""
    level: list[Any] = [obj]
    depth = 1
    while level:
        below: list[Any] = []
        for value in level:
            if isinstance(value, str):
                if not value.isascii() and _SURROGATE.search(value):
                    raise InputError("expected text without lone surrogates (\\ud800-\\udfff)")
            elif isinstance(value, (dict, list)):
                if depth > limit:
                    raise UnparsableJson(f"expected JSON nested at most {limit} deep")
                below += value  # a dict's keys
                if isinstance(value, dict):
                    below += value.values()
        level = below
        depth += 1


def decode_text(raw: str, fmt: InputFormat, limits: Limits) -> ClientMessage:
    """A text frame: one JSON object with a string ``type``."""
    try:
        obj = load_json(raw, limits)
    except UnparsableJson as exc:  # not our protocol at all: close
        raise ProtocolError(CLOSE_INVALID_PAYLOAD, str(exc)) from None
    except NotAnObject as exc:
        raise ProtocolError(CLOSE_UNSUPPORTED_DATA, str(exc)) from None
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(CLOSE_UNSUPPORTED_DATA, 'expected a JSON object with a string "type"')
    decoder = _DECODERS.get(kind)
    if decoder is None:
        raise InputError(f"unknown message type {kind!r}; expected one of {sorted(_DECODERS)}")
    return decoder(obj, fmt, limits)


def _decode_start(obj: dict[str, Any], fmt: InputFormat, limits: Limits) -> Start:
    inp = fields.optional_object(obj, "input")
    out = fields.optional_object(obj, "output")
    defaults_in, defaults_out = InputFormat(), OutputFormat()
    rate = fields.sample_rate(inp.get("sampleRate", defaults_in.sample_rate), "input.sampleRate")
    form = inp.get("format", defaults_in.format)
    if form not in INPUT_FORMATS:
        raise InputError(f"input.format: expected one of {list(INPUT_FORMATS)}, got {form!r}")
    channels = inp.get("channels", 1)
    if channels != 1 or isinstance(channels, bool):
        raise InputError(f"input.channels: only mono input is supported, got {channels!r}")
    out_rate = fields.sample_rate(
        out.get("sampleRate", defaults_out.sample_rate), "output.sampleRate"
    )
    binary = out.get("binary", False)
    if not isinstance(binary, bool):
        raise InputError(f"output.binary: expected a boolean, got {binary!r}")
    session_id = obj.get("sessionId")
    if session_id is not None and not isinstance(session_id, str):
        raise InputError(f"sessionId: expected a string, got {type(session_id).__name__}")
    user_key = fields.user_key(obj.get("userKey"))
    turn_detection = obj.get("turnDetection")
    if turn_detection is not None and turn_detection not in TURN_DETECTION:
        raise InputError(
            f"turnDetection: expected one of {list(TURN_DETECTION)}, got {turn_detection!r}"
        )
    echo = obj.get("echoCancellation")
    if echo is not None and echo not in ECHO_CANCELLATION:
        raise InputError(
            f"echoCancellation: expected one of {list(ECHO_CANCELLATION)}, got {echo!r}"
        )
    zone = obj.get("timeZone")
    app = obj.get("app")
    return Start(
        InputFormat(rate, form, 1),
        OutputFormat(out_rate, binary),
        session_id or None,
        turn_detection,
        user_key,
        None if zone is None else fields.time_zone(zone, "timeZone"),
        None if app is None else fields.app_name(app, "app"),
        echo or "client",  # absent or null, as the other fields: the default
    )


def _decode_audio_chunk(obj: dict[str, Any], fmt: InputFormat, limits: Limits) -> Audio:
    # Nested ({"data": {"chunk", …}}) and flat ({"chunk", …}): both seed shapes.
    data = obj.get("data", obj)
    if not isinstance(data, dict):
        raise InputError('audio_chunk: expected "data" to be an object')
    rate = fields.sample_rate(data.get("sampleRate", fmt.sample_rate), "audio_chunk sampleRate")
    channels = data.get("channels", 1)
    bit_depth = data.get("bitDepth", 16)
    if channels != 1 or isinstance(channels, bool):
        raise InputError(f"audio_chunk: only mono audio is supported, got channels={channels!r}")
    if bit_depth not in (16, 32) or isinstance(bit_depth, bool):
        raise InputError(f"audio_chunk: bitDepth must be 16 (s16) or 32 (f32), got {bit_depth!r}")
    chunk_fmt = InputFormat(rate, "s16" if bit_depth == 16 else "f32", 1)
    if chunk_fmt != fmt:
        raise InputError(
            f"audio_chunk: expected {fmt.format} at {fmt.sample_rate} Hz (the negotiated input), "
            f"got {chunk_fmt.format} at {rate} Hz; negotiate with start first"
        )
    pcm = fields.b64(data.get("chunk"), "audio_chunk chunk")
    _check_whole_frames(len(pcm), fmt)
    return Audio(pcm, fmt)


def _decode_text_turn(obj: dict[str, Any], fmt: InputFormat, limits: Limits) -> Text:
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InputError('text: expected a non-empty string "text"')
    if len(text) > limits.max_text_chars:
        raise InputError(
            f"text: {len(text)} characters exceeds the limit of {limits.max_text_chars}"
        )
    return Text(text)


def _decode_image(obj: dict[str, Any], fmt: InputFormat, limits: Limits) -> Image:
    return fields.image(obj.get("mediaType"), obj.get("data"), limits)


def _decode_tool_approval(obj: dict[str, Any], fmt: InputFormat, limits: Limits) -> ToolApproval:
    approval_id, approved = obj.get("approvalId"), obj.get("approved")
    if not isinstance(approved, bool):
        raise InputError('tool_approval: expected string "approvalId" and boolean "approved"')
    return ToolApproval(
        fields.identifier(approval_id, "tool_approval approvalId", limits),
        approved,
        fields.optional_text(obj.get("reason"), "tool_approval reason", limits),
        payload=fields.approval_payload(obj.get("payload"), "tool_approval payload"),
    )


def _decode_tool_result(obj: dict[str, Any], fmt: InputFormat, limits: Limits) -> ToolResult:
    nested = obj.get("data")
    if isinstance(nested, dict):
        # The seeds' older shape: {"data": {"toolCallId", "result", "status"}}.
        call_id = fields.identifier(nested.get("toolCallId"), "tool_result data.toolCallId", limits)
        status = nested.get("status", "approved")
        if status not in ("approved", "rejected"):
            raise InputError(
                f'tool_result: data.status must be "approved" or "rejected", got {status!r}'
            )
        if status == "rejected":
            return ToolResult(call_id, error_text="the user rejected running the tool")
        if "result" not in nested:
            raise InputError('tool_result: expected a "result" in data')
        return ToolResult(call_id, output=nested["result"])
    call_id = fields.identifier(obj.get("toolCallId"), "tool_result toolCallId", limits)
    if "errorText" in obj:
        error = fields.optional_text(obj["errorText"], "tool_result errorText", limits)
        return ToolResult(call_id, error_text=error or "the tool failed")
    for key in ("output", "result"):  # ours, and the seed's flat shape
        if key in obj:
            return ToolResult(call_id, output=obj[key])
    raise InputError('tool_result: expected "output" (or "errorText") with "toolCallId"')


def _decode_message(obj: dict[str, Any], fmt: InputFormat, limits: Limits) -> ChatSubmit:
    return decode_chat(obj, limits)


def _decode_interrupt(obj: dict[str, Any], fmt: InputFormat, limits: Limits) -> Interrupt:
    return Interrupt(fields.optional_text(obj.get("reason"), "interrupt reason", limits))


def _decode_task_cancel(obj: dict[str, Any], fmt: InputFormat, limits: Limits) -> TaskCancel:
    task_id = obj.get("taskId")
    return TaskCancel(
        None if task_id is None else fields.identifier(task_id, "task_cancel taskId", limits)
    )


def _decode_ping(obj: dict[str, Any], fmt: InputFormat, limits: Limits) -> Ping:
    timestamp = obj.get("timestamp")
    if timestamp is not None and (
        isinstance(timestamp, bool) or not isinstance(timestamp, (int, float))
    ):
        raise InputError(f"ping: timestamp must be a number, got {type(timestamp).__name__}")
    return Ping(timestamp)


def _decode_audio_control(obj: dict[str, Any], fmt: InputFormat, limits: Limits) -> AudioControl:
    action = obj.get("action")
    if action not in ("start", "stop"):
        raise InputError(f'audio_control: action must be "start" or "stop", got {action!r}')
    return AudioControl(action)


_Decoder = Callable[[dict[str, Any], InputFormat, Limits], ClientMessage]


def _no_fields(kind: Callable[[], ClientMessage]) -> _Decoder:
    return lambda obj, fmt, limits: kind()


_DECODERS: dict[str, _Decoder] = {
    "start": _decode_start,
    "audio_chunk": _decode_audio_chunk,
    "text": _decode_text_turn,
    "activity_start": _no_fields(ActivityStart),
    "activity_end": _no_fields(ActivityEnd),
    "interrupt": _decode_interrupt,
    "image": _decode_image,
    "tool_approval": _decode_tool_approval,
    "tool_result": _decode_tool_result,
    "message": _decode_message,
    "ping": _decode_ping,
    "audio_control": _decode_audio_control,
    "task_cancel": _decode_task_cancel,
}


def _check_whole_frames(n_bytes: int, fmt: InputFormat) -> None:
    if n_bytes % fmt.frame_bytes:
        raise InputError(
            f"audio: expected a multiple of {fmt.frame_bytes} bytes ({fmt.format}, "
            f"{fmt.channels} channel), got {n_bytes}"
        )
