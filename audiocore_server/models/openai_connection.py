"""One live connection to OpenAI's Realtime API as ADK's ``BaseLlmConnection``:
ADK's inputs → client events, server events → ``LlmResponse``s.

Facts this relies on (docs/providers.md has the sources): the SDK validates
nothing either way, so events are plain dicts dispatched on their ``type``;
audio is PCM16 at 24 kHz both ways; a function call's result goes back as a
``function_call_output`` item and the model answers only when asked
(``response.create``), once for all the calls of a step; over WebSocket the
service cannot know how much of an answer the user heard, so on barge-in
the item being spoken is truncated at the played position our pacer knows
(``audiocore_server/models/played_audio.py``).

Turns as ADK sees them: a response that asks for tools does not end the
turn (the answer after the tools continues it, as on Gemini); any other
``response.done`` is ``turn_complete``; the user's speech while an answer
is still playing is ``interrupted``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import re
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models.base_llm_connection import BaseLlmConnection, RealtimeInput
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from ..wire.audio_mime import audio_rate
from .openai_transcript import Item, history_items
from .played_audio import PlayedAudio
from .provider_error import ProviderError

log = logging.getLogger(__name__)

RATE = 24_000
AUDIO_FORMAT = {"type": "audio/pcm", "rate": RATE}
AUDIO_MIME = f"audio/pcm;rate={RATE}"
# The service refuses to commit less than 100 ms of input audio. Counted in
# samples: milliseconds summed as floats fall short of 100 for some chunkings.
MIN_COMMIT = RATE // 10
# The service's codes whose error ends the session (it closes right after).
_FATAL_CODES = frozenset({"session_expired", "invalid_api_key"})
# OpenAI's key-refusal messages quote the key, masked but for a few
# characters ("Incorrect API key provided: sk-proj-****abcd."): none of it
# goes to a client or a log.
_KEY = re.compile(r"\bsk-[^\s.,;'\"]*")


# Closes that say nothing of the request: the connection or the service
# failed (1006: no close frame), or the session reached its end (1001, after
# ``session_expired``). A new session may go on where this one stopped; any
# other close (3000: a refused key, 1008: a policy) would be refused again.
_RECOVERABLE_CLOSES = frozenset({1000, 1001, 1006, 1011, 1012, 1013, 1014})


class SessionLost(ProviderError):
    """The service's session ended under the conversation: the socket
    dropped or closed, or the session reached its time limit. ``recoverable``:
    a new session may continue it (``openai_recovery.py``); ``cause`` says
    why it ended, for the notice and the metrics."""

    def __init__(self, message: str, *, recoverable: bool, cause: str = "drop") -> None:
        super().__init__(message)
        self.recoverable = recoverable
        self.cause = cause


def closed_error(exc: ConnectionClosed) -> SessionLost:
    """The service closed the session: its code and reason (a refused key is
    3000 "invalid_request_error.invalid_api_key"), for the client."""
    if exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG:
        return SessionLost(
            f"the model service sent too large a frame ({exc.sent.reason})", recoverable=False
        )
    code = exc.rcvd.code if exc.rcvd else 1006
    reason = _KEY.sub("sk-…", exc.rcvd.reason) if exc.rcvd else "no close frame"
    return SessionLost(
        f"the model service closed the live session: {code} {reason}".strip(),
        recoverable=code in _RECOVERABLE_CLOSES,
    )


def function_output(answer: types.FunctionResponse) -> str:
    """A tool's answer as a ``function_call_output``'s ``output``."""
    return json.dumps(answer.response or {}, default=str)


_APPEND_HEAD = '{"type":"input_audio_buffer.append","audio":"'


def _append_event(pcm: bytes) -> str:
    """``input_audio_buffer.append`` of ``pcm``, as JSON. Written out, not
    through ``json.dumps``: base64 needs no escaping, and the scan of every
    character was most of the cost (≈15 → 4 µs for 50 ms of audio), twenty
    times a second per session."""
    return _APPEND_HEAD + base64.b64encode(pcm).decode("ascii") + '"}'


class _SpokenItem:
    """An assistant audio item of the current turn: where it starts in the
    turn's audio and how long it is (samples at 24 kHz)."""

    __slots__ = ("item_id", "start", "samples")

    def __init__(self, item_id: str, start: int) -> None:
        self.item_id = item_id
        self.start = start
        self.samples = 0

    @property
    def end(self) -> int:
        return self.start + self.samples


