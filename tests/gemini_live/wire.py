"""The Live API's JSON protocol (``BidiGenerateContent``), as the endpoint reads it.

Pure: parsing and validation, no I/O. Everything a client sends is checked
against Google's reference (https://ai.google.dev/api/live) and the facts in
``/work/shared/GEMINI_LIVE_NOTES.md`` (checked against google-genai 2.34):

* proto-JSON is lenient about spelling: every key is accepted in lowerCamel
  and in snake_case, at every level (genai sends nested keys snake_case);
* bytes are base64 in either alphabet, padded or not;
* anything malformed closes the socket the way Gemini does, with a close code
  and a reason (``Refusal``), never with a JSON error body.

Where Google's exact answer is not documented, the choice is marked
"assumed" and follows what Google does elsewhere (1007 for an invalid
argument, as for REST's 400 INVALID_ARGUMENT).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

# ---------------------------------------------------------------- close codes

CLOSE_NORMAL = 1000
CLOSE_INVALID = 1007  # bad key, bad argument, protocol violation
CLOSE_POLICY = 1008  # unknown model, unknown entity
CLOSE_INTERNAL = 1011  # internal error, connection lifetime reached

INVALID_ARGUMENT = "Request contains an invalid argument."
KEY_NOT_FOUND = "API Key not found. Please pass a valid API key."
KEY_INVALID = "API key not valid. Please pass a valid API key."
EXPLICIT_ACTIVITY = (
    "Explicit activity control is not supported when automatic activity detection is enabled."
)
DEADLINE = "Deadline expired before operation could complete."
INTERNAL = "Internal error encountered."
NOT_FOUND = "Requested entity was not found."  # third-party reports (google-gemini/…-js#487)
MAX_REASON_BYTES = 123  # RFC 6455: a close frame's reason is at most 123 bytes


class Refusal(Exception):
    """Close the socket with ``code`` and ``reason``; ``detail`` is for the
    test log only (Google's reasons are terse)."""

    def __init__(self, code: int, reason: str, detail: str = "") -> None:
        super().__init__(f"{code} {reason}" + (f" ({detail})" if detail else ""))
        self.code = code
        self.reason = reason.encode()[:MAX_REASON_BYTES].decode(errors="ignore")
        self.detail = detail or reason


def invalid(detail: str) -> Refusal:
    return Refusal(CLOSE_INVALID, INVALID_ARGUMENT, detail)


# ---------------------------------------------------------------- models


# Live models the Gemini API serves, by what their clients must do
# differently ("3.x": several parts per message, tool calls answered before
# turnComplete; "2.5": one part per message, turnComplete after tool calls).
# Sources: https://ai.google.dev/gemini-api/docs/models/gemini-3.8-live,
# https://ai.google.dev/gemini-api/docs/models (3.8-live-extended-thinking),
# https://ai.google.dev/gemini-api/docs/models/gemini-3.1-flash-live-preview,
# https://ai.google.dev/gemini-api/docs/models/gemini-2.5-flash-native-audio-preview-12-2025
# (input token limit 131,072 for each).
@dataclasses.dataclass(frozen=True)
class LiveModel:
    family: str  # "3.x" or "2.5"
    context_tokens: int = 131_072


LIVE_MODELS = {
    "gemini-3.8-live": LiveModel("3.x"),
    "gemini-3.8-live-extended-thinking": LiveModel("3.x"),
    "gemini-3.1-flash-live-preview": LiveModel("3.x"),
    "gemini-2.5-flash-native-audio-preview-12-2025": LiveModel("2.5"),
}

# The 30 prebuilt voices (https://ai.google.dev/gemini-api/docs/speech-generation#voices;
# the Live API's "30 HD voices").
VOICES = frozenset(
    [
        "Zephyr",
        "Puck",
        "Charon",
        "Kore",
        "Fenrir",
        "Leda",
        "Orus",
        "Aoede",
        "Callirrhoe",
        "Autonoe",
        "Enceladus",
        "Iapetus",
        "Umbriel",
        "Algieba",
        "Despina",
        "Erinome",
        "Algenib",
        "Rasalgethi",
        "Laomedeia",
        "Achernar",
        "Alnilam",
        "Schedar",
        "Gacrux",
        "Pulcherrima",
        "Achird",
        "Zubenelgenubi",
        "Vindemiatrix",
        "Sadachbia",
        "Sadaltager",
        "Sulafat",
    ]
)
_LANGUAGE = re.compile(r"[a-z]{2,3}-[A-Z]{2}|[a-z]{2,3}-[A-Z][a-z]{3}-[A-Z]{2}|ar-XA")
_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")
_SENSITIVITY = {
    "start": {"START_SENSITIVITY_UNSPECIFIED", "START_SENSITIVITY_HIGH", "START_SENSITIVITY_LOW"},
    "end": {"END_SENSITIVITY_UNSPECIFIED", "END_SENSITIVITY_HIGH", "END_SENSITIVITY_LOW"},
}
_ACTIVITY_HANDLING = {
    "ACTIVITY_HANDLING_UNSPECIFIED",
    "START_OF_ACTIVITY_INTERRUPTS",
    "NO_INTERRUPTION",
}
_TURN_COVERAGE = {
    "TURN_COVERAGE_UNSPECIFIED",
    "TURN_INCLUDES_ONLY_ACTIVITY",
    "TURN_INCLUDES_ALL_INPUT",
    "TURN_INCLUDES_AUDIO_ACTIVITY_AND_ALL_VIDEO",
}
_PCM = re.compile(r"audio/pcm(?:;\s*rate=(\d+))?")
INPUT_RATES = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)


