"""The outgoing half of the protocol: what the server sends, as typed values.

Every server chunk is a frozen dataclass built here and nowhere else; the
data path passes these values around and tells them apart by class. Each
becomes the JSON the client reads (``to_json``) only at the wire
(``audiocore_server/live/frames.py``), so the field names and types a browser depends on are
written once, and ``mypy --strict`` checks every place that builds one.

The AI SDK v6 UI message chunks are listed in docs/protocol.md; ``EndOfStream``,
``Pong`` and ``AdkEvent`` are not UI chunks: each wire frames them its own way.
"""

from __future__ import annotations

import base64
import dataclasses
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from . import strict_json
from .protocol import EchoCancellation, InputFormat, OutputFormat, TurnDetection

JsonObject = dict[str, Any]
FinishReason = Literal["stop", "length", "content-filter", "tool-calls", "error", "other"]
InterruptSource = Literal["client", "model"]
SpeechState = Literal["started", "stopped"]


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


class Chunk:
    """One item for the client: its wire ``type`` and its JSON."""

    __slots__ = ()
    type: ClassVar[str]

    def to_json(self) -> JsonObject:
        return {"type": self.type}


def encode(chunk: Chunk) -> str:
    return encode_json(chunk.to_json())


def encode_json(obj: Mapping[str, Any]) -> str:
    return strict_json.dumps(obj)  # never NaN: a browser's parser rejects it