class OpenAIRealtimeConnection(BaseLlmConnection):
    def __init__(
        self,
        realtime: Any,  # the SDK's AsyncRealtimeConnection
        *,
        manual: bool,
        played: PlayedAudio | None,
    ) -> None:
        self._realtime = realtime
        self._manual = manual  # no server VAD: the client's activity edges are the turns
        self._played = played  # what the client has played of the current turn
        self._stop_listening = played.on_user_stop(self._user_stopped) if played else None
        self._sending: set[asyncio.Task[None]] = set()  # sends started from a callback
        self._closed = False
        self._ended = False  # receive() has seen the end of the connection
        self._items: list[_SpokenItem] = []  # this turn's audio items, in order
        # The turn is complete but may still be playing (answers arrive faster
        # than real time): its items stay until the next turn's audio comes.
        self._turn_over = False
        self._responding = False  # a response is being generated
        self._interrupted = False  # the current response was cut by the user
        self._calls: list[types.FunctionCall] = []  # of the response being generated
        self._pending_calls: set[str] = set()  # issued, not yet answered
        self._buffered = 0  # manual turns: samples appended since the last commit
        self._user_speaking = False  # the service's VAD heard speech start and not stop
        # Manual turns: the user spoke over the answer; ``interrupted`` goes
        # to ADK when the service confirms (truncated, or the cancelled answer).
        self._interrupt_pending = False

    # ------------------------------------------------------------ inputs
    async def _send(self, event: dict[str, Any]) -> None:
        # send_raw, not send: send() runs each dict through the SDK's typed
        # transform first (≈200 µs an event against ≈16 µs for the JSON
        # alone, measured with 50 ms of audio); our events need no aliasing,
        # and audio goes up twenty times a second per session.
        await self._realtime.send_raw(json.dumps(event))

    async def send_history(self, history: list[types.Content]) -> None:
        """The session's earlier turns as text items (the service takes no
        assistant audio in items)."""
        for item in history_items(history):
            await self.create_item(item)

    async def create_item(self, item: Item) -> None:
        """One item of a rebuilt conversation (``openai_transcript.py``); a
        function call's own item makes its output acceptable here."""
        await self._send({"type": "conversation.item.create", "item": item})

    async def respond(self) -> None:
        """Ask for the answer the conversation is owed (after tool outputs)."""
        await self._send({"type": "response.create"})

    def pending_calls(self) -> set[str]:
        """The calls issued and not answered yet."""
        return set(self._pending_calls)

    def expect_calls(self, call_ids: set[str]) -> None:
        """Calls a previous session issued: their outputs are sent here."""
        self._pending_calls |= call_ids

    def quiet(self) -> bool:
        """Nothing under way: no answer, no call owed, no user speaking and
        no audio of a manual turn uncommitted — a new session loses nothing."""
        return not self._in_turn() and not self._user_speaking and self._buffered == 0

    async def send_content(self, content: types.Content) -> None:
        parts = content.parts or []
        answers = [p.function_response for p in parts if p.function_response]
        if answers:
            await self._answer_calls(answers)
            return
        items: list[dict[str, Any]] = []
        for part in parts:
            if part.text:
                items.append({"type": "input_text", "text": part.text})
            elif part.inline_data and (part.inline_data.mime_type or "").startswith("image/"):
                items.append(_image(part.inline_data))
        if not items:
            return
        if self._responding:
            # A new turn while an answer is generated: that answer ends here
            # (the service allows one response at a time).
            await self._send({"type": "response.cancel"})
        await self._send(
            {
                "type": "conversation.item.create",
                "item": {"type": "message", "role": "user", "content": items},
            }
        )
        await self._send({"type": "response.create"})

    async def _answer_calls(self, answers: list[types.FunctionResponse]) -> None:
        for answer in answers:
            call_id = answer.id or ""
            if call_id not in self._pending_calls:
                log.warning("a function response for an unknown call %r: not sent", call_id)
                continue
            self._pending_calls.discard(call_id)
            await self._send(
                {
                    "type": "conversation.item.create",
                    "item": {
                        "type": "function_call_output",
                        "call_id": call_id,
                        "output": function_output(answer),
                    },
                }
            )
        if not self._pending_calls:
            # One answer for the whole step, once every call has its output.
            await self._send({"type": "response.create"})

    async def send_realtime(self, blob: RealtimeInput) -> None:
        if isinstance(blob, types.ActivityStart):
            if self._manual:
                if await self._barge_in() is not None:
                    self._interrupt_pending = True
                await self._send({"type": "input_audio_buffer.clear"})
                self._buffered = 0
        elif isinstance(blob, types.ActivityEnd):
            if self._manual:
                await self._commit()
        elif isinstance(blob, types.Blob):
            mime = blob.mime_type or ""
            if mime.startswith("audio/pcm"):
                rate = audio_rate(mime, default=0)
                if rate != RATE:
                    raise ValueError(f"expected audio at {RATE} Hz for OpenAI, got {mime!r}")
                pcm = blob.data or b""
                self._buffered += len(pcm) // 2
                await self._realtime.send_raw(_append_event(pcm))
            elif mime.startswith("image/"):
                # Seen with the next turn: an item, no answer of its own.
                await self._send(
                    {
                        "type": "conversation.item.create",
                        "item": {"type": "message", "role": "user", "content": [_image(blob)]},
                    }
                )
        elif (
            isinstance(blob, types.LiveClientRealtimeInput)
            and blob.audio_stream_end
            and self._user_speaking
            and not self._manual
        ):
            # The microphone is off mid-utterance: no silence will follow for
            # the service's VAD to end the turn on, so end it here. (Without
            # VAD the client's activity_end does.)
            self._user_speaking = False
            await self._send({"type": "input_audio_buffer.commit"})
            await self._send({"type": "response.create"})

    async def _commit(self) -> None:
        # The service refuses a commit of less than 100 ms; a turn that short
        # is a click of the button, not speech.
        if self._buffered < MIN_COMMIT:
            await self._send({"type": "input_audio_buffer.clear"})
        else:
            await self._send({"type": "input_audio_buffer.commit"})
            await self._send({"type": "response.create"})
        self._buffered = 0

    # ------------------------------------------------------------ barge-in
    def _truncation(self, played_s: float) -> dict[str, Any] | None:
        """The truncation of the item being heard when ``played_s`` of this
        turn has played; None if it all played (the model is not speaking)."""
        played = round(played_s * RATE)
        if not self._items or played >= self._items[-1].end:
            return None
        item = next((i for i in reversed(self._items) if i.start <= played), self._items[0])
        heard = max(0, min(played - item.start, item.samples))
        return {
            "type": "conversation.item.truncate",
            "item_id": item.item_id,
            "content_index": 0,
            "audio_end_ms": heard * 1000 // RATE,
        }

    async def _barge_in(self) -> LlmResponse | None:
        """The user started speaking: truncate the item being heard at the
        played position and cancel the answer being generated. The response
        to give ADK (``interrupted``), or None if the model was not speaking."""
        truncation = None
        if self._played is not None and self._items:
            truncation = self._truncation(self._played.played_seconds())
        if truncation is None and not self._responding:
            return None
        if truncation is not None:
            await self._send(truncation)
        if self._responding and self._manual:
            # With server VAD the service cancels it itself (interrupt_response).
            await self._send({"type": "response.cancel"})
        self._interrupted = self._responding
        self._new_turn()
        return LlmResponse(interrupted=True)

    def _interruption(self) -> list[LlmResponse]:
        """``interrupted`` for ADK, once, if a manual barge-in awaits it."""
        if not self._interrupt_pending:
            return []
        self._interrupt_pending = False
        return [LlmResponse(interrupted=True)]

    def _user_stopped(self, played_s: float) -> None:
        """The user stopped the answer on the client (its audio is dropped):
        the service keeps only what was heard and stops generating. The turn
        still ends as the service ends it (the cancelled ``response.done``),
        so the client's turn finishes."""
        events = [e for e in (self._truncation(played_s),) if e is not None]
        if self._responding:
            events.append({"type": "response.cancel"})
        self._new_turn()
        if events and not self._closed:
            task = asyncio.get_running_loop().create_task(self._send_all(events))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send_all(self, events: list[dict[str, Any]]) -> None:
        try:
            for event in events:
                await self._send(event)
        except ConnectionClosed:
            pass  # the receiver reports the close

    def _answering(self) -> bool:
        """An answer is under way: generated, or its audio not over."""
        return self._responding or (bool(self._items) and not self._turn_over)

    def _in_turn(self) -> bool:
        """The client is inside a turn that has not ended (an answer, or
        calls it waits on)."""
        return self._answering() or bool(self._pending_calls)

    def _new_turn(self) -> None:
        self._items.clear()
        self._turn_over = False

    # ------------------------------------------------------------ outputs
    async def receive(self) -> AsyncGenerator[LlmResponse, None]:
        # One generator for the whole connection; ADK calls receive() again
        # after it ends, and that call must end at once.
        if self._ended:
            return
        try:
            while True:
                try:
                    raw = await self._realtime.recv_bytes()
                except ConnectionClosed as exc:
                    self._ended = True
                    if self._answering():
                        yield LlmResponse(interrupted=True)  # the client's turn ends
                    if self._closed:
                        return
                    raise closed_error(exc) from exc
                try:
                    responses = await self._on_event(_event(raw))
                except SessionLost:
                    self._ended = True
                    if self._answering():
                        yield LlmResponse(interrupted=True)
                    raise
                for response in responses:
                    yield response
        finally:
            self._ended = True

    async def _on_event(self, event: dict[str, Any]) -> list[LlmResponse]:
        kind = event.get("type")
        if kind == "response.output_audio.delta":
            return [self._audio(event)]
        if kind == "response.output_audio_transcript.delta":
            text = event.get("delta") or ""
            return [_output_transcript(text, finished=False)] if text else []
        if kind == "response.output_audio_transcript.done":
            return [_output_transcript(event.get("transcript") or "", finished=True)]
        if kind == "response.output_text.delta":
            return [_text(event.get("delta") or "", partial=True)]
        if kind == "conversation.item.input_audio_transcription.delta":
            return [_input_transcript(event.get("delta") or "", finished=False)]
        if kind == "conversation.item.input_audio_transcription.completed":
            return [_input_transcript(event.get("transcript") or "", finished=True)]
        if kind == "response.created":
            self._responding, self._interrupted = True, False
            return []
        if kind == "response.function_call_arguments.done":
            self._calls.append(_function_call(event))
            return []
        if kind == "response.done":
            return self._response_done(event.get("response") or {})
        if kind == "input_audio_buffer.speech_started":
            self._user_speaking = True
            interrupted = await self._barge_in()
            started = _voice_activity(types.VoiceActivityType.ACTIVITY_START)
            return [interrupted, started] if interrupted else [started]
        if kind == "conversation.item.truncated":
            return self._interruption()
        if kind == "input_audio_buffer.speech_stopped":
            self._user_speaking = False
            return [_voice_activity(types.VoiceActivityType.ACTIVITY_END)]
        if kind == "error":
            return self._error(event.get("error") or {})
        if kind == "rate_limits.updated":
            for limit in event.get("rate_limits") or []:
                if limit.get("remaining") == 0:
                    log.info("OpenAI rate limit %s reached", limit.get("name"))
            return []
        return []  # session.*, item and part bookkeeping, buffer acks

    def _audio(self, event: dict[str, Any]) -> LlmResponse:
        delta = event.get("delta") or ""
        if not isinstance(delta, str):
            raise ProviderError("the model service sent audio that is not base64")
        try:
            pcm = base64.b64decode(delta, validate=True)
        except binascii.Error as exc:
            raise ProviderError("the model service sent audio that is not base64") from exc
        if len(pcm) % 2:
            # PCM16: an odd byte would shift every later sample by one byte.
            raise ProviderError(
                f"the model service sent audio of {len(pcm)} bytes, not whole 16-bit samples"
            )
        item_id = event.get("item_id") or ""
        if self._turn_over:
            self._new_turn()
        items = self._items
        if not items or items[-1].item_id != item_id:
            items.append(_SpokenItem(item_id, start=items[-1].end if items else 0))
        items[-1].samples += len(pcm) // 2
        return LlmResponse(
            content=types.Content(
                role="model",
                parts=[types.Part(inline_data=types.Blob(mime_type=AUDIO_MIME, data=pcm))],
            )
        )

    def _response_done(self, response: dict[str, Any]) -> list[LlmResponse]:
        self._responding = False
        status = response.get("status")
        out: list[LlmResponse] = []
        calls, self._calls = self._calls, []
        if status == "failed":
            error = (response.get("status_details") or {}).get("error") or {}
            out += self._error(error)
        elif calls and status == "completed":
            # The step's calls in one response; the turn goes on after them.
            self._pending_calls = {call.id or "" for call in calls}
            return [
                LlmResponse(
                    content=types.Content(
                        role="model", parts=[types.Part(function_call=c) for c in calls]
                    )
                )
            ]
        if status == "cancelled" and self._interrupted:
            return out + self._interruption()  # told as interrupted when the user spoke
        done = LlmResponse(turn_complete=True, usage_metadata=_usage(response.get("usage")))
        if status == "incomplete":
            reason = (response.get("status_details") or {}).get("reason")
            if reason == "max_output_tokens":
                done.finish_reason = types.FinishReason.MAX_TOKENS
        out.append(done)
        self._turn_over = True
        return out

    def _error(self, error: dict[str, Any]) -> list[LlmResponse]:
        code = str(error.get("code") or error.get("type") or "error")
        message = _KEY.sub("sk-…", str(error.get("message") or ""))
        log.warning("OpenAI error %s: %s", code, message)
        if code in _FATAL_CODES:
            # The service closes next: a session at its time limit may be
            # continued on a new one, a refused key not.
            raise SessionLost(
                f"the model service ended the live session: {code}: {message}",
                recoverable=code == "session_expired",
                cause="limit",
            )
        return [LlmResponse(error_code=code, error_message=message)]

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._stop_listening is not None:
            self._stop_listening()
        await self._realtime.close()