# ---------------------------------------------------------------- lenient access


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def get(obj: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """``obj[name]`` under its lowerCamel or its snake_case spelling."""
    if name in obj:
        return obj[name]
    return obj.get(snake(name), default)


def check_fields(obj: Any, allowed: Iterable[str], where: str) -> Mapping[str, Any]:
    """An object whose keys are all known (either spelling)."""
    if not isinstance(obj, Mapping):
        raise invalid(f"{where}: expected an object, got {type(obj).__name__}")
    known = set(allowed) | {snake(a) for a in allowed}
    for key in obj:
        if key not in known:
            # Assumed for Live (REST's wording for an unknown field).
            raise Refusal(
                CLOSE_INVALID,
                f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}': "
                "Cannot find field.",
            )
    return obj


def decode_bytes(data: Any, where: str) -> bytes:
    """Base64 in the standard or the URL-safe alphabet, padded or not (not both
    alphabets at once: genai's own decoder refuses a mix too)."""
    if not isinstance(data, str):
        raise invalid(f"{where}: expected base64 text")
    if "-" in data or "_" in data:
        if "+" in data or "/" in data:
            raise invalid(f"{where}: base64 mixes alphabets")
        data = data.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise invalid(f"{where}: bad base64 ({exc})") from None


def encode_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")  # Google sends the standard alphabet


def pcm_rate(mime_type: Any, where: str) -> int:
    """The sample rate of an ``audio/pcm;rate=N`` blob (16 kHz when absent, as documented)."""
    match = _PCM.fullmatch(mime_type) if isinstance(mime_type, str) else None
    if match is None:
        raise invalid(f"{where}: expected audio/pcm;rate=N, got {mime_type!r}")
    rate = int(match.group(1) or 16_000)
    if rate not in INPUT_RATES:
        raise invalid(f"{where}: unsupported rate {rate}")
    return rate


# ---------------------------------------------------------------- setup


@dataclasses.dataclass
class FunctionDecl:
    name: str
    parameters: Mapping[str, Any]  # JSON Schema or OpenAPI Schema, as sent
    behavior: str = "BLOCKING"


@dataclasses.dataclass
class Setup:
    """What a valid ``setup`` asked for."""

    model: str  # without "models/"
    info: LiveModel
    voice: str | None
    language: str | None
    input_transcription: bool
    output_transcription: bool
    automatic_activity_detection: bool
    silence_duration_ms: int | None
    prefix_padding_ms: int | None
    interrupts: bool  # activityHandling: speech interrupts the model
    functions: dict[str, FunctionDecl]
    system_instruction: str
    resumption: bool  # sessionResumption present: send handles
    resume_handle: str | None
    compression: bool  # contextWindowCompression.slidingWindow present
    trigger_tokens: int | None
    target_tokens: int | None
    history_in_client_content: bool
    raw: Mapping[str, Any]


