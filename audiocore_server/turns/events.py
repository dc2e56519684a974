"""ADK live ``Event``s → AI SDK v6 UI message chunks, one turn at a time.

Pure and synchronous: ``TurnTranslator.translate(event)`` returns what to
send, in order. Audio comes back as ``ModelAudio`` (raw PCM16 and its rate) so
the connection can resample and pace it; everything else is a typed chunk
(``audiocore_server/wire/chunks.py``).

Turn rules: ``start`` opens a turn on its first event; ``finish`` closes it on
``turn_complete`` (or ``interrupted``) and never without a ``start``. A tool
call does not end the turn: the function response and the model's second
response belong to the same message.

Steps, as AI SDK's own server makes them: the tool calls of one model
response are one step (``start-step`` … ``finish-step``); the step of tools
ADK runs ends with their outputs; the step of delegated tools (approval,
browser) is ended (``end_step``) by whoever asked the client about them
(``audiocore_server/tools/delegation.py``). In a turn that has had a step, whatever the
model says next is a step too, closed before ``finish``; a turn without
tools has no steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Protocol

from google.adk.events import Event
from google.genai import types

from ..tools.spec import ToolSpec
from ..wire import chunks
from ..wire.audio_mime import audio_rate
from .metadata import TurnMetadata, finish_reason

# The model's voice detection (Gemini's ``voiceActivity``, the offline
# model's detector) → ``data-speech``.
_SPEECH: dict[types.VoiceActivityType | None, chunks.SpeechState] = {
    types.VoiceActivityType.ACTIVITY_START: "started",
    types.VoiceActivityType.ACTIVITY_END: "stopped",
}


@dataclasses.dataclass(frozen=True)
class ModelAudio:
    pcm: bytes
    sample_rate: int


@dataclasses.dataclass(frozen=True)
class TurnEnd:
    """The model's turn is over here: the audio before it is the turn's last."""


Outgoing = chunks.Chunk | ModelAudio | TurnEnd


class Translator(Protocol):
    """ADK events → what a client is sent (each dialect has one)."""

    turn: int  # increments at every TurnEnd
    message_id: str | None  # the open turn's message, if the dialect has messages
    # The model's turn is open: it has begun to answer and not yet ended
    # (the line is not free for anything else; see audiocore_server/live/line.py).
    in_turn: bool

    def translate(self, event: Event) -> list[Outgoing]: ...

    def begin(self, message_id: str | None = None) -> list[chunks.Chunk]: ...

    def end_step(self) -> list[chunks.Chunk]: ...

    def attach(self, parts: list[chunks.Chunk]) -> None:
        """``parts`` go at the end of the next turn's message (before its
        ``finish``): a task's inline result, in the answer telling it."""
        ...


class TextPart:
    """One text part fed by deltas (partial events) and a final aggregate."""

    def __init__(self, new_id: Callable[[], str] = lambda: chunks.new_id("txt")) -> None:
        self.part_id: str | None = None
        self.sent_any = False
        self._new_id = new_id

    def delta(self, text: str, out: list[Outgoing]) -> None:
        if not text:
            return
        if self.part_id is None:
            self.part_id = self._new_id()
            out.append(chunks.TextStart(self.part_id))
        out.append(chunks.TextDelta(self.part_id, text))
        self.sent_any = True

    def final(self, text: str, out: list[Outgoing]) -> None:
        # The aggregate repeats the deltas already sent: only send it when
        # no delta was.
        if not self.sent_any:
            self.delta(text, out)
        self.end(out)

    def end(self, out: list[Outgoing]) -> None:
        if self.part_id is not None:
            out.append(chunks.TextEnd(self.part_id))
        self.part_id, self.sent_any = None, False


