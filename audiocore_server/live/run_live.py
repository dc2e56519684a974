"""ADK's ``WS /run_live``, for clients written for ``adk api_server``.

The wire is ADK's (google-adk 2.13.0, ``google/adk/cli/api_server.py``):
the query names the app, user and session (which must exist: ADK clients
create it with the session REST routes, ``audiocore_server/http/session_rest.py``) and the run
options; the client sends ``LiveRequest`` JSON (``content``, ``blob``,
``activity_start``, ``activity_end``, ``audio_stream_end``, ``close``); the
server sends one ADK ``Event`` per text frame, serialised as ADK's server
does (camelCase, ``None`` left out, URL-safe base64).

Better than ADK's own endpoint (docs/protocol.md lists every difference):
audio in a blob whose mime names another rate (``audio/pcm;rate=48000``) is
resampled to 16 kHz by audiocore; binary frames are audio at the rate of
the last blob (16 kHz PCM16 before any); a malformed message gets an error
event and the reader goes on; model audio is paced and flushed on barge-in
like ``/ws``; the socket is closed when the run ends.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pydantic
from google.adk.agents.live_request_queue import LiveRequest
from google.adk.agents.run_config import RunConfig
from google.adk.events import Event, EventActions
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types
from starlette.types import Message
from starlette.websockets import WebSocket

from ..gate.addressing import api_user_allowed
from ..settings import Settings
from ..storage.client_state import ForbiddenState, check_client_state
from ..tools.confirmation import REQUEST_CONFIRMATION
from ..tools.spec import ToolSpec
from ..turns.events import ModelAudio, Outgoing, TurnEnd
from ..wire import chunks, fields, protocol, query_params
from ..wire.adk_json import encode_event, event_json
from ..wire.audio_mime import audio_rate
from .opening import Opening

Modality = Literal["TEXT", "AUDIO"]
_ADK_MODEL_RATE = 16_000
_REQUEST_FIELDS = {f: f for f in LiveRequest.model_fields} | {
    # camelCase top-level keys are ignored silently by ADK's server; here
    # they mean the same as the snake_case ones.
    "activityStart": "activity_start",
    "activityEnd": "activity_end",
    "audioStreamEnd": "audio_stream_end",
    "stateDelta": "state_delta",
}

_BLOB_KEYS = ({"mime_type", "data"}, {"mimeType", "data"})


def audio_blob(obj: dict[str, Any]) -> tuple[str, bytes] | None:
    """The common request, ``{"blob": {"mime_type": "audio/pcm…", "data":
    <standard base64>}}`` (fifty a second per session), read without
    pydantic: the same mime and bytes as ``LiveRequest.model_validate``
    gives. None for any other request, which takes that full path."""
    blob = obj.get("blob") if len(obj) == 1 else None
    if not isinstance(blob, dict) or set(blob) not in _BLOB_KEYS:
        return None
    mime = blob.get("mime_type", blob.get("mimeType"))
    data = blob["data"]
    if not (isinstance(mime, str) and mime.startswith("audio/pcm") and isinstance(data, str)):
        return None
    try:
        return mime, base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None  # URL-safe, unpadded, not base64: pydantic decides


@dataclasses.dataclass(frozen=True)
class RunLiveQuery:
    app_name: str | None  # None: the server's only app
    user_id: str
    session_id: str
    modalities: tuple[Modality, ...] = ("AUDIO",)
    proactive_audio: bool | None = None
    enable_affective_dialog: bool | None = None
    enable_session_resumption: bool | None = None
    save_live_blob: bool = False
    explicit_vad_signal: bool | None = None

    def run_config(self, base: RunConfig) -> RunConfig:
        """ADK's mapping of the query into the run config (api_server.py)."""
        return base.model_copy(
            update={
                "response_modalities": list(self.modalities),
                "proactivity": (
                    None
                    if self.proactive_audio is None
                    else types.ProactivityConfig(proactive_audio=self.proactive_audio)
                ),
                "enable_affective_dialog": self.enable_affective_dialog,
                "session_resumption": (
                    base.session_resumption
                    if self.enable_session_resumption is None
                    else types.SessionResumptionConfig(transparent=self.enable_session_resumption)
                ),
                "save_live_blob": self.save_live_blob,
                "explicit_vad_signal": self.explicit_vad_signal,
            }
        )