_SETUP_FIELDS = (
    "model",
    "generationConfig",
    "systemInstruction",
    "tools",
    "realtimeInputConfig",
    "sessionResumption",
    "contextWindowCompression",
    "inputAudioTranscription",
    "outputAudioTranscription",
    "proactivity",
    "historyConfig",
    "explicitVadSignal",
    "avatarConfig",
    "safetySettings",
)
_GENERATION_FIELDS = (
    "candidateCount",
    "maxOutputTokens",
    "temperature",
    "topP",
    "topK",
    "presencePenalty",
    "frequencyPenalty",
    "responseModalities",
    "speechConfig",
    "mediaResolution",
    "seed",
    "thinkingConfig",
    "enableAffectiveDialog",
    "translationConfig",
)


def parse_setup(message: Any, api_version: str) -> Setup:
    if not isinstance(message, Mapping) or set(message) != {"setup"}:
        raise invalid("the first message must be exactly {setup: …}")
    setup = check_fields(message["setup"], _SETUP_FIELDS, "setup")
    model = get(setup, "model")
    name = model[len("models/") :] if isinstance(model, str) and model.startswith("models/") else ""
    info = LIVE_MODELS.get(name)
    if info is None:
        raise Refusal(
            CLOSE_POLICY,
            f"{model} is not found for API version {api_version}, or is not supported for "
            "bidiGenerateContent. Call ListModels to see the list of available models and "
            "their supported methods.",
        )
    generation = check_fields(
        get(setup, "generationConfig", {}), _GENERATION_FIELDS, "setup.generation_config"
    )
    modalities = get(generation, "responseModalities", ["AUDIO"])
    # Native-audio Live models answer in speech only.
    if modalities != ["AUDIO"]:
        raise invalid(f"response modalities {modalities!r}: this model answers with AUDIO only")
    voice, language = _speech(get(generation, "speechConfig"))
    if info.family == "3.x":
        # gemini-3.8-live's migration notes: both are errors now.
        if get(generation, "enableAffectiveDialog") is not None:
            raise invalid("enable_affective_dialog was removed for this model")
        if get(get(generation, "thinkingConfig") or {}, "thinkingLevel") is not None:
            raise invalid("thinking_level is not supported by this model")
        proactivity = get(setup, "proactivity") or {}
        if get(proactivity, "proactiveAudio") is False:
            raise invalid("proactive_audio cannot be turned off for this model")
    if get(setup, "explicitVadSignal") is not None:
        raise invalid("explicit_vad_signal is Vertex only")
    automatic, silence, padding, interrupts = _realtime_input(get(setup, "realtimeInputConfig"))
    resumption = get(setup, "sessionResumption")
    handle = None
    if resumption is not None:
        check_fields(resumption, ("handle", "transparent"), "setup.session_resumption")
        if get(resumption, "transparent"):
            raise invalid("transparent session resumption is Vertex only")
        handle = get(resumption, "handle")
        if handle is not None and not (isinstance(handle, str) and handle):
            raise invalid("session_resumption.handle must be a non-empty string")
    compression, trigger, target = _compression(get(setup, "contextWindowCompression"))
    history = get(setup, "historyConfig")
    if history is not None:
        check_fields(history, ("initialHistoryInClientContent",), "setup.history_config")
    for key in ("inputAudioTranscription", "outputAudioTranscription"):
        config = get(setup, key)
        if config is not None:
            check_fields(config, ("languageCodes", "customVocabulary"), f"setup.{snake(key)}")
    return Setup(
        model=name,
        info=info,
        voice=voice,
        language=language,
        input_transcription=get(setup, "inputAudioTranscription") is not None,
        output_transcription=get(setup, "outputAudioTranscription") is not None,
        automatic_activity_detection=automatic,
        silence_duration_ms=silence,
        prefix_padding_ms=padding,
        interrupts=interrupts,
        functions=_functions(get(setup, "tools")),
        system_instruction=_instruction(get(setup, "systemInstruction")),
        resumption=resumption is not None,
        resume_handle=handle,
        compression=compression,
        trigger_tokens=trigger,
        target_tokens=target,
        history_in_client_content=bool(history and get(history, "initialHistoryInClientContent")),
        raw=setup,
    )


