"""What the local OpenAI Realtime endpoint accepts: every client event checked
against the GA Realtime API (the ``openai`` package's types, OpenAI's
realtime guide; /work notes in docs/providers.md), each refusal an
``InvalidEvent`` the endpoint answers as the service does, with an ``error``
event naming the code, the message and the parameter."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

RATE = 24_000
PCM_FORMAT = {"type": "audio/pcm", "rate": RATE}
VOICES = frozenset(
    ["alloy", "ash", "ballad", "coral", "echo", "sage", "shimmer", "verse", "marin", "cedar"]
)  # the GA voices
MAX_APPEND_BYTES = 15 * 1024 * 1024  # one input_audio_buffer.append, at most

CLIENT_EVENTS = frozenset(
    {
        "session.update",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "input_audio_buffer.clear",
        "conversation.item.create",
        "conversation.item.retrieve",
        "conversation.item.truncate",
        "conversation.item.delete",
        "response.create",
        "response.cancel",
    }
)
_SESSION_FIELDS = frozenset(
    {
        "type",
        "output_modalities",
        "instructions",
        "model",
        "max_output_tokens",
        "audio",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "truncation",
        "include",
        "prompt",
        "tracing",
    }
)
_TURN_DETECTION_FIELDS = {
    "type": str,
    "threshold": (int, float),
    "prefix_padding_ms": int,
    "silence_duration_ms": int,
    "idle_timeout_ms": int,
    "create_response": bool,
    "interrupt_response": bool,
    "eagerness": str,
}
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class InvalidEvent(ValueError):
    def __init__(
        self, message: str, *, code: str = "invalid_value", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


def _expect(ok: bool, message: str, param: str, code: str = "invalid_value") -> None:
    if not ok:
        raise InvalidEvent(message, code=code, param=param)


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _object(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidEvent(
            f"Invalid type for '{param}': expected an object, but got {_type_name(value)} instead.",
            code="invalid_type",
            param=param,
        )
    return value


def _known(fields: dict[str, Any], allowed: frozenset[str] | set[str], prefix: str) -> None:
    for key in fields:
        _expect(
            key in allowed,
            f"Unknown parameter: '{prefix}.{key}'.",
            f"{prefix}.{key}",
            "unknown_parameter",
        )


def check_event(event: Any) -> dict[str, Any]:
    """The event, if it is an object with a known ``type``."""
    event = _object(event, "event")
    kind = event.get("type")
    _expect(
        isinstance(kind, str),
        "Missing required parameter: 'type'.",
        "type",
        "missing_required_parameter",
    )
    _expect(kind in CLIENT_EVENTS, f"Invalid value: '{kind}'. Unknown event type.", "type")
    event_id = event.get("event_id")
    _expect(event_id is None or isinstance(event_id, str), "event_id must be a string", "event_id")
    return event


def check_session(session: Any) -> dict[str, Any]:
    """A ``session.update``'s session (only the fields it has are updated)."""
    session = _object(session, "session")
    _known(session, _SESSION_FIELDS, "session")
    _expect(
        session.get("type") == "realtime",
        "Missing or invalid 'session.type': expected 'realtime'.",
        "session.type",
    )
    if "output_modalities" in session:
        _expect(
            session["output_modalities"] in (["audio"], ["text"]),
            "session.output_modalities: expected ['audio'] or ['text']",
            "session.output_modalities",
        )
    if "instructions" in session:
        _expect(
            isinstance(session["instructions"], str),
            "session.instructions: expected a string",
            "session.instructions",
            "invalid_type",
        )
    if "audio" in session:
        audio = _object(session["audio"], "session.audio")
        _known(audio, {"input", "output"}, "session.audio")
        if "input" in audio:
            _check_input(_object(audio["input"], "session.audio.input"))
        if "output" in audio:
            output = _object(audio["output"], "session.audio.output")
            _known(output, {"format", "voice", "speed"}, "session.audio.output")
            if "format" in output:
                _check_format(output["format"], "session.audio.output.format")
            if "voice" in output:
                voice = output["voice"]
                _expect(
                    voice in VOICES or (isinstance(voice, dict) and "id" in voice),
                    f"Invalid value: '{voice}'. Supported values are: {sorted(VOICES)}.",
                    "session.audio.output.voice",
                )
    if "tools" in session:
        tools = session["tools"]
        _expect(
            isinstance(tools, list),
            "session.tools: expected an array",
            "session.tools",
            "invalid_type",
        )
        for i, tool in enumerate(tools):
            _check_tool(_object(tool, f"session.tools[{i}]"), f"session.tools[{i}]")
    return session


