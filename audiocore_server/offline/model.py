"""The offline live model: a real ADK ``BaseLlm`` that needs no network.

It lets the whole pipeline (runner, sessions, events, tools) run for real in
tests and in the demo without Google credentials. It does not understand
speech. What it does, deterministically:

* Audio turns. As Gemini does, it reads the connection's turn detection from
  the live request's ``realtime_input_config``. With automatic activity
  detection disabled ("manual", push-to-talk) a turn is exactly the audio
  between ``activity_start`` and ``activity_end``, and other audio is
  ignored. Otherwise an energy detector ends turns — a chunk (50 ms, as the
  server sends them) whose RMS is above ``vad_threshold_dbfs`` is speech,
  and the turn ends after
  ``hangover_ms`` without speech — and activity brackets still work as
  explicit edges: the bracketed audio is one turn, then detection resumes.
  It then answers with, as separate responses: an input "transcription" that
  honestly *describes* the utterance (duration, sample count, peak and RMS
  level — there is no speech recognition), an output transcription, the
  user's own audio resampled to 24 kHz (the echo), and ``turn_complete``.
* Text turns. It answers with text and a short audio cue. Cues call the
  demo tools: "what time is it" → ``get_current_time``, "weather in Tokyo"
  → ``get_weather``, "pay 5 EUR to Alice" → ``process_payment``, "play
  jazz" / "stop the music" → ``change_bgm``, "where am I" →
  ``get_location``; "start a task to sum the amount column of sales.csv" →
  ``start_task``, "what's the status of my task [task_…]" →
  ``get_task_status``, "cancel my task [task_…]" → ``cancel_task``;
  a line "call NAME {json}" calls any declared tool and "transfer AGENT"
  transfers (``call_cues.py``; these lines win over the phrase cues); the
  memory cues ("remember that …", "what do you remember about …") are in
  ``memory_cues.py``, a task agent's permission questions and their
  answers ("yes, always", "no") in ``permission_cues.py``.
  A request whose every clause is a cue of a different tool ("pay 5 EUR to
  Alice and where am I", clauses split at "and", commas, semicolons) calls
  them all in one response. The function responses of one content (also late ones, for
  delegated tools) produce one final answer.
* Voice activity. Its detector's onsets and ends are told as Gemini tells
  them (``voice_activity`` ``ACTIVITY_START`` / ``ACTIVITY_END``); a client's
  activity brackets are not echoed.
* Reports. Each answer carries its model version (``MODEL_VERSION``), a
  finish reason and token usage, counted as a whitespace-separated word per
  token of text in and out (the new user text or function response; the
  answer's text) and, for audio, ``AUDIO_TOKENS_PER_S`` per second (Gemini's
  rate). A text answer longer than ``MAX_ANSWER_TOKENS`` is cut there and
  ends with ``MAX_TOKENS`` (so "You said: …" of a long message does).
* Images (``audiocore_server/offline/images.py``). The images of a turn (a live
  connection's image blobs since its last turn, the last four; a text
  call's inline images) are described in its answer — dimensions and mean
  colour — and "draw me a red square" is answered with a PNG.
* Barge-in. It tracks how long its last answer takes to play; speech (or
  ``activity_start``) before that ends emits ``interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import Any

import numpy as np
from google.adk.models.base_llm import BaseLlm
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

import audiocore

from ..audio.voice import END_OF_SPEECH_S, VOICE_DBFS
from ..models import live_request
from . import call_cues
from . import images as offline_images
from . import memory_cues as offline_memory
from . import permission_cues as offline_permissions
from .speech import INPUT_RATE, EnergySegmenter, describe_utterance

OUTPUT_RATE = 24_000
OUTPUT_MIME = f"audio/pcm;rate={OUTPUT_RATE}"
MODEL_VERSION = "offline-1"
MAX_ANSWER_TOKENS = 256  # its output limit, as a Gemini model's max_output_tokens
AUDIO_TOKENS_PER_S = 25  # what Gemini counts for a second of audio

# How the server hands over a background task's outcome (audiocore_server/live/outcomes.py).
_TASK_OUTCOME = re.compile(
    r"\[background task (\S+) (completed|failed)\] Objective: .*?\. "
    r"(?:Result: |It failed: )(.*) Tell the user this now, briefly\.$",
    re.S,
)
_TASK_ID = re.compile(r"\btask_[0-9a-f]{8}\b")
# Where a request for several things splits into its clauses.
_CLAUSES = re.compile(r"\s*(?:,|;|\band(?: also| then)?\b)\s*", re.I)


def _task_id_in(match: re.Match[str]) -> dict[str, Any]:
    found = _TASK_ID.search(match.string)
    return {"task_id": found[0]} if found else {}


# Textual cues for the demo tools: tool, pattern, the call's arguments from the
# match. The task cues come first: an objective may mention anything.
_CUES: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], dict[str, Any]]], ...] = (
    (
        "start_task",
        re.compile(r"\bstart (?:a |another )?(?:background )?task(?: to|:)\s+(.+)", re.I | re.S),
        lambda m: {"objective": m[1].strip()},
    ),
    (
        "get_task_status",
        re.compile(r"\b(?:status of|how is|how's|is) (?:my |the |that )?task\b", re.I),
        _task_id_in,
    ),
    (
        "cancel_task",
        re.compile(r"\b(?:cancel|stop|abort) (?:my |the |that )?task\b", re.I),
        _task_id_in,
    ),
    (
        "get_current_time",
        re.compile(r"\b(what(?:'s| is)? (?:the )?time|current time|time is it)\b", re.I),
        lambda m: {},
    ),
    (
        "get_weather",
        re.compile(r"\bweather (?:in|for) ([a-z][a-z .'-]*[a-z])", re.I),
        lambda m: {"location": m[1]},
    ),
    (
        "process_payment",
        re.compile(r"\bpay (\d+(?:\.\d+)?) ?([a-z]{3}) to ([a-z][\w .'-]*[\w])", re.I),
        lambda m: {"amount": float(m[1]), "currency": m[2].upper(), "recipient": m[3]},
    ),
    (
        "change_bgm",
        re.compile(r"\bplay (jazz|ambient|lofi)\b|\b(stop) the music\b", re.I),
        lambda m: {"track": m[1] or "off"},
    ),
    ("get_location", re.compile(r"\bwhere am i\b", re.I), lambda m: {}),
)


class OfflineLiveModel(BaseLlm):
    """Deterministic offline stand-in for a Gemini Live model."""

    model: str = "offline"
    vad_threshold_dbfs: float = VOICE_DBFS
    hangover_ms: int = round(END_OF_SPEECH_S * 1000)
    preroll_ms: int = 300
    min_speech_ms: int = 60
    max_utterance_s: float = 30.0
    chunk_ms: int = 40  # echo audio is emitted in responses of this length
    max_pending_responses: int = 512

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"offline(-.*)?"]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """Non-live calls: answer the last user content — its text (calling
        tools as in live mode), or the function responses it carries."""
        last = next(
            (c for c in reversed(llm_request.contents) if c.role == "user" and c.parts), None
        )
        parts = last.parts or [] if last is not None else []
        responses = [p.function_response for p in parts if p.function_response]
        if responses:
            answers = _answer_tool_results(responses)
        else:
            text = " ".join(p.text for p in parts if p.text)
            turns = sum(
                1
                for c in llm_request.contents
                if c.role == "user" and any(p.text for p in c.parts or [])
            )
            seen = [
                # Decoding takes a while for a large image: not on the loop.
                await asyncio.to_thread(
                    offline_images.describe,
                    p.inline_data.mime_type or "",
                    p.inline_data.data or b"",
                )
                for p in parts
                if p.inline_data and (p.inline_data.mime_type or "").startswith("image/")
            ]
            tools, instruction = _declared_tools(llm_request), live_request.instruction(llm_request)
            targets = call_cues.transfer_targets(llm_request)
            answers = _answer_turn(text, seen, tools, turns, instruction, targets)
        for response in answers:
            if response.turn_complete or response.content is None:
                continue
            if response.content.parts and _is_audio(response.content.parts[0]):
                continue  # the audio cue: a text model answers in text only
            yield response

    def connect(
        self, llm_request: LlmRequest
    ) -> contextlib.AbstractAsyncContextManager[BaseLlmConnection]:
        return self._connect(llm_request)

    @contextlib.asynccontextmanager
    async def _connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
        connection = OfflineLiveConnection(
            self,
            _declared_tools(llm_request),
            manual=live_request.manual_turns(llm_request),
            instruction=live_request.instruction(llm_request),
            transfer_targets=call_cues.transfer_targets(llm_request),
        )
        try:
            yield connection
        finally:
            await connection.close()


def _declared_tools(llm_request: LlmRequest) -> set[str]:
    names = {d.name for d in live_request.function_declarations(llm_request) if d.name}
    return names | set(llm_request.tools_dict)


class OfflineLiveConnection(BaseLlmConnection):
    def __init__(
        self,
        model: OfflineLiveModel,
        tools: set[str],
        *,
        manual: bool = False,
        instruction: str = "",
        transfer_targets: frozenset[str] | None = None,
    ) -> None:
        self._model = model
        self._tools = tools
        self._targets = transfer_targets
        self._instruction = instruction  # what it was told at connect
        self._responses: asyncio.Queue[LlmResponse | None] = asyncio.Queue(
            model.max_pending_responses
        )
        self._closed = False
        self._history_len = 0
        self._manual = manual  # turns are only the client's activity brackets
        self._in_activity = False  # between activity_start and activity_end
        self._speaking_until = 0.0
        self._segmenter = EnergySegmenter(model)
        self._images: deque[str] = deque(maxlen=4)  # described, since the last turn

    # ------------------------------------------------------------ inputs
    async def send_history(self, history: list[types.Content]) -> None:
        self._history_len = len(history)

    async def send_content(self, content: types.Content) -> None:
        parts = content.parts or []
        responses = [p.function_response for p in parts if p.function_response]
        if responses:
            await self._emit_all(_answer_tool_results(responses))
            return
        text = " ".join(p.text for p in parts if p.text)
        self._history_len += 1
        answer = _answer_turn(
            text,
            list(self._images),
            self._tools,
            self._history_len,
            self._instruction,
            self._targets,
        )
        self._images.clear()
        await self._emit_all(answer)
        self._speaking_until = time.monotonic() + _audio_seconds(answer)

    async def send_realtime(self, blob: Any) -> None:
        if isinstance(blob, types.ActivityStart):
            self._in_activity = True
            self._segmenter.start_manual()
            await self._maybe_interrupt()
        elif isinstance(blob, types.ActivityEnd):
            if self._in_activity:
                self._in_activity = False
                await self._answer_audio(self._segmenter.end_manual())
        elif isinstance(blob, types.LiveClientRealtimeInput):
            if blob.audio_stream_end and not (self._manual or self._in_activity):
                if self._segmenter.active:
                    await self._emit(_voice_activity(types.VoiceActivityType.ACTIVITY_END))
                await self._answer_audio(self._segmenter.force_end())
        elif isinstance(blob, types.Blob) and (blob.mime_type or "").startswith("audio/pcm"):
            pcm = blob.data or b""
            if self._in_activity:
                self._segmenter.append_manual(pcm)
                return
            if self._manual:
                return  # outside a bracket: not part of any turn
            was_active = self._segmenter.active
            event = self._segmenter.feed(pcm)
            if event == "onset":
                await self._emit(_voice_activity(types.VoiceActivityType.ACTIVITY_START))
                await self._maybe_interrupt()
            elif was_active and not self._segmenter.active:
                # Ended: an utterance, or too little speech for one (a click).
                await self._emit(_voice_activity(types.VoiceActivityType.ACTIVITY_END))
                await self._answer_audio(event if isinstance(event, bytes) else None)
        elif isinstance(blob, types.Blob) and (blob.mime_type or "").startswith("image/"):
            described = await asyncio.to_thread(
                offline_images.describe, blob.mime_type or "", blob.data or b""
            )
            self._images.append(described)
        # Other blobs are accepted and ignored.

    async def _maybe_interrupt(self) -> None:
        if time.monotonic() < self._speaking_until:
            self._speaking_until = 0.0
            await self._emit(LlmResponse(interrupted=True))

    async def _answer_audio(self, pcm: bytes | None) -> None:
        if pcm is None:
            return
        self._history_len += 1
        for k, response in enumerate(_answer_speech(pcm, self._model.chunk_ms)):
            await self._emit(response)
            if k % 8 == 7:
                # Built as they go, the loop let go between them: a whole
                # answer at once held every other conversation ~1 ms.
                await asyncio.sleep(0)
        echo_seconds = len(pcm) / 2 / INPUT_RATE
        self._speaking_until = time.monotonic() + echo_seconds

    async def _emit_all(self, responses: list[LlmResponse]) -> None:
        for response in responses:
            await self._emit(response)

    async def _emit(self, response: LlmResponse) -> None:
        if not self._closed:
            # Blocks when the consumer stalls: the bound that stops a stalled
            # client from growing memory here.
            await self._responses.put(response)

    # ------------------------------------------------------------ outputs
    async def receive(self) -> AsyncGenerator[LlmResponse, None]:
        # One generator for the whole connection: ADK ends the run when a
        # receive() call yields nothing.
        while True:
            response = await self._responses.get()
            if response is None:
                # Closed. ADK calls receive() again after a generator that
                # yielded ends; that call must end at once (yielding nothing
                # ends the run), so the marker stays for it.
                self._responses.put_nowait(None)
                return
            yield response

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        while not self._responses.empty():  # nobody will read them
            self._responses.get_nowait()
        self._responses.put_nowait(None)


# ---------------------------------------------------------------- answers

_CUE_SECONDS = 0.15


def _voice_activity(kind: types.VoiceActivityType) -> LlmResponse:
    """What the detector saw, as Gemini's ``voiceActivity`` tells it."""
    return LlmResponse(voice_activity=types.VoiceActivity(voice_activity_type=kind))