def _speech(config: Any) -> tuple[str | None, str | None]:
    if config is None:
        return None, None
    config = check_fields(
        config,
        ("voiceConfig", "languageCode", "multiSpeakerVoiceConfig"),
        "setup.generation_config.speech_config",
    )
    if get(config, "multiSpeakerVoiceConfig") is not None:
        raise invalid("multi-speaker voices are not supported by the Live API")
    voice = None
    voice_config = get(config, "voiceConfig")
    if voice_config is not None:
        prebuilt = get(
            check_fields(voice_config, ("prebuiltVoiceConfig",), "speech_config.voice_config"),
            "prebuiltVoiceConfig",
        )
        voice = get(
            check_fields(prebuilt or {}, ("voiceName",), "voice_config.prebuilt_voice_config"),
            "voiceName",
        )
        if voice not in VOICES:
            raise invalid(f"unknown voice {voice!r}")
    language = get(config, "languageCode")
    if language is not None and not (isinstance(language, str) and _LANGUAGE.fullmatch(language)):
        raise invalid(f"language_code {language!r} is not a BCP-47 language-REGION code")
    return voice, language


def _realtime_input(config: Any) -> tuple[bool, int | None, int | None, bool]:
    """(automatic activity detection on, silence ms, prefix padding ms, speech interrupts)."""
    if config is None:
        return True, None, None, True
    config = check_fields(
        config,
        ("automaticActivityDetection", "activityHandling", "turnCoverage"),
        "setup.realtime_input_config",
    )
    detection = check_fields(
        get(config, "automaticActivityDetection", {}),
        (
            "disabled",
            "startOfSpeechSensitivity",
            "endOfSpeechSensitivity",
            "prefixPaddingMs",
            "silenceDurationMs",
        ),
        "realtime_input_config.automatic_activity_detection",
    )
    disabled = get(detection, "disabled", False)
    if not isinstance(disabled, bool):
        raise invalid("automatic_activity_detection.disabled must be a boolean")
    for edge in ("start", "end"):
        value = get(detection, f"{edge}OfSpeechSensitivity")
        if value is not None and value not in _SENSITIVITY[edge]:
            raise invalid(f"unknown {edge}_of_speech_sensitivity {value!r}")
    numbers = []
    for key in ("silenceDurationMs", "prefixPaddingMs"):
        value = get(detection, key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise invalid(f"{snake(key)} must be a non-negative integer")
        numbers.append(value)
    handling = get(config, "activityHandling")
    if handling is not None and handling not in _ACTIVITY_HANDLING:
        raise invalid(f"unknown activity_handling {handling!r}")
    coverage = get(config, "turnCoverage")
    if coverage is not None and coverage not in _TURN_COVERAGE:
        raise invalid(f"unknown turn_coverage {coverage!r}")
    return not disabled, numbers[0], numbers[1], handling != "NO_INTERRUPTION"


def _compression(config: Any) -> tuple[bool, int | None, int | None]:
    if config is None:
        return False, None, None
    config = check_fields(
        config, ("triggerTokens", "slidingWindow"), "setup.context_window_compression"
    )
    window = get(config, "slidingWindow")
    if window is None:
        # The sliding window is the only mechanism; without it nothing is compressed.
        raise invalid("context_window_compression needs a sliding_window")
    window = check_fields(window, ("targetTokens",), "context_window_compression.sliding_window")
    trigger, target = _int64(get(config, "triggerTokens")), _int64(get(window, "targetTokens"))
    if trigger is not None and target is not None and target >= trigger:
        raise invalid("sliding_window.target_tokens must be below trigger_tokens")
    return True, trigger, target


def _int64(value: Any) -> int | None:
    """proto-JSON int64: a number or a decimal string."""
    if value is None:
        return None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise invalid(f"expected a positive int64, got {value!r}")


def _instruction(content: Any) -> str:
    if content is None:
        return ""
    content = check_fields(content, ("parts", "role"), "setup.system_instruction")
    if get(content, "role") not in (None, "system", "user"):
        raise invalid("system_instruction.role must be system or user")
    return "".join(
        get(p, "text", "") or "" for p in _parts(get(content, "parts", []), "system_instruction")
    )


def _parts(parts: Any, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(parts, list):
        raise invalid(f"{where}.parts must be a list")
    allowed = (
        "text", "inlineData", "functionCall", "functionResponse", "thought",
        "thoughtSignature", "fileData", "executableCode", "codeExecutionResult",
    )  # fmt: skip
    return [check_fields(p, allowed, f"{where}.parts") for p in parts]


def _functions(tools: Any) -> dict[str, FunctionDecl]:
    if tools is None:
        return {}
    if not isinstance(tools, list):
        raise invalid("tools must be a list")
    functions: dict[str, FunctionDecl] = {}
    for tool in tools:
        tool = check_fields(
            tool,
            ("functionDeclarations", "googleSearch", "codeExecution", "urlContext"),
            "setup.tools",
        )
        for decl in get(tool, "functionDeclarations", None) or []:
            decl = check_fields(
                decl,
                (
                    "name",
                    "description",
                    "parameters",
                    "parametersJsonSchema",
                    "response",
                    "responseJsonSchema",
                    "behavior",
                ),  # fmt: skip
                "tools.function_declarations",
            )
            name = get(decl, "name")
            if not (isinstance(name, str) and _FUNCTION_NAME.fullmatch(name)):
                raise invalid(f"invalid function name {name!r}")
            if name in functions:
                raise invalid(f"duplicate function declaration {name!r}")
            openapi, schema = get(decl, "parameters"), get(decl, "parametersJsonSchema")
            if openapi is not None and schema is not None:
                raise invalid(f"{name}: parameters and parameters_json_schema are exclusive")
            if schema is not None:
                _check_object_schema(schema, name, kind="type", object_type="object")
            if openapi is not None:
                _check_object_schema(openapi, name, kind="type", object_type="OBJECT")
            behavior = get(decl, "behavior", "BLOCKING")
            if behavior not in ("BLOCKING", "NON_BLOCKING", "UNSPECIFIED"):
                raise invalid(f"{name}: unknown behavior {behavior!r}")
            functions[name] = FunctionDecl(name, schema or openapi or {}, behavior)
    return functions


def _check_object_schema(schema: Any, name: str, kind: str, object_type: str) -> None:
    if not isinstance(schema, Mapping):
        raise invalid(f"{name}: parameters must be an object schema")
    if str(schema.get(kind, "")).upper() != object_type.upper():
        raise invalid(f"{name}: parameters must have type {object_type}")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise invalid(f"{name}: properties must be an object")
    required = schema.get("required", [])
    if not isinstance(required, list) or not set(required) <= set(properties):
        raise invalid(f"{name}: required names a property that is not declared")


# ---------------------------------------------------------------- client messages


@dataclasses.dataclass(frozen=True)
class AudioIn:
    pcm: bytes  # PCM16 little-endian, mono
    rate: int
    field: str = "audio"  # or the legacy "mediaChunks" (what ADK sends for 2.5 models)


@dataclasses.dataclass(frozen=True)
class VideoIn:
    data: bytes
    mime_type: str
    field: str = "video"  # or the legacy "mediaChunks" (what ADK sends for 2.5 models)


@dataclasses.dataclass(frozen=True)
class TextIn:
    text: str  # realtime text (what ADK sends for gemini-3.x typed turns)


@dataclasses.dataclass(frozen=True)
class ActivityStart:
    pass


@dataclasses.dataclass(frozen=True)
class ActivityEnd:
    pass


@dataclasses.dataclass(frozen=True)
class AudioStreamEnd:
    pass


@dataclasses.dataclass(frozen=True)
class ClientContent:
    turns: list[tuple[str, str]]  # (role, text)
    turn_complete: bool


@dataclasses.dataclass(frozen=True)
class ToolResponse:
    responses: list[tuple[str, str, Any]]  # (id, name, response)


ClientMessage = (
    AudioIn | VideoIn | TextIn | ActivityStart | ActivityEnd | AudioStreamEnd | ClientContent
    | ToolResponse
)  # fmt: skip


def parse_client_message(frame: str | bytes) -> list[ClientMessage]:
    """One client frame → what it carries (a legacy ``mediaChunks`` may hold several)."""
    try:
        message = json.loads(frame)
    except (ValueError, UnicodeDecodeError):
        raise invalid("a frame that is not JSON") from None
    if not isinstance(message, Mapping) or len(message) != 1:
        raise invalid(
            "a client message has exactly one of realtimeInput, clientContent, toolResponse"
        )
    ((key, body),) = message.items()
    if key in ("realtimeInput", "realtime_input"):
        return _realtime(body)
    if key in ("clientContent", "client_content"):
        return [_client_content(body)]
    if key in ("toolResponse", "tool_response"):
        return [_tool_response(body)]
    if key == "setup":
        raise invalid("setup may only be sent once, first")  # litellm#31494: 1007
    check_fields(message, ("realtimeInput", "clientContent", "toolResponse"), "")
    raise AssertionError("unreachable")


def _realtime(body: Any) -> list[ClientMessage]:
    body = check_fields(
        body,
        ("mediaChunks", "audio", "video", "text", "activityStart", "activityEnd", "audioStreamEnd"),
        "realtime_input",
    )
    if len(body) != 1:
        raise invalid("realtime_input carries exactly one field")
    ((key, value),) = body.items()
    key = snake(key)
    if key == "audio":
        return [_blob(value, "realtime_input.audio", audio=True)]
    if key == "video":
        return [_blob(value, "realtime_input.video", audio=False)]
    if key == "media_chunks":
        if not isinstance(value, list) or not value:
            raise invalid("media_chunks must be a non-empty list")
        blobs = [
            _blob(chunk, "media_chunks", audio=str(get(chunk, "mimeType", "")).startswith("audio/"))
            for chunk in value
        ]
        return [dataclasses.replace(b, field="mediaChunks") for b in blobs]
    if key == "text":
        if not isinstance(value, str):
            raise invalid("realtime_input.text must be a string")
        return [TextIn(value)]
    if key in ("activity_start", "activity_end"):
        check_fields(value, (), f"realtime_input.{key}")
        return [ActivityStart() if key == "activity_start" else ActivityEnd()]
    if value is not True:
        raise invalid("audio_stream_end must be true")
    return [AudioStreamEnd()]


def _blob(blob: Any, where: str, audio: bool) -> AudioIn | VideoIn:
    blob = check_fields(blob, ("data", "mimeType"), where)
    mime = get(blob, "mimeType")
    data = decode_bytes(get(blob, "data"), where)
    if audio:
        rate = pcm_rate(mime, where)
        if len(data) % 2:
            raise invalid(f"{where}: PCM16 needs an even number of bytes")
        return AudioIn(data, rate)
    if mime not in ("image/jpeg", "image/png", "image/webp"):
        raise invalid(f"{where}: unsupported video mime type {mime!r}")
    return VideoIn(data, mime)


def _client_content(body: Any) -> ClientContent:
    body = check_fields(body, ("turns", "turnComplete"), "client_content")
    turns = []
    for turn in get(body, "turns", []) or []:
        turn = check_fields(turn, ("parts", "role"), "client_content.turns")
        role = get(turn, "role", "user")
        if role not in ("user", "model"):
            raise invalid(f"client_content.turns: unknown role {role!r}")
        text = "".join(get(p, "text", "") or "" for p in _parts(get(turn, "parts", []), "turns"))
        turns.append((role, text))
    complete = get(body, "turnComplete", False)
    if not isinstance(complete, bool):
        raise invalid("turn_complete must be a boolean")
    return ClientContent(turns, complete)


def _tool_response(body: Any) -> ToolResponse:
    body = check_fields(body, ("functionResponses",), "tool_response")
    responses = []
    for item in get(body, "functionResponses", []) or []:
        item = check_fields(
            item,
            ("id", "name", "response", "parts", "willContinue", "scheduling"),
            "function_responses",
        )
        call_id, name = get(item, "id"), get(item, "name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise invalid("a function response needs its call's id and name")
        response = get(item, "response", {})
        if not isinstance(response, Mapping):
            raise invalid("function_responses.response must be an object")
        responses.append((call_id, name, response))
    if not responses:
        raise invalid("tool_response without function_responses")
    return ToolResponse(responses)
