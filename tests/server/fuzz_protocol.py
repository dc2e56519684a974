"""Fuzz targets for the server's decoders of client messages (issue 13):
``/ws`` frames (`server.live.dialects.decode_frame`, the /ws and /live dialects)
and ``/run_live`` (`server.live.run_live.AdkDialect.decode`, and `parse_query`
for its query string).

Documented outcomes: a decoded message, `fields.InputError` (the client
gets an ``error`` chunk or event and the socket lives) or
`protocol.ProtocolError` with one of the close codes of docs/protocol.md;
for the query, a `ValueError` (the socket is refused).  Anything else ends a
connection as an internal error, and escapes as a finding
(`fuzz_input.documented`).

Run under atheris by benchmarks/fuzz/run.py, and with plain random bytes
by test_protocol_fuzz_smoke.py in CI.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, get_args

from fuzz_input import FuzzInput, check, documented

from audiocore_server.live.dialects import decode_frame
from audiocore_server.live.run_live import AdkDialect, RunLiveQuery, parse_query
from audiocore_server.settings import Settings
from audiocore_server.wire import fields, protocol

_CLOSE_CODES = {
    protocol.CLOSE_UNSUPPORTED_DATA,
    protocol.CLOSE_INVALID_PAYLOAD,
    protocol.CLOSE_MESSAGE_TOO_BIG,
}
_MESSAGES = get_args(protocol.ClientMessage)

# Every key the decoders read, and a few they do not.
_KEYS = [
    "type", "action", "approval", "approvalId", "approved", "audiocore", "binary", "bitDepth",
    "channels", "chunk", "data", "errorText", "format", "mediaType", "output", "input",
    "reason", "sampleRate", "sessionId", "state", "taskId", "text", "timestamp", "toolCallId",
    "turnDetection", "url", "userKey", "messages", "parts", "role", "id", "result", "toolName",
    "filename", "providerMetadata", "echoCancellation", "bogus",
]  # fmt: skip
_TYPES = [
    "start", "audio_chunk", "text", "activity_start", "activity_end", "interrupt", "image",
    "tool_approval", "tool_result", "message", "ping", "audio_control", "task_cancel",
    "unknown", "",
]  # fmt: skip
_STRINGS = [
    "", "a", "user", "assistant", "s16", "f32", "server", "manual", "start", "stop",
    "image/png", "image/jpeg", "text/plain", "data:image/png;base64,iVBORw0KGgo=",
    "output-available", "output-error", "approval-responded", "tool-get_weather",
    "dynamic-tool", "text", "file", "\ud800", "A" * 25, "é" * 40,
]  # fmt: skip


def _value(fi: FuzzInput, depth: int = 0) -> Any:
    """A JSON value, shaped like the protocol's where the input says so."""
    kind = fi.int(0, 11 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return fi.pick([True, False])
    if kind == 2:
        return fi.pick(
            [
                0,
                1,
                16,
                32,
                8000,
                16000,
                48000,
                -1,
                2**53,
                10**400 // 10**390,
                fi.int(-(2**40), 2**40),
            ]
        )
    if kind == 3:
        return fi.pick([0.5, -0.0, 1e308, 16000.0, fi.float()])
    if kind in (4, 5):
        return fi.pick(_STRINGS)
    if kind == 6:
        if fi.chance(4):
            return base64.b64encode(fi.bytes(64)).decode()
        return fi.text(40)
    if kind in (7, 8):
        return [_value(fi, depth + 1) for _ in range(fi.int(0, 3))]
    return {fi.pick(_KEYS): _value(fi, depth + 1) for _ in range(fi.int(0, 4))}


def _dumps(fi: FuzzInput, obj: Any) -> str:
    # NaN, Infinity and lone surrogates are what a client's JSON.stringify
    # never sends but a hostile client can.
    return json.dumps(obj, ensure_ascii=fi.chance(2), allow_nan=True)


def _ws_text(fi: FuzzInput) -> str:
    kind = fi.int(0, 7)
    if kind == 0:
        return fi.text(300)
    if kind == 1:  # deep nesting
        n = fi.pick([10, 63, 64, 65, 200, 5000])
        return "[" * n + "]" * n if fi.int(0, 1) else '{"a":' * n + "1" + "}" * n
    obj = {fi.pick(_KEYS): _value(fi) for _ in range(fi.int(0, 5))}
    if fi.int(0, 7):
        obj["type"] = fi.pick(_TYPES)
    if obj.get("type") == "message" and fi.int(0, 1):
        part = {"type": fi.pick(_STRINGS), "text": _value(fi), "state": _value(fi)}
        obj["messages"] = [{"role": fi.pick(["user", "assistant", 1]), "parts": [part, _value(fi)]}]
    return _dumps(fi, obj)


def _limits(fi: FuzzInput) -> fields.Limits:
    if fi.int(0, 3):
        return fields.Limits()
    return fields.Limits(
        max_message_bytes=fi.pick([0, 64, 300]),
        max_image_bytes=fi.pick([0, 10]),
        max_text_chars=fi.pick([0, 5]),
        max_id_chars=fi.pick([1, 5]),
        max_history_messages=fi.pick([0, 1]),
    )


def _check_decoded(messages: list[Any]) -> None:
    for msg in messages:
        check(isinstance(msg, _MESSAGES), f"decoded to {type(msg).__name__}")


def _close_code_documented(exc: protocol.ProtocolError) -> None:
    check(exc.close_code in _CLOSE_CODES, f"close code {exc.close_code} for a client's frame")


def fuzz_ws_decode(data: bytes) -> None:
    """One /ws frame, binary or text, in a drawn negotiated format."""
    fi = FuzzInput(data)
    fmt = protocol.InputFormat(fi.pick(fields.SUPPORTED_RATES), fi.pick(protocol.INPUT_FORMATS), 1)
    limits = _limits(fi)
    if fi.chance(4):
        message = {"type": "websocket.receive", "bytes": fi.rest()}
    else:
        message = {"type": "websocket.receive", "text": _ws_text(fi)}
    try:
        with documented(fields.InputError):
            _check_decoded([decode_frame(message, fmt, limits)])
    except protocol.ProtocolError as exc:
        _close_code_documented(exc)


_MIMES = [
    "audio/pcm", "audio/pcm;rate=16000", "audio/pcm;rate=48000", "audio/pcm;rate=7",
    "audio/pcm;rate=", "audio/pcm;rate=0016000", "audio/pcmx", "image/png", "image/jpeg",
    "video/mp4", "", "audio/pcm;rate=16000;rate=8000",
]  # fmt: skip


def _blob(fi: FuzzInput) -> dict[str, Any]:
    mime: Any = fi.pick(_MIMES)
    if fi.chance(8):  # a rate of any length, up to past int()'s 4300 digits
        mime = "audio/pcm;rate=" + "9" * fi.pick([9, 10, 4300, 4301, 6000, fi.int(0, 5000)])
    if fi.chance(16):
        mime = _value(fi)
    raw = fi.bytes(200)
    data: Any = fi.pick(
        [
            base64.b64encode(raw).decode(),
            base64.urlsafe_b64encode(raw).decode().rstrip("="),
            "!!!",
            "",
            _value(fi),
        ]
    )
    key = fi.pick(["mime_type", "mimeType", "mime_type", "bogus"])
    blob = {key: mime, "data": data}
    if fi.chance(8):
        blob["displayName"] = "x"
    return blob


def _part(fi: FuzzInput) -> Any:
    kind = fi.int(0, 5)
    if kind == 0:
        return {"text": _value(fi) if fi.chance(4) else fi.text(60)}
    if kind == 1:
        return {"functionCall": {"name": "x", "args": _value(fi)}}
    if kind == 2:
        return {"function_response": {"id": _value(fi), "name": "t", "response": _value(fi)}}
    if kind == 3:
        return {"inlineData": _blob(fi)}
    return _value(fi)


def _live_request(fi: FuzzInput) -> str:
    kind = fi.int(0, 9)
    if kind == 0:
        return fi.text(300)
    if kind <= 4:
        return _dumps(fi, {"blob": _blob(fi)})
    keys = [
        "content", "blob", "activity_start", "activityStart", "activity_end", "activityEnd",
        "audio_stream_end", "audioStreamEnd", "close", "state_delta", "stateDelta", "bogus",
    ]  # fmt: skip
    obj: dict[str, Any] = {}
    for _ in range(fi.int(0, 3)):
        key = fi.pick(keys)
        if key == "content":
            obj[key] = {
                "role": fi.pick(["user", "model", None]),
                "parts": [_part(fi) for _ in range(fi.int(0, 3))],
            }
        elif key == "blob":
            obj[key] = _blob(fi)
        elif key.startswith("activity"):
            obj[key] = fi.pick([{}, None, 1])
        else:
            obj[key] = _value(fi)
    return _dumps(fi, obj)


class _NoRuntime:
    """decode() never reaches the runtime."""


def fuzz_run_live(data: bytes) -> None:
    """A sequence of /run_live frames on one connection (a blob's rate
    sets the format of the binary frames after it)."""
    fi = FuzzInput(data)
    dialect = AdkDialect(RunLiveQuery("app", "u1", "s1"), _NoRuntime())
    limits = _limits(fi)
    fmt = protocol.InputFormat(16_000, "s16", 1)
    for _ in range(fi.int(1, 6)):
        if fi.chance(5):
            message = {"type": "websocket.receive", "bytes": fi.bytes(400)}
        else:
            message = {"type": "websocket.receive", "text": _live_request(fi)}
        try:
            with documented(fields.InputError):
                _check_decoded(list(dialect.decode(message, fmt, limits)))
        except protocol.ProtocolError as exc:
            _close_code_documented(exc)


_SETTINGS = Settings()
_QUERY_NAMES = [
    "app_name", "user_id", "session_id", "modalities", "proactive_audio",
    "enable_affective_dialog", "enable_session_resumption", "save_live_blob",
    "explicit_vad_signal", "bogus",
]  # fmt: skip


def fuzz_run_live_query(data: bytes) -> None:
    """The /run_live query string: a RunLiveQuery, or a ValueError."""
    fi = FuzzInput(data)
    query: dict[str, list[str]] = {}
    for _ in range(fi.int(0, 8)):
        values = [
            fi.pick(["u1", "s1", "TEXT", "AUDIO", "true", "no", "On", "", "x" * 300, fi.text(20)])
            for _ in range(fi.pick([1, 1, 1, 2, 0]))
        ]
        query.setdefault(fi.pick(_QUERY_NAMES), []).extend(values)
    with documented(ValueError):
        result = parse_query(query, _SETTINGS)
        check(isinstance(result, RunLiveQuery), "parse_query result")
        result.run_config(_SETTINGS_RUN_CONFIG)


def _base_run_config() -> Any:
    from google.adk.agents.run_config import RunConfig

    return RunConfig()


_SETTINGS_RUN_CONFIG = _base_run_config()

TARGETS: dict[str, Callable[[bytes], None]] = {
    "ws_decode": fuzz_ws_decode,
    "run_live": fuzz_run_live,
    "run_live_query": fuzz_run_live_query,
}