def _audio_response(pcm: bytes) -> LlmResponse:
    return LlmResponse(
        content=types.Content(
            role="model",
            parts=[types.Part(inline_data=types.Blob(mime_type=OUTPUT_MIME, data=pcm))],
        )
    )


def _answer_speech(pcm: bytes, chunk_ms: int) -> Iterator[LlmResponse]:
    n = len(pcm) // 2
    echo = bytes(audiocore.resample(pcm, INPUT_RATE, OUTPUT_RATE, input="s16", output="s16"))
    yield LlmResponse(
        input_transcription=types.Transcription(text=describe_utterance(pcm), finished=True),
        partial=False,
    )
    yield LlmResponse(
        output_transcription=types.Transcription(
            text=f"I heard {n / INPUT_RATE:.2f} seconds of audio. Here it is back.",
            finished=True,
        ),
        partial=False,
    )
    step = chunk_ms * OUTPUT_RATE // 1000 * 2
    for i in range(0, len(echo), step):
        yield _audio_response(echo[i : i + step])
    heard, said = (
        round(len(b) / 2 / rate * AUDIO_TOKENS_PER_S)
        for b, rate in (
            (pcm, INPUT_RATE),
            (echo, OUTPUT_RATE),
        )
    )
    yield _reported(LlmResponse(turn_complete=True), heard, said)


