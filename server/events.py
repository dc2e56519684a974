"""ADK live ``Event``s → AI SDK v6 UI message chunks, one turn at a time.

Pure and synchronous: ``TurnTranslator.translate(event)`` returns what to
send, in order. Audio comes back as ``ModelAudio`` (raw PCM16 and its rate) so
the connection can resample and pace it; everything else is a chunk dict.

Turn rules: ``start`` opens a turn on its first event; ``finish`` closes it on
``turn_complete`` (or ``interrupted``) and never without a ``start``. A tool
call does not end the turn: the function response and the model's second
response belong to the same message. Each tool call is a step
(``start-step`` … ``finish-step``): the step of a tool ADK runs ends with its
output; the step of a delegated tool (approval, browser) is ended by the
connection once it has asked the client (``server/delegation.py``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Protocol

from google.adk.events import Event

from . import protocol
from .tools import ToolSpec

_RATE = re.compile(r"rate=(\d+)")


@dataclasses.dataclass(frozen=True)
class ModelAudio:
    pcm: bytes
    sample_rate: int


@dataclasses.dataclass(frozen=True)
class TurnEnd:
    """The model's turn is over here: the audio before it is the turn's last."""


Outgoing = dict[str, Any] | ModelAudio | TurnEnd


class Translator(Protocol):
    """ADK events → what a client is sent (each dialect has one)."""

    turn: int  # increments at every TurnEnd

    def translate(self, event: Event) -> list[Outgoing]: ...

    def begin(self, message_id: str | None = None) -> list[dict[str, Any]]: ...


def audio_rate(mime_type: str | None, default: int = 24_000) -> int:
    match = _RATE.search(mime_type or "")
    return int(match.group(1)) if match else default


class _TextPart:
    """One text part fed by deltas (partial events) and a final aggregate."""

    def __init__(self) -> None:
        self.part_id: str | None = None
        self.sent_any = False

    def delta(self, text: str, out: list[Outgoing]) -> None:
        if not text:
            return
        if self.part_id is None:
            self.part_id = protocol.new_id("txt")
            out.append(protocol.text_start_chunk(self.part_id))
        out.append(protocol.text_delta_chunk(self.part_id, text))
        self.sent_any = True

    def final(self, text: str, out: list[Outgoing]) -> None:
        # The aggregate repeats the deltas already sent: only send it when
        # no delta was.
        if not self.sent_any:
            self.delta(text, out)
        self.end(out)

    def end(self, out: list[Outgoing]) -> None:
        if self.part_id is not None:
            out.append(protocol.text_end_chunk(self.part_id))
        self.part_id, self.sent_any = None, False


class TurnTranslator:
    def __init__(self, tools: Mapping[str, ToolSpec] | None = None, model: str = "") -> None:
        self.turn = 0  # increments at every finish
        self.in_turn = False
        self._tools = tools or {}
        self._model = model
        self._usage: dict[str, int] = {}
        self._transcript = _TextPart()  # output transcription
        self._text = _TextPart()  # model text parts

    def _open(self, out: list[Outgoing]) -> None:
        if not self.in_turn:
            self.in_turn = True
            out.append(protocol.start_chunk(protocol.new_id("msg")))

    def begin(self, message_id: str | None = None) -> list[dict[str, Any]]:
        """Open a turn now (its ``start``, if none is open): for chunks that
        do not come from an event, such as tool calls asked again on resume.
        ``message_id``: the id of the message the turn continues."""
        if self.in_turn:
            return []
        self.in_turn = True
        return [protocol.start_chunk(message_id or protocol.new_id("msg"))]

    def finish(self, reason: protocol.FinishReason = "stop") -> list[Outgoing]:
        """Close the current turn if one is open."""
        out: list[Outgoing] = []
        if self.in_turn:
            self._end_texts(out)
            metadata: dict[str, object] = {"model": self._model} if self._model else {}
            if self._usage:
                metadata["usage"] = dict(self._usage)
            out.append(TurnEnd())
            out.append(protocol.finish_chunk(reason, metadata))
            self.in_turn = False
            self._usage = {}
            self.turn += 1
        return out

    def _end_texts(self, out: list[Outgoing]) -> None:
        self._transcript.end(out)
        self._text.end(out)

    def _count_usage(self, event: Event) -> None:
        usage = event.usage_metadata
        if usage is None:
            return
        # AI SDK's LanguageModelUsage names.
        for name, value in (
            ("inputTokens", usage.prompt_token_count),
            ("outputTokens", usage.candidates_token_count),
            ("totalTokens", usage.total_token_count),
        ):
            if value:
                self._usage[name] = self._usage.get(name, 0) + value

    def translate(self, event: Event) -> list[Outgoing]:
        out: list[Outgoing] = []
        if event.error_code or event.error_message:
            out.append(
                protocol.error_chunk(f"model error {event.error_code}: {event.error_message}")
            )
        if event.input_transcription and event.input_transcription.text:
            self._open(out)
            final = not event.partial
            out.append(protocol.transcript_chunk(event.input_transcription.text, final=final))
        if event.output_transcription and event.output_transcription.text:
            self._open(out)
            if event.partial:
                self._transcript.delta(event.output_transcription.text, out)
            else:
                self._transcript.final(event.output_transcription.text, out)
        content = event.content
        if content and content.parts and event.author != "user":
            for part in content.parts:
                if part.thought:
                    continue
                if part.text:
                    self._open(out)
                    if event.partial:
                        self._text.delta(part.text, out)
                    else:
                        self._text.final(part.text, out)
                elif part.inline_data and (part.inline_data.mime_type or "").startswith(
                    "audio/pcm"
                ):
                    self._open(out)
                    data = part.inline_data.data or b""
                    if data:
                        out.append(ModelAudio(data, audio_rate(part.inline_data.mime_type)))
                elif part.inline_data and (part.inline_data.mime_type or "").startswith("image/"):
                    self._open(out)
                    out.append(
                        protocol.image_chunk(
                            part.inline_data.mime_type or "", part.inline_data.data or b""
                        )
                    )
                elif part.function_call:
                    self._open(out)
                    self._end_texts(out)  # later words are a new part, after the tool
                    call = part.function_call
                    call_id, name = call.id or "", call.name or ""
                    spec = self._tools.get(name)
                    out.append(protocol.start_step_chunk())
                    out.append(protocol.tool_input_start_chunk(call_id, name))
                    out.append(
                        protocol.tool_input_chunk(
                            call_id,
                            name,
                            call.args or {},
                            # Asked to run it now: a browser tool that needs no approval.
                            client_executes=bool(
                                spec and spec.runs_in == "browser" and not spec.approval
                            ),
                        )
                    )
                elif part.function_response:
                    self._open(out)
                    resp = part.function_response
                    out.append(protocol.tool_output_chunk(resp.id or "", resp.response))
                    out.append(protocol.finish_step_chunk())
        self._count_usage(event)
        if event.interrupted:
            out += self.finish("other")
        elif event.turn_complete:
            out += self.finish()
        return out