def _check_input(audio_in: dict[str, Any]) -> None:
    _known(
        audio_in,
        {"format", "transcription", "turn_detection", "noise_reduction"},
        "session.audio.input",
    )
    if "format" in audio_in:
        _check_format(audio_in["format"], "session.audio.input.format")
    if "transcription" in audio_in and audio_in["transcription"] is not None:
        transcription = _object(audio_in["transcription"], "session.audio.input.transcription")
        _expect(
            isinstance(transcription.get("model"), str),
            "session.audio.input.transcription.model: expected a string",
            "session.audio.input.transcription.model",
        )
    detection = audio_in.get("turn_detection")
    if detection is not None:
        param = "session.audio.input.turn_detection"
        detection = _object(detection, param)
        _known(detection, set(_TURN_DETECTION_FIELDS), param)
        _expect(
            detection.get("type") in ("server_vad", "semantic_vad"),
            f"{param}.type: expected 'server_vad' or 'semantic_vad'",
            f"{param}.type",
        )
        for key, value in detection.items():
            kinds = _TURN_DETECTION_FIELDS[key]
            _expect(
                isinstance(value, kinds) and not (isinstance(value, bool) and kinds is int),
                f"{param}.{key}: wrong type",
                f"{param}.{key}",
                "invalid_type",
            )


def _check_format(fmt: Any, param: str) -> None:
    fmt = _object(fmt, param)
    kind = fmt.get("type")
    _expect(
        kind in ("audio/pcm", "audio/pcmu", "audio/pcma"),
        f"Invalid value: '{kind}'. Supported values are: 'audio/pcm', 'audio/pcmu' and "
        "'audio/pcma'.",
        f"{param}.type",
    )
    if kind == "audio/pcm":
        _expect(
            fmt.get("rate", RATE) == RATE,
            f"Invalid value: {fmt.get('rate')}. Supported values are: 24000.",
            f"{param}.rate",
        )


def _check_tool(tool: dict[str, Any], param: str) -> None:
    _expect(tool.get("type") == "function", f"{param}.type: expected 'function'", f"{param}.type")
    _known(tool, {"type", "name", "description", "parameters"}, param)
    name = tool.get("name")
    _expect(
        isinstance(name, str) and bool(_TOOL_NAME.match(name)),
        f"{param}.name: expected a string matching {_TOOL_NAME.pattern}",
        f"{param}.name",
    )
    _expect(
        isinstance(tool.get("description", ""), str),
        f"{param}.description: expected a string",
        f"{param}.description",
        "invalid_type",
    )
    parameters = _object(tool.get("parameters", {"type": "object"}), f"{param}.parameters")
    _expect(
        parameters.get("type") == "object",
        f"{param}.parameters: expected a JSON Schema of type 'object'",
        f"{param}.parameters.type",
    )