def parse_query(query: Mapping[str, Sequence[str]], settings: Settings) -> RunLiveQuery:
    """The query of a ``/run_live`` request (``{name: [values]}``); raises
    ``ValueError`` saying what is wrong (the socket is refused before accept,
    as ADK's server does; ``query_params``' rules)."""
    one, flag = query_params.one, query_params.flag
    user_id = one(query, "user_id", required=True) or ""
    if not api_user_allowed(user_id):
        raise ValueError(f"user_id: not allowed: {user_id!r}")
    modalities = tuple(query.get("modalities", [])) or ("AUDIO",)
    for modality in modalities:
        if modality not in ("TEXT", "AUDIO"):
            raise ValueError(f"modalities: expected TEXT or AUDIO, got {modality!r}")
    return RunLiveQuery(
        app_name=one(query, "app_name") or None,
        user_id=user_id,
        session_id=one(query, "session_id", required=True) or "",
        modalities=modalities,  # type: ignore[arg-type]
        proactive_audio=flag(query, "proactive_audio"),
        enable_affective_dialog=flag(query, "enable_affective_dialog"),
        enable_session_resumption=flag(query, "enable_session_resumption"),
        save_live_blob=bool(flag(query, "save_live_blob")),
        explicit_vad_signal=flag(query, "explicit_vad_signal"),
    )


@dataclasses.dataclass
class Speaker:
    """Who the paced audio frames are from: the last audio event's author and
    invocation, which the frames' own events carry."""

    author: str = ""
    invocation_id: str = ""
    # The last agent event's, whatever it carried: who a function response
    # the client settled is from (``tool_answer_event``).
    agent: str = ""
    agent_invocation_id: str = ""


class AdkEventTranslator:
    """Events pass through as they are, but their audio: that goes to the
    pacer, and comes out as events of paced 40 ms frames."""

    message_id: str | None = None  # ADK's events have no messages, nor steps

    def __init__(self, speaker: Speaker) -> None:
        self.turn = 0
        self.in_turn = False
        self._speaker = speaker

    def begin(self, message_id: str | None = None) -> list[chunks.Chunk]:
        return []

    def end_step(self) -> list[chunks.Chunk]:
        return []

    def attach(self, parts: list[chunks.Chunk]) -> None:
        """ADK's events carry no parts of ours: an inline result is not sent."""

    def translate(self, event: Event) -> list[Outgoing]:
        out: list[Outgoing] = []
        content = event.content
        rest = event
        if content is not None and content.parts:
            audio = [p for p in content.parts if _is_audio(p)]
            if audio:
                self._speaker.author = event.author
                self._speaker.invocation_id = event.invocation_id
                for part in audio:
                    inline = part.inline_data
                    assert inline is not None
                    if inline.data:
                        out.append(ModelAudio(inline.data, audio_rate(inline.mime_type)))
                others = [p for p in content.parts if not _is_audio(p)]
                rest = event.model_copy(
                    update={"content": content.model_copy(update={"parts": others})}
                    if others
                    else {"content": None}
                )
        if event.author != "user":
            self._speaker.agent = event.author
            self._speaker.agent_invocation_id = event.invocation_id
        if event.turn_complete or event.interrupted:
            out.append(TurnEnd())
            self.turn += 1
            self.in_turn = False
        elif event.author != "user" and (
            content is not None or event.output_transcription is not None
        ):
            self.in_turn = True  # the model has begun to answer
        if rest is event or _carries_more_than_audio(rest):
            out.append(chunks.AdkEvent(event_json(rest)))
        return out


def _is_audio(part: types.Part) -> bool:
    return bool(part.inline_data and (part.inline_data.mime_type or "").startswith("audio/pcm"))


def _carries_more_than_audio(event: Event) -> bool:
    """An event whose audio was taken out, that still says something."""
    data = event.model_dump(
        exclude_none=True,
        exclude={"id", "timestamp", "invocation_id", "author", "actions", "node_info", "branch"},
    )
    return bool(data)