def _tokens(text: str) -> int:
    return len(text.split())


def _reported(
    response: LlmResponse,
    prompt_tokens: int,
    answer_tokens: int,
    reason: types.FinishReason = types.FinishReason.STOP,
) -> LlmResponse:
    """``response`` with what a model reports of its answer."""
    response.model_version = MODEL_VERSION
    response.finish_reason = reason
    response.usage_metadata = types.GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt_tokens,
        candidates_token_count=answer_tokens,
        total_token_count=prompt_tokens + answer_tokens,
    )
    return response


def _audio_seconds(responses: list[LlmResponse]) -> float:
    samples = sum(
        len(p.inline_data.data or b"") // 2
        for r in responses
        if r.content
        for p in r.content.parts or []
        if p.inline_data and _is_audio(p)
    )
    return samples / OUTPUT_RATE


def audio_cue(seconds: float = _CUE_SECONDS) -> bytes:
    """A 660 Hz tone (by default a 150 ms blip, 10 ms fades) at 24 kHz."""
    n = int(seconds * OUTPUT_RATE)
    t = np.arange(n) / OUTPUT_RATE
    ramp = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.010)
    tone = 0.25 * np.sin(2 * np.pi * 660 * t) * ramp
    return np.rint(tone * 32767).astype("<i2").tobytes()