# ---------------------------------------------------------------- events


def _event(raw: bytes) -> dict[str, Any]:
    """One frame from the service as its event (the SDK checks nothing)."""
    try:
        event = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # not UTF-8 or not JSON; nested too deep
        raise ProviderError("the model service sent a frame that is not JSON") from exc
    if not isinstance(event, dict):
        raise ProviderError(
            f"the model service sent a frame that is not an event: a JSON {type(event).__name__}"
        )
    return event


# ---------------------------------------------------------------- responses


def _image(blob: types.Blob) -> dict[str, Any]:
    data = base64.b64encode(blob.data or b"").decode("ascii")
    return {"type": "input_image", "image_url": f"data:{blob.mime_type};base64,{data}"}


def _function_call(event: dict[str, Any]) -> types.FunctionCall:
    try:
        args = json.loads(event.get("arguments") or "{}")
    except ValueError:
        args = {}
    return types.FunctionCall(
        id=event.get("call_id"),
        name=event.get("name"),
        args=args if isinstance(args, dict) else {},
    )


def _output_transcript(text: str, *, finished: bool) -> LlmResponse:
    return LlmResponse(
        output_transcription=types.Transcription(text=text, finished=finished),
        partial=not finished,
    )


def _input_transcript(text: str, *, finished: bool) -> LlmResponse:
    return LlmResponse(
        input_transcription=types.Transcription(text=text, finished=finished),
        partial=not finished,
    )


def _text(text: str, *, partial: bool) -> LlmResponse:
    return LlmResponse(
        content=types.Content(role="model", parts=[types.Part(text=text)]), partial=partial
    )


def _voice_activity(kind: types.VoiceActivityType) -> LlmResponse:
    return LlmResponse(voice_activity=types.VoiceActivity(voice_activity_type=kind))


def _usage(usage: Any) -> types.GenerateContentResponseUsageMetadata | None:
    if not isinstance(usage, dict):
        return None
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=usage.get("input_tokens"),
        candidates_token_count=usage.get("output_tokens"),
        total_token_count=usage.get("total_tokens"),
    )