class AdkEventWire:
    """Event JSON, one per text frame; our own chunks mean nothing to an ADK
    client and are dropped, but an error, which is an error event."""

    name = "run_live"
    sends_session = False
    binary_audio = False
    heard = None  # the pacer's clock

    def __init__(self, speaker: Speaker) -> None:
        self._speaker = speaker
        # The shape of an event's defaults (actions, nodeInfo) as ADK dumps them.
        self._defaults = {
            k: v
            for k, v in event_json(Event(author="x")).items()
            if k not in ("author", "id", "timestamp", "invocationId")
        }

    def chunk_frames(self, chunk: chunks.Chunk) -> list[str]:
        if isinstance(chunk, chunks.AdkEvent):
            return [encode_event(chunk.event)]
        if isinstance(chunk, chunks.ToolApprovalRequest) and chunk.confirmation is not None:
            return [encode_event(event_json(confirmation_event(chunk, chunk.confirmation)))]
        if (
            isinstance(chunk, (chunks.ToolOutput, chunks.ToolOutputDenied, chunks.ToolOutputError))
            and chunk.answer is not None
        ):
            return [
                encode_event(
                    event_json(tool_answer_event(chunk.call_id, chunk.answer, self._speaker))
                )
            ]
        if isinstance(chunk, chunks.Error):
            error = Event(author="server", error_code="INVALID_REQUEST", error_message=chunk.text)
            return [encode_event(event_json(error))]
        return []

    def audio_frames(self, pcm: bytes, sample_rate: int) -> list[str | bytes]:
        data = {
            "content": {
                "parts": [
                    {
                        "inlineData": {
                            "data": base64.urlsafe_b64encode(pcm).decode("ascii"),
                            "mimeType": f"audio/pcm;rate={sample_rate}",
                        }
                    }
                ],
                "role": "model",
            },
            "invocationId": self._speaker.invocation_id,
            "author": self._speaker.author,
            **self._defaults,
            "id": str(uuid.uuid4()),
            "timestamp": time.time(),
        }
        return [encode_event(data)]


def confirmation_event(
    request: chunks.ToolApprovalRequest, confirmation: chunks.Confirmation
) -> Event:
    """An ADK tool's confirmation request as ``adk api_server`` emits it
    (``generate_request_confirmation_event``): an ``adk_request_confirmation``
    call, long-running, whose args hold the original call and the
    ``ToolConfirmation``. Its id is our approval id: the client's function
    response for it is the approval (``SessionDelegations``)."""
    original = types.FunctionCall(
        id=request.call_id, name=confirmation.tool_name, args=dict(confirmation.args)
    )
    asked = ToolConfirmation(hint=confirmation.hint, payload=confirmation.payload)
    call = types.FunctionCall(
        name=REQUEST_CONFIRMATION,
        id=request.approval_id,
        args={
            "originalFunctionCall": original.model_dump(exclude_none=True, by_alias=True),
            "toolConfirmation": asked.model_dump(by_alias=True, exclude_none=True),
        },
    )
    return Event(
        invocation_id=confirmation.invocation_id,
        author=confirmation.author,
        content=types.Content(parts=[types.Part(function_call=call)], role="model"),
        long_running_tool_ids={request.approval_id},
    )


def tool_answer_event(call_id: str, answer: chunks.ToolAnswer, speaker: Speaker) -> Event:
    """The function response of a call the client settled (an approval, a
    confirmation, a browser tool's result), as ADK's runs emit a tool's
    response: an event of the calling agent, role ``user``, with the tool's
    state writes. ADK's live run sends the model such a response without an
    event; ``adk api_server``'s ``/run_sse`` shows it after a confirmation."""
    response = types.FunctionResponse(
        id=call_id, name=answer.tool_name, response=dict(answer.response)
    )
    return Event(
        invocation_id=speaker.agent_invocation_id,
        author=speaker.agent,
        content=types.Content(parts=[types.Part(function_response=response)], role="user"),
        actions=EventActions(state_delta=dict(answer.state_delta)),
    )