def _text_answer(text: str, prompt: str, seconds: float = _CUE_SECONDS) -> list[LlmResponse]:
    """The answer `text` to `prompt` (what the model was given), with a tone."""
    reason = types.FinishReason.STOP
    if _tokens(text) > MAX_ANSWER_TOKENS:
        # Cut at the limit, as a model stops generating there.
        text = " ".join(text.split()[:MAX_ANSWER_TOKENS])
        reason = types.FinishReason.MAX_TOKENS
    answer = LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
    return [
        _reported(answer, _tokens(prompt), _tokens(text), reason),
        _audio_response(audio_cue(seconds)),
        LlmResponse(turn_complete=True),
    ]


def _handed_over(text: str) -> list[LlmResponse] | None:
    """The answer to a text the server hands over (a background task's
    outcome, a task agent's question), else None: never read for cues."""
    outcome = _TASK_OUTCOME.match(text)
    if outcome:
        # Told at some length (a second of tone), as a model reading it out would.
        task_id, state, result = outcome.groups()
        return _text_answer(f"Your background task {task_id} {state}: {result}", text, seconds=1.0)
    asked = offline_permissions.told(text)
    return _text_answer(asked, text) if asked is not None else None


def _answer_text(
    text: str, tools: set[str], history_len: int, instruction: str = ""
) -> list[LlmResponse]:
    told = offline_memory.told(text, instruction)
    if told is not None:
        return _text_answer(told, text)
    memory_call = offline_memory.call_for(text, tools)
    if memory_call is not None:
        return [_function_call(offline_memory.TOOL, memory_call)]
    decision = offline_permissions.call_for(text, tools)
    if decision is not None:
        return [_function_call(offline_permissions.TOOL, decision)]
    calls = _cued_calls(text, tools)
    if calls:
        return [_function_calls(calls)]
    earlier = f" ({history_len - 1} earlier turns in this session)" if history_len > 1 else ""
    return _text_answer(f"You said: {text.strip()}{earlier}", text)