class TurnTranslator:
    def __init__(self, tools: Mapping[str, ToolSpec] | None = None, model: str = "") -> None:
        self.turn = 0  # increments at every finish
        self.in_turn = False
        self._tools = tools or {}
        self._model = model
        self._meta = TurnMetadata(model)
        self._transcript = TextPart()  # output transcription
        self._text = TextPart()  # model text parts
        self.message_id: str | None = None  # the open turn's assistant message
        self._step_open = False
        self._stepped = False  # the open turn has had a step
        self._tool_tail = False  # the turn's last output so far is a tool call
        self._attached: list[chunks.Chunk] = []

    def attach(self, parts: list[chunks.Chunk]) -> None:
        self._attached += parts

    def _open(self, out: list[Outgoing], *, content: bool = False) -> None:
        """Open the turn if none is; ``content``: what comes is model output,
        which after a tool step is a step of its own."""
        if not self.in_turn:
            self.in_turn = True
            self.message_id = chunks.new_id("msg")
            out.append(chunks.Start(self.message_id))
        if content:
            self._tool_tail = False
        if content and self._stepped and not self._step_open:
            self._step_open = True
            out.append(chunks.StartStep())

    def begin(self, message_id: str | None = None) -> list[chunks.Chunk]:
        """Open a turn now (its ``start``, if none is open): for chunks that
        do not come from an event, such as tool calls asked again on resume.
        ``message_id``: the id of the message the turn continues — one
        whose tool step is over, so what the model says next is a step of
        its own (else AI SDK's ``lastAssistantMessageIsCompleteWithToolCalls``
        still sees the answered call as the last step, and sends again)."""
        if self.in_turn:
            return []
        self.in_turn = True
        self.message_id = message_id or chunks.new_id("msg")
        self._stepped = message_id is not None
        return [chunks.Start(self.message_id)]

    def end_step(self) -> list[chunks.Chunk]:
        """Close the open step (its ``finish-step``), if one is open."""
        if not self._step_open:
            return []
        self._step_open = False
        self._meta.step_over()
        return [chunks.FinishStep()]

    def _begin_step(self, out: list[Outgoing]) -> None:
        if not self._step_open:
            self._step_open = self._stepped = True
            out.append(chunks.StartStep())

    def finish(self, reason: chunks.FinishReason | None = None) -> list[Outgoing]:
        """Close the current turn if one is open. Its reason, unless given:
        ``tool-calls`` when it ends on a tool step, else the model's
        (``audiocore_server/turns/metadata.py``)."""
        out: list[Outgoing] = []
        if self.in_turn:
            if reason is None:
                reason = "tool-calls" if self._tool_tail else finish_reason(self._meta.reason)
            self._end_texts(out)
            out += self._attached
            self._attached = []
            out += self.end_step()
            out.append(TurnEnd())
            out.append(chunks.Finish(reason, self._meta.to_json()))
            self.in_turn = False
            self.message_id = None
            self._stepped = False
            self._tool_tail = False
            self._meta = TurnMetadata(self._model)
            self.turn += 1
        return out

    def _heard(self, text: str, final: bool, out: list[Outgoing]) -> None:
        """The user's words as the model heard them (its input transcription)."""
        out.append(chunks.Transcript(text, final=final))

    def _end_texts(self, out: list[Outgoing]) -> None:
        self._transcript.end(out)
        self._text.end(out)

    def translate(self, event: Event) -> list[Outgoing]:
        out: list[Outgoing] = []
        answered = False  # the event holds outputs of tools ADK ran
        self._meta.add(event)
        if event.error_code or event.error_message:
            out.append(chunks.Error(f"model error {event.error_code}: {event.error_message}"))
        if event.voice_activity is not None:
            speech = _SPEECH.get(event.voice_activity.voice_activity_type)
            if speech is not None:
                out.append(chunks.Speech(speech, "model"))  # no turn: the user speaks
        if event.input_transcription and event.input_transcription.text:
            self._open(out)
            self._heard(event.input_transcription.text, not event.partial, out)
        if event.output_transcription and event.output_transcription.text:
            self._open(out, content=True)
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
                    self._open(out, content=True)
                    if event.partial:
                        self._text.delta(part.text, out)
                    else:
                        self._text.final(part.text, out)
                elif part.inline_data and (part.inline_data.mime_type or "").startswith(
                    "audio/pcm"
                ):
                    self._open(out)
                    self._tool_tail = False
                    data = part.inline_data.data or b""
                    if data:
                        out.append(ModelAudio(data, audio_rate(part.inline_data.mime_type)))
                elif part.inline_data and (part.inline_data.mime_type or "").startswith("image/"):
                    self._open(out, content=True)
                    out.append(
                        chunks.ImageOut(
                            part.inline_data.mime_type or "", part.inline_data.data or b""
                        )
                    )
                elif part.function_call:
                    self._open(out)
                    self._end_texts(out)  # later words are a new part, after the tool
                    self._begin_step(out)
                    self._tool_tail = True
                    call = part.function_call
                    call_id, name = call.id or "", call.name or ""
                    spec = self._tools.get(name)
                    out.append(chunks.ToolInputStart(call_id, name))
                    out.append(
                        chunks.ToolInput(
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
                    out.append(chunks.ToolOutput(resp.id or "", resp.response))
                    answered = True
        if answered:
            out += self.end_step()  # the tools ADK ran: their step is over
        if event.interrupted:
            out += self.finish("other")
        elif event.turn_complete:
            out += self.finish()
        return out