class AdkDialect:
    name = "run_live"
    error_before_close = True

    def __init__(self, query: RunLiveQuery, base_run_config: RunConfig) -> None:
        self.query = query
        self._base_run_config = base_run_config
        self._speaker = Speaker()
        self._input = protocol.InputFormat(_ADK_MODEL_RATE, "s16", 1)  # binary frames' format
        self._input_mime: str | None = None  # the audio blobs' mime type that set it

    async def open(self, ws: WebSocket, timeout_s: float, limits: fields.Limits) -> Opening:
        start = protocol.Start(
            self._input,
            protocol.OutputFormat(24_000, False),
            self.query.session_id,
            app=self.query.app_name,
        )
        return Opening(
            start,
            user_id=self.query.user_id,
            create_missing=False,
            run_config=self.query.run_config(self._base_run_config),
        )

    def decode(
        self, message: Message, fmt: protocol.InputFormat, limits: fields.Limits
    ) -> Sequence[protocol.ClientMessage]:
        data = message.get("bytes")
        if data is not None:
            return [protocol.decode_binary(data, self._input, limits)]
        return self._decode_request(message.get("text") or "", limits)

    def _decode_request(self, text: str, limits: fields.Limits) -> list[protocol.ClientMessage]:
        obj = protocol.load_json(text, limits)
        audio = audio_blob(obj)
        if audio is not None:
            return [self._blob(*audio, limits)]
        unknown = sorted(k for k in obj if k not in _REQUEST_FIELDS)
        if unknown:
            raise fields.InputError(f"LiveRequest: unknown fields {unknown}")
        try:
            request = LiveRequest.model_validate({_REQUEST_FIELDS[k]: v for k, v in obj.items()})
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise fields.InputError(f"LiveRequest: {where}: {first['msg']}") from None
        out: list[protocol.ClientMessage] = []
        # ADK's order: at most one of these, then the content (live_request_queue.py).
        if request.activity_start is not None:
            out.append(protocol.ActivityStart())
        elif request.activity_end is not None:
            out.append(protocol.ActivityEnd())
        elif request.audio_stream_end:
            out.append(protocol.AudioControl("stop"))
        elif request.blob is not None:
            out.append(self._blob(request.blob.mime_type or "", request.blob.data or b"", limits))
        if request.state_delta:
            try:
                check_client_state(request.state_delta, "state_delta")
            except ForbiddenState as exc:
                raise fields.InputError(str(exc)) from None
        if request.content is not None or request.state_delta:
            out += self._content(request.content, request.state_delta, limits)
        if request.close:
            out.append(protocol.Close())
        return out

    def _blob(self, mime: str, data: bytes, limits: fields.Limits) -> protocol.ClientMessage:
        if mime == self._input_mime:  # fifty a second: the rate read once
            return protocol.decode_binary(data, self._input, limits)
        if mime.startswith("audio/pcm"):
            try:
                rate = audio_rate(mime, _ADK_MODEL_RATE)
            except ValueError as exc:
                raise fields.InputError(
                    f"blob: {exc}; expected one of {list(fields.SUPPORTED_RATES)}"
                ) from None
            if rate not in fields.SUPPORTED_RATES:
                raise fields.InputError(
                    f"blob: audio rate {rate} Hz; expected one of {list(fields.SUPPORTED_RATES)}"
                )
            self._input = protocol.InputFormat(rate, "s16", 1)
            self._input_mime = mime
            return protocol.decode_binary(data, self._input, limits)
        if mime in fields.IMAGE_TYPES:
            return fields.image_bytes(mime, data, limits, "blob")
        raise fields.InputError(
            f"blob: mime_type must be audio/pcm[;rate=N] or one of {list(fields.IMAGE_TYPES)}, "
            f"got {mime!r}"
        )

    def _content(
        self,
        content: types.Content | None,
        state_delta: dict[str, Any] | None,
        limits: fields.Limits,
    ) -> list[protocol.ClientMessage]:
        parts = content.parts or [] if content is not None else []
        if any(p.function_call for p in parts):
            raise fields.InputError("content: a user message cannot contain function calls")
        responses = [p.function_response for p in parts if p.function_response]
        if responses:
            if len(responses) != len(parts):
                raise fields.InputError("content: function responses must come alone")
            return [protocol.ToolResponse(r.id or "", r.response or {}) for r in responses]
        text = "".join(p.text or "" for p in parts)
        if len(text) > limits.max_text_chars:
            raise fields.InputError(
                f"content: {len(text)} characters exceeds the limit of {limits.max_text_chars}"
            )
        return [protocol.UserContent(content, state_delta)]

    def translator(self, tools: Mapping[str, ToolSpec], model_name: str) -> AdkEventTranslator:
        return AdkEventTranslator(self._speaker)

    def wire(self, output: protocol.OutputFormat) -> AdkEventWire:
        return AdkEventWire(self._speaker)