def _cue(text: str, tools: set[str]) -> tuple[str, dict[str, Any]] | None:
    for name, pattern, build in _CUES:
        match = pattern.search(text)
        if match and name in tools:
            return name, build(match)
    return None


def _cued_calls(text: str, tools: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """The calls a text asks for: one per clause when every clause of it
    ("pay 5 EUR to Alice and where am I") is a cue of a different tool —
    several calls in one response, as Gemini makes them — else the first
    cue of the whole text."""
    clauses = _CLAUSES.split(text)
    if len(clauses) > 1:
        found = [_cue(clause, tools) for clause in clauses]
        calls = [call for call in found if call is not None]
        if len(calls) == len(clauses) and len({name for name, _ in calls}) == len(calls):
            return calls
    single = _cue(text, tools)
    return [single] if single else []


def _answer_turn(
    text: str,
    images: list[str],
    tools: set[str],
    history_len: int,
    instruction: str = "",
    targets: frozenset[str] | None = None,
) -> list[LlmResponse]:
    """A user turn of ``text`` and the ``images`` it was given (described)."""
    answer = _handed_over(text)
    if answer is not None:
        return answer
    cued = call_cues.read(text, tools, targets)
    if cued is not None:
        return [_function_calls(cued.calls)] if cued.calls else _text_answer(cued.answer, text)
    drawn = offline_images.drawing(text)
    if drawn is not None:
        said, picture = drawn
        answer = _text_answer(said, text)
        answer.insert(1, LlmResponse(content=types.Content(role="model", parts=[picture])))
        return answer
    if images:
        seen = offline_images.describe_all(images)
        return _text_answer(f"{seen} You said: {text.strip()}" if text.strip() else seen, text)
    return _answer_text(text, tools, history_len, instruction)


def _is_audio(part: types.Part) -> bool:
    return bool(part.inline_data and (part.inline_data.mime_type or "").startswith("audio/"))


def _function_call(name: str, args: dict[str, Any]) -> LlmResponse:
    return _function_calls([(name, args)])


def _function_calls(calls: list[tuple[str, dict[str, Any]]]) -> LlmResponse:
    """One response with ``calls`` (ADK gives each its id)."""
    parts = [
        types.Part(function_call=types.FunctionCall(name=name, args=args)) for name, args in calls
    ]
    return LlmResponse(content=types.Content(role="model", parts=parts))


def _answer_tool_results(responses: list[types.FunctionResponse]) -> list[LlmResponse]:
    """One answer however many tools ran: the function responses of one
    content, told together."""
    text = " ".join(_tool_result_text(response) for response in responses)
    prompt = " ".join(json.dumps(r.response or {}, default=str) for r in responses)
    return _text_answer(text, prompt)


def _tool_result_text(response: types.FunctionResponse) -> str:
    result = response.response or {}
    if response.name == "get_current_time" and "time" in result:
        return f"It is {result['time']} ({result.get('timezone', 'UTC')})."
    if response.name == offline_memory.TOOL:
        return offline_memory.answer(result)
    return f"{response.name} returned {json.dumps(result, default=str, sort_keys=True)}."