@dataclasses.dataclass(frozen=True, slots=True)
class SessionInfo(Chunk):
    """``data-session``: the conversation's session and formats, first on /ws."""

    type: ClassVar[str] = "data-session"
    session_id: str
    input: InputFormat
    output: OutputFormat
    model: str
    resumed: bool
    history: Sequence[Mapping[str, str]] = ()
    turn_detection: TurnDetection = "server"
    tools: Sequence[Mapping[str, Any]] = ()
    echo_cancellation: EchoCancellation = "client"

    def to_json(self) -> JsonObject:
        inp, out = self.input, self.output
        return {
            "type": self.type,
            "data": {
                "sessionId": self.session_id,
                "resumed": self.resumed,
                "model": self.model,
                "turnDetection": self.turn_detection,
                "echoCancellation": self.echo_cancellation,
                "input": {
                    "sampleRate": inp.sample_rate,
                    "format": inp.format,
                    "channels": inp.channels,
                },
                "output": {
                    "sampleRate": out.sample_rate,
                    "channels": 1,
                    "bitDepth": 16,
                    "binary": out.binary,
                },
                "history": [dict(h) for h in self.history],
                "tools": [dict(t) for t in self.tools],
            },
            "transient": True,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class Start(Chunk):
    type: ClassVar[str] = "start"
    message_id: str

    def to_json(self) -> JsonObject:
        return {"type": self.type, "messageId": self.message_id}


@dataclasses.dataclass(frozen=True, slots=True)
class Transcript(Chunk):
    """What the user said, as the model heard it (partial or final)."""

    type: ClassVar[str] = "data-transcript"
    text: str
    final: bool

    def to_json(self) -> JsonObject:
        return {
            "type": self.type,
            "data": {"text": self.text, "final": self.final},
            "transient": True,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class TextStart(Chunk):
    type: ClassVar[str] = "text-start"
    part_id: str
    # ``providerMetadata.audiocore``: {"format": "markdown", "taskId": …} on
    # a task result's inline part (``markdown_part``); else nothing.
    audiocore: Mapping[str, Any] | None = None

    def to_json(self) -> JsonObject:
        if self.audiocore is None:
            return {"type": self.type, "id": self.part_id}
        return {
            "type": self.type,
            "id": self.part_id,
            "providerMetadata": {"audiocore": dict(self.audiocore)},
        }


@dataclasses.dataclass(frozen=True, slots=True)
class TextDelta(Chunk):
    type: ClassVar[str] = "text-delta"
    part_id: str
    delta: str

    def to_json(self) -> JsonObject:
        return {"type": self.type, "id": self.part_id, "delta": self.delta}


@dataclasses.dataclass(frozen=True, slots=True)
class TextEnd(Chunk):
    type: ClassVar[str] = "text-end"
    part_id: str

    def to_json(self) -> JsonObject:
        return {"type": self.type, "id": self.part_id}


def markdown_part(task_id: str, markdown: str) -> list[Chunk]:
    """A background task's inline result as a text part of the message
    telling it: Markdown, marked so (the page renders it sanitised)."""
    part_id = f"inline_{task_id}"
    return [
        TextStart(part_id, {"format": "markdown", "taskId": task_id}),
        TextDelta(part_id, markdown),
        TextEnd(part_id),
    ]


@dataclasses.dataclass(frozen=True, slots=True)
class Pcm(Chunk):
    """``data-pcm``: PCM16 mono audio, base64 in JSON."""

    type: ClassVar[str] = "data-pcm"
    pcm: bytes
    sample_rate: int

    def to_json(self) -> JsonObject:
        return {
            "type": self.type,
            "data": {
                "content": base64.b64encode(self.pcm).decode("ascii"),
                "sampleRate": self.sample_rate,
                "channels": 1,
                "bitDepth": 16,
            },
            "transient": True,
        }


def encode_pcm(pcm: bytes, sample_rate: int) -> str:
    """``encode(Pcm(pcm, sample_rate))`` without the dict and the JSON
    encoder: this runs for every paced frame (every key and value is ours)."""
    content = base64.b64encode(pcm).decode("ascii")
    return (
        f'{{"type":"data-pcm","data":{{"content":"{content}","sampleRate":{sample_rate:d},'
        f'"channels":1,"bitDepth":16}},"transient":true}}'
    )


@dataclasses.dataclass(frozen=True, slots=True)
class StartStep(Chunk):
    type: ClassVar[str] = "start-step"


@dataclasses.dataclass(frozen=True, slots=True)
class FinishStep(Chunk):
    type: ClassVar[str] = "finish-step"


@dataclasses.dataclass(frozen=True, slots=True)
class ToolInputStart(Chunk):
    type: ClassVar[str] = "tool-input-start"
    call_id: str
    tool_name: str

    def to_json(self) -> JsonObject:
        return {"type": self.type, "toolCallId": self.call_id, "toolName": self.tool_name}


@dataclasses.dataclass(frozen=True, slots=True)
class ToolInput(Chunk):
    """``tool-input-available``. ``client_executes``: the client is to run the
    tool now and answer with ``tool_result`` (AI SDK: a tool the server does
    not execute). The mark rides in ``providerMetadata``, the one place for
    it that every AI SDK v6 release's chunk schema accepts (early v6
    releases refuse unknown keys)."""

    type: ClassVar[str] = "tool-input-available"
    call_id: str
    tool_name: str
    input: Any
    client_executes: bool = False

    def to_json(self) -> JsonObject:
        chunk: JsonObject = {
            "type": self.type,
            "toolCallId": self.call_id,
            "toolName": self.tool_name,
            "input": self.input,
        }
        if self.client_executes:
            chunk["providerMetadata"] = {"audiocore": {"clientExecutes": True}}
        return chunk


def client_executes(chunk: Mapping[str, Any]) -> bool:
    """Whether a received ``tool-input-available`` (its JSON) asks the client
    to run the tool now: what a client reads from ``ToolInput``."""
    metadata = chunk.get("providerMetadata")
    mark = metadata.get("audiocore") if isinstance(metadata, dict) else None
    return isinstance(mark, dict) and mark.get("clientExecutes") is True


@dataclasses.dataclass(frozen=True, slots=True)
class Confirmation:
    """What an ADK tool's confirmation request says (``ToolConfirmation``'s
    hint and payload), with the call it is for and who made it: /run_live
    renders the request as ADK's own ``adk_request_confirmation`` event."""

    tool_name: str
    args: Mapping[str, Any]
    hint: str = ""
    payload: Any = None
    author: str = ""
    invocation_id: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class ToolApprovalRequest(Chunk):
    type: ClassVar[str] = "tool-approval-request"
    approval_id: str
    call_id: str
    confirmation: Confirmation | None = None  # an ADK tool asked for it

    def to_json(self) -> JsonObject:
        # Exactly AI SDK's chunk: every major's schema is strict here, so an
        # ADK tool's hint and payload travel in ``asked()``'s data part.
        return {"type": self.type, "approvalId": self.approval_id, "toolCallId": self.call_id}

    def asked(self) -> list[Chunk]:
        """What asks the client: the request, after the data part that says
        what an ADK tool's confirmation asks (when one asked)."""
        if self.confirmation is None:
            return [self]
        return [ConfirmationAsked(self.approval_id, self.call_id, self.confirmation), self]


@dataclasses.dataclass(frozen=True, slots=True)
class ConfirmationAsked(Chunk):
    """``data-confirmation``: what an ADK tool's confirmation request says
    (its hint, the payload it offers the user to change), just before the
    ``tool-approval-request`` it belongs to; its id is the approval id, so a
    replay replaces the part rather than adding one."""

    type: ClassVar[str] = "data-confirmation"
    approval_id: str
    call_id: str
    confirmation: Confirmation

    def to_json(self) -> JsonObject:
        data: JsonObject = {
            "approvalId": self.approval_id,
            "toolCallId": self.call_id,
            "toolName": self.confirmation.tool_name,
            "hint": self.confirmation.hint,
        }
        if self.confirmation.payload is not None:
            data["payload"] = self.confirmation.payload
        return {"type": self.type, "id": self.approval_id, "data": data}


@dataclasses.dataclass(frozen=True, slots=True)
class ToolAnswer:
    """What the model was answered for a call the client settled (the
    function response and the tool's state writes): /run_live shows it as
    the function-response event ADK's own runs emit. Not in the chunk's JSON."""

    tool_name: str
    response: Mapping[str, Any]
    state_delta: Mapping[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class ToolOutput(Chunk):
    type: ClassVar[str] = "tool-output-available"
    call_id: str
    output: Any
    answer: ToolAnswer | None = None

    def to_json(self) -> JsonObject:
        return {"type": self.type, "toolCallId": self.call_id, "output": self.output}


@dataclasses.dataclass(frozen=True, slots=True)
class ToolOutputDenied(Chunk):
    type: ClassVar[str] = "tool-output-denied"
    call_id: str
    answer: ToolAnswer | None = None

    def to_json(self) -> JsonObject:
        return {"type": self.type, "toolCallId": self.call_id}


@dataclasses.dataclass(frozen=True, slots=True)
class ToolOutputError(Chunk):
    type: ClassVar[str] = "tool-output-error"
    call_id: str
    error_text: str
    answer: ToolAnswer | None = None

    def to_json(self) -> JsonObject:
        return {"type": self.type, "toolCallId": self.call_id, "errorText": self.error_text}


@dataclasses.dataclass(frozen=True, slots=True)
class ImageOut(Chunk):
    """``file``: an image the model returned, as a data URL (AI SDK's file
    chunk, what the seed's server sends): a file part of the message."""

    type: ClassVar[str] = "file"
    media_type: str
    data: bytes

    def to_json(self) -> JsonObject:
        content = base64.b64encode(self.data).decode("ascii")
        return {
            "type": self.type,
            "url": f"data:{self.media_type};base64,{content}",
            "mediaType": self.media_type,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class TaskCard(Chunk):
    """``data-task``: a background task's card, one per task id (the latest
    wins). Transient: task updates arrive between turns, outside any message."""

    type: ClassVar[str] = "data-task"
    id: str
    state: str  # tasks.records.TaskState
    objective: str
    stage: str | None = None  # the finer stage of a queued or running task
    permission: Mapping[str, Any] | None = None  # an agent's question, pending
    progress: Mapping[str, Any] | None = None
    result: str | None = None
    error: str | None = None
    delivery: str | None = None

    def data(self) -> JsonObject:
        """The card the client reconciles by ``id``."""
        return {
            "id": self.id,
            "state": self.state,
            # One "processing" for queued and running (the finer stage in
            # ``stage``); every other state as it is.
            "status": "processing" if self.state in ("queued", "running") else self.state,
            "stage": self.stage or ("queued" if self.state == "queued" else None),
            "permission": dict(self.permission) if self.permission else None,
            "objective": self.objective,
            "progress": dict(self.progress) if self.progress else None,
            "result": self.result,
            "error": self.error,
            "delivery": self.delivery,
        }

    def to_json(self) -> JsonObject:
        return {"type": self.type, "id": self.id, "data": self.data(), "transient": True}


@dataclasses.dataclass(frozen=True, slots=True)
class Speech(Chunk):
    """``data-speech``: the user's speech started or stopped (the seed's
    ``SpeechStarted`` / ``SpeechStopped``), as the model's voice detection
    (``source`` "model") or the client's activity signals ("client") tell it."""

    type: ClassVar[str] = "data-speech"
    state: SpeechState
    source: InterruptSource

    def to_json(self) -> JsonObject:
        return {
            "type": self.type,
            "data": {"state": self.state, "source": self.source},
            "transient": True,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class ModelReconnected(Chunk):
    """``data-model-reconnected``: the model's connection dropped or stalled
    and was resumed; the user's unanswered words were given again
    (``cause``: ``drop`` or ``stall``). A notice only: the socket stays."""

    type: ClassVar[str] = "data-model-reconnected"
    cause: str

    def to_json(self) -> JsonObject:
        return {"type": self.type, "data": {"cause": self.cause}, "transient": True}


@dataclasses.dataclass(frozen=True, slots=True)
class Interrupted(Chunk):
    """Barge-in; ``dropped_ms``: audio discarded unplayed."""

    type: ClassVar[str] = "data-interrupted"
    source: InterruptSource
    dropped_ms: int

    def to_json(self) -> JsonObject:
        return {
            "type": self.type,
            "data": {"source": self.source, "droppedMs": self.dropped_ms},
            "transient": True,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class Finish(Chunk):
    type: ClassVar[str] = "finish"
    reason: FinishReason = "stop"
    metadata: Mapping[str, Any] | None = None

    def to_json(self) -> JsonObject:
        chunk: JsonObject = {"type": self.type, "finishReason": self.reason}
        if self.metadata:
            chunk["messageMetadata"] = dict(self.metadata)
        return chunk


@dataclasses.dataclass(frozen=True, slots=True)
class Error(Chunk):
    type: ClassVar[str] = "error"
    text: str

    def to_json(self) -> JsonObject:
        return {"type": self.type, "errorText": self.text}


# Not UI message chunks: what each wire frames in its own way (audiocore_server/live/frames.py).


@dataclasses.dataclass(frozen=True, slots=True)
class EndOfStream(Chunk):
    """A client-side per-turn stream may close here (a step waits for the client)."""

    type: ClassVar[str] = "end-of-stream"


END_OF_STREAM = EndOfStream()


@dataclasses.dataclass(frozen=True, slots=True)
class Pong(Chunk):
    type: ClassVar[str] = "pong"
    timestamp: float | None

    def to_json(self) -> JsonObject:
        return {"type": self.type, "timestamp": self.timestamp}


@dataclasses.dataclass(frozen=True, slots=True)
class AdkEvent(Chunk):
    """An ADK ``Event`` as ADK's own server sends it (``/run_live``): its JSON."""

    type: ClassVar[str] = "adk-event"
    event: Mapping[str, Any]

    def to_json(self) -> JsonObject:
        return dict(self.event)