def decode_audio(audio: Any, param: str = "audio") -> bytes:
    """Base64 PCM16: a whole number of samples."""
    _expect(
        isinstance(audio, str),
        f"Invalid type for '{param}': expected a string.",
        param,
        "invalid_type",
    )
    _expect(len(audio) <= MAX_APPEND_BYTES * 4 // 3 + 4, f"'{param}' is larger than 15 MiB", param)
    try:
        pcm = base64.b64decode(audio, validate=True)
    except binascii.Error:
        raise InvalidEvent(f"Invalid '{param}': not valid base64.", param=param) from None
    _expect(
        len(pcm) % 2 == 0,
        f"Invalid '{param}': {len(pcm)} bytes is not a whole number of 16-bit samples.",
        param,
    )
    return pcm


def check_item(item: Any, issued_calls: dict[str, str], answered: set[str]) -> dict[str, Any]:
    """A ``conversation.item.create``'s item: a message, or the output of a
    function call that was issued and not answered yet."""
    item = _object(item, "item")
    kind = item.get("type")
    if kind == "function_call":
        _known(item, {"type", "id", "call_id", "name", "arguments", "status", "object"}, "item")
        for field in ("call_id", "name", "arguments"):
            _expect(
                isinstance(item.get(field), str) and bool(item[field]),
                f"item.{field}: expected a non-empty string",
                f"item.{field}",
                "invalid_type",
            )
        _expect(
            item["call_id"] not in issued_calls,
            f"function call '{item['call_id']}' is already in the conversation",
            "item.call_id",
        )
        try:
            json.loads(item["arguments"])
        except ValueError:
            _expect(False, "item.arguments: expected a JSON string", "item.arguments")
        return item
    if kind == "function_call_output":
        _known(item, {"type", "id", "call_id", "output"}, "item")
        call_id = item.get("call_id")
        _expect(
            isinstance(call_id, str) and call_id in issued_calls,
            f"Invalid 'item.call_id': no function call with call_id '{call_id}'.",
            "item.call_id",
        )
        _expect(
            call_id not in answered,
            f"function call '{call_id}' already has an output",
            "item.call_id",
        )
        _expect(
            isinstance(item.get("output"), str),
            "item.output: expected a string",
            "item.output",
            "invalid_type",
        )
        return item
    _expect(
        kind == "message",
        f"Invalid value: '{kind}'. Supported item types here: "
        "'message', 'function_call', 'function_call_output'.",
        "item.type",
    )
    _known(item, {"type", "id", "role", "content", "status", "object"}, "item")
    role = item.get("role")
    _expect(role in ("user", "assistant", "system"), f"Invalid 'item.role': {role!r}", "item.role")
    content = item.get("content")
    _expect(
        isinstance(content, list) and bool(content),
        "item.content: expected a non-empty array",
        "item.content",
    )
    allowed = {
        "user": {"input_text", "input_audio", "input_image"},
        "system": {"input_text"},
        "assistant": {"output_text", "output_audio"},
    }[role]
    for i, part in enumerate(content):
        part = _object(part, f"item.content[{i}]")
        _expect(
            part.get("type") in allowed,
            f"Invalid 'item.content[{i}].type' for role {role}: {part.get('type')!r}",
            f"item.content[{i}].type",
        )
        if part["type"] in ("input_text", "output_text"):
            _expect(
                isinstance(part.get("text"), str),
                "text: expected a string",
                f"item.content[{i}].text",
                "invalid_type",
            )
        elif part["type"] == "input_image":
            url = part.get("image_url")
            _expect(
                isinstance(url, str) and url.startswith("data:image/"),
                "image_url: expected a data:image/… URI",
                f"item.content[{i}].image_url",
            )
        elif part["type"] == "input_audio":
            decode_audio(part.get("audio"), f"item.content[{i}].audio")
    return item


def check_truncate(event: dict[str, Any], audio_ms: dict[str, int]) -> tuple[str, int]:
    """(item id, audio_end_ms) of a truncation of an assistant audio item,
    within that item's audio."""
    item_id = event.get("item_id")
    _expect(
        isinstance(item_id, str) and item_id in audio_ms,
        "Only model output audio messages can be truncated",
        "item_id",
    )
    _expect(event.get("content_index") == 0, "content_index: expected 0", "content_index")
    end = event.get("audio_end_ms")
    _expect(
        isinstance(end, int) and not isinstance(end, bool) and end >= 0,
        "audio_end_ms: expected a non-negative integer",
        "audio_end_ms",
        "invalid_type",
    )
    _expect(
        end <= audio_ms[item_id],
        f"Audio content of {audio_ms[item_id]}ms is already shorter than {end}ms",
        "audio_end_ms",
    )
    return item_id, end
