"""``POST /api/chat`` (and ``/stream``): AI SDK's HTTP chat, on the same agent.

AI SDK v6's ``DefaultChatTransport`` posts ``{id, messages, trigger,
messageId?}`` and reads the UI message stream back as Server-Sent Events
(``data: {chunk}`` per event, ``data: [DONE]`` at the end, header
``x-vercel-ai-ui-message-stream: v1``). Here the chat ``id`` names an ADK
session (created on first use); only the last message is new (the history
is never replayed into the model): a user message runs the agent — its text
model, the same tools — with ``runner.run_async``, and its events become
chunks through the same translator as ``/ws``.

Tools go through AI SDK's own HTTP round trip. A delegated tool (approval,
browser) stops the run: its call is in the session, unanswered; the response
asks the client (``tool-approval-request``, or a ``tool-input-available``
marked ``clientExecutes``) and finishes with ``finishReason: "tool-calls"``.
The next request's messages carry the answers in their tool parts; they
are applied, as a live connection applies its client's, to the calls still
unanswered in the session's events (``audiocore_server/tools/calls.py``, the one model
of a delegated call): an approved server tool runs, a browser tool's output
is taken, and the function responses (with the tool's state writes) resume
the run — once every call of the step is settled: until then the settled
calls' responses are kept in the session, and the model answers once, for
all of them. Answers to calls already answered are ignored, so a
resubmitted history never runs a tool twice.

The chat's **owner** (its long-term memory, its background tasks) is the
body's ``userKey``, as a ``/ws`` client's (AI SDK: the transport's ``body``
option), bound by a token as there (``bind_user_key``: a token's owner
must be it, or stands for it when absent); written into the session state
(``task_owner``) before the turn when it changed, and removed from it for
a request that names none — the chat id alone never carries a key's memory.

The seed project's SSE client posts the same body to ``/stream`` with an
``X-API-Key`` header: accepted, and required when the server has an API key.
A client that goes away cancels the run. ``GET /api/chat/{id}/stream``
replays a run still in progress for that chat (else 204).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import anyio

# StreamingMode: ADK's documented import path, though not re-exported by name.
from google.adk.agents.run_config import RunConfig, StreamingMode  # type: ignore[attr-defined,unused-ignore]
from google.adk.events import Event, EventActions
from google.adk.sessions import Session
from google.genai import types
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ..agent.runners import Agents, AppRunners, UnknownApp
from ..gate.owners import NotOwner, bind_user_key, key_owner
from ..settings import Settings
from ..storage.claims import SessionBusy
from ..storage.session_access import SessionAccess
from ..storage.users import API_SESSION_ID, CHAT_USER_ID
from ..tasks import write_owner
from ..tools.calls import (
    Outcome,
    PendingCall,
    RunOnServer,
    apply,
    delegated_calls,
    log_decision,
    pending_in,
    run_on_server,
)
from ..tools.confirmation import (
    as_approval_requests,
    confirmation_answer,
    original_call,
    requests_pending,
)
from ..tools.spec import ToolSpec, ToolState
from ..turns.events import ModelAudio, TurnEnd, TurnTranslator
from ..wire import chat_messages, chunks, fields
from ..wire.http_body import HttpError, read_json_body

log = logging.getLogger(__name__)

# What AI SDK's createUIMessageStreamResponse sends (ui-message-stream-headers.ts).
STREAM_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
DONE = "data: [DONE]\n\n"


def sse(chunk: chunks.Chunk) -> str:
    return f"data: {chunks.encode(chunk)}\n\n"


@dataclasses.dataclass
class _Resolved:
    shown: list[chunks.Chunk] = dataclasses.field(default_factory=list)  # the calls' outputs
    responses: list[types.Part] = dataclasses.field(default_factory=list)
    state_delta: dict[str, Any] = dataclasses.field(default_factory=dict)
    asks: list[chunks.Chunk] = dataclasses.field(default_factory=list)  # calls to run now
    waiting: bool = False  # a call of their step is still unanswered after these answers

    def add(self, outcome: Outcome) -> None:
        self.shown.append(outcome.client)
        self.responses.append(types.Part(function_response=outcome.function_response()))
        self.state_delta.update(outcome.state_delta)


async def resolve_answers(
    session: Session,
    answers: Sequence[fields.ToolApproval | fields.ToolResult],
    tools: Mapping[str, ToolSpec],
    timeout_s: float,
) -> _Resolved:
    """Apply the answers a request's messages carry to the calls still
    pending in the session (``tool_calls``, as a live connection does); a
    browser tool still waiting for its result is asked to run again."""
    pending = pending_in(session.events, tools, timeout_s)
    out = _Resolved()
    state = ToolState(session.state)
    settled: list[Outcome] = []
    for step in apply(pending, answers, session_id=session.id, via="http"):
        if isinstance(step, Outcome):
            settled.append(step)
        elif isinstance(step, RunOnServer):
            settled.append(await run_on_server(step.call, state, session.id))
    for outcome in settled:
        out.add(outcome)
        del pending[outcome.call.call_id]
    # Only the same step's calls hold the answer back: a call left
    # unanswered in an earlier turn must not silence every later one.
    steps = {step.call.step for step in settled}
    out.waiting = any(call.step in steps for call in pending.values())
    for call in pending.values():
        if call.awaits_browser:
            # The stream of this response ends with the finish: no END_OF_STREAM.
            out.asks += [c for c in call.run_now() if not isinstance(c, chunks.EndOfStream)]
    return out


@dataclasses.dataclass
class _Confirmations:
    parts: list[types.Part] = dataclasses.field(default_factory=list)  # ADK's answers
    denied: set[str] = dataclasses.field(default_factory=set)  # the calls refused


def confirmation_answers(
    session: Session, answers: Sequence[fields.ToolApproval | fields.ToolResult]
) -> tuple[_Confirmations, list[fields.ToolApproval | fields.ToolResult]]:
    """The approvals that answer ADK's own confirmation requests still
    pending in the session, as the function responses that make ADK run
    (or refuse) each call once; and the other answers. An answer to a
    request already answered is not pending any more: ignored, as every
    answer a resubmitted history repeats."""
    pending = requests_pending(session.events)
    out = _Confirmations()
    rest: list[fields.ToolApproval | fields.ToolResult] = []
    for answer in answers:
        request = (
            pending.pop(answer.approval_id, None)
            if isinstance(answer, fields.ToolApproval)
            else None
        )
        if request is None:
            rest.append(answer)
            continue
        assert isinstance(answer, fields.ToolApproval)
        original = original_call(request)
        log_decision(session.id, "http", original.name or "", original.args or {}, answer)
        out.parts.append(confirmation_answer(request, answer))
        if not answer.approved:
            out.denied.add(original.id or "")
    return out, rest


class _Replay:
    """A run in progress, for a client that reconnects to it."""

    def __init__(self) -> None:
        self.frames: list[str] = []
        self.done = False
        self._changed = asyncio.Condition()

    async def add(self, frame: str) -> None:
        async with self._changed:
            self.frames.append(frame)
            self._changed.notify_all()

    async def close(self) -> None:
        async with self._changed:
            self.done = True
            self._changed.notify_all()

    async def follow(self) -> AsyncIterator[str]:
        sent = 0

        def ready(seen: int) -> Callable[[], bool]:
            return lambda: self.done or len(self.frames) > seen

        while True:
            async with self._changed:
                await self._changed.wait_for(ready(sent))
                frames, done = self.frames[sent:], self.done
            for frame in frames:
                yield frame
            sent += len(frames)
            if done:
                return


def chat_owner(request: Request, user_key: object) -> str | None:
    """The chat's owner: ``key:<userKey>`` (a token's owner when it names
    none), or None. ``InputError`` for a malformed key, ``HttpError`` 403
    for a key that is not the token's owner."""
    try:
        key = bind_user_key(request.scope, fields.user_key(user_key))
    except NotOwner as exc:
        raise HttpError(403, str(exc)) from None
    return None if key is None else key_owner(key)


class ChatEndpoint:
    def __init__(self, settings: Settings, sessions: SessionAccess, agents: Agents) -> None:
        self._settings = settings
        self._sessions = sessions
        self._agents = agents
        self._limits = fields.Limits(
            settings.max_message_bytes, settings.max_image_bytes, settings.max_text_chars
        )
        self._runs: dict[str, _Replay] = {}

    def routes(self) -> list[Route]:
        return [
            Route("/api/chat", self.post, methods=["POST"]),
            Route("/stream", self.post, methods=["POST"]),
            Route("/api/chat/{chat_id}/stream", self.resume, methods=["GET"]),
        ]

    async def post(self, request: Request) -> Response:
        try:
            settings = self._settings
            body = await read_json_body(
                request, settings.max_http_body_bytes, settings.body_timeout_s
            )
            if not isinstance(body, dict):
                raise HttpError(400, "request body: expected a JSON object")
            chat_id = body.get("id")
            if not isinstance(chat_id, str) or not API_SESSION_ID.fullmatch(chat_id):
                raise HttpError(400, "id: expected the chat id (1 to 128 of A-Z a-z 0-9 . _ : -)")
            owner = chat_owner(request, body.get("userKey"))
            submit = chat_messages.decode_chat(body, self._limits)
            app = self._select(body.get("app"))
        except HttpError as exc:
            return Response(
                exc.detail, status_code=exc.status, media_type="text/plain", headers=exc.headers
            )
        except fields.InputError as exc:
            return Response(str(exc), status_code=400, media_type="text/plain")
        message_id = body.get("messageId")
        continuing = isinstance(message_id, str) and submit.text is None
        return StreamingResponse(
            self._stream(app, chat_id, owner, submit, message_id if continuing else None),
            headers=STREAM_HEADERS,
        )

    def _select(self, name: object) -> AppRunners:
        """The app the body names (``app``); none named: the only one."""
        try:
            return self._agents.select(None if name is None else fields.app_name(name, "app"))
        except UnknownApp as exc:
            raise HttpError(404, str(exc)) from None

    async def resume(self, request: Request) -> Response:
        replay = self._runs.get(request.path_params["chat_id"])
        if replay is None:
            return Response(status_code=204)
        return StreamingResponse(replay.follow(), headers=STREAM_HEADERS)

    async def _stream(
        self,
        app: AppRunners,
        chat_id: str,
        owner: str | None,
        submit: chat_messages.ChatSubmit,
        message_id: str | None,
    ) -> AsyncIterator[str]:
        replay = _Replay()
        self._runs[chat_id] = replay
        try:
            async for chunk in self._chunks(app, chat_id, owner, submit, message_id):
                frame = sse(chunk)
                await replay.add(frame)
                yield frame
            await replay.add(DONE)
            yield DONE
        finally:
            with anyio.CancelScope(shield=True):
                await replay.close()
            if self._runs.get(chat_id) is replay:
                del self._runs[chat_id]

    async def _chunks(
        self,
        app: AppRunners,
        chat_id: str,
        owner: str | None,
        submit: chat_messages.ChatSubmit,
        message_id: str | None,
    ) -> AsyncIterator[chunks.Chunk]:
        if app.chat_refusal is not None:
            yield chunks.Error(app.chat_refusal)
            return
        translator = TurnTranslator(app.tools, self._agents.chat_model_name)
        taken = asyncio.Event()  # another request took the chat: stop this run
        try:
            async with self._sessions.for_app(app.name).open_session(
                chat_id, taken.set, user_id=CHAT_USER_ID, keep_id=True
            ) as opened:
                await write_owner(self._sessions.service, opened.session, owner)
                for chunk in translator.begin(message_id):
                    yield chunk
                async for chunk in self._turn(app, opened.session, submit, translator, taken):
                    yield chunk
        except SessionBusy:
            yield chunks.Error("this chat is still running elsewhere; try again later")
        except Exception:
            ref = chunks.new_id("err")
            log.exception("chat %s failed (ref %s)", chat_id, ref)
            yield chunks.Error(f"the chat failed (server log reference {ref})")

    async def _turn(
        self,
        app: AppRunners,
        session: Session,
        submit: chat_messages.ChatSubmit,
        translator: TurnTranslator,
        taken: asyncio.Event,
    ) -> AsyncIterator[chunks.Chunk]:
        tools = app.tools
        confirmations, answers = confirmation_answers(session, submit.answers)
        resolved = await resolve_answers(session, answers, tools, self._settings.tool_timeout_s)
        for chunk in resolved.shown:
            yield chunk
        parts = list(resolved.responses) + confirmations.parts
        for image in submit.images:
            parts.append(
                types.Part(inline_data=types.Blob(mime_type=image.media_type, data=image.data))
            )
        if submit.text is not None:
            parts.append(types.Part(text=submit.text))
        asked = bool(resolved.asks)
        for chunk in resolved.asks:
            yield chunk
        if resolved.responses and (
            asked or (resolved.waiting and len(parts) == len(resolved.responses))
        ):
            # Only answers, and a call of the step is still open: what was
            # settled is kept in the session (so an approved tool never runs
            # twice) and the model is answered once, with every response,
            # when the last call is settled (ADK merges the kept ones in).
            await self._keep(session, resolved)
            asked = True
        elif parts and not asked:
            events = app.chat_runner.run_async(
                user_id=CHAT_USER_ID,
                session_id=session.id,
                new_message=types.Content(role="user", parts=parts),
                state_delta=resolved.state_delta or None,
                run_config=RunConfig(streaming_mode=StreamingMode.SSE),
                abort_signal=taken,
            )
            async with contextlib.aclosing(events):
                async for whole in events:
                    event, requests = as_approval_requests(whole)
                    denied = confirmations.denied
                    for item in translator.translate(event) if event is not None else ():
                        if isinstance(item, chunks.ToolOutput) and item.call_id in denied:
                            yield chunks.ToolOutputDenied(item.call_id)  # ADK's "rejected"
                        elif not isinstance(item, (ModelAudio, TurnEnd)):
                            yield item
                    if requests:
                        # An ADK tool asks for a confirmation (ADK's own, in
                        # run_async): our approval request, for its call. The
                        # step stays open: what the model says next (a body
                        # that asked returned a value, which ADK lets it tell)
                        # is in the same step, so an AI SDK client still sees
                        # the approval in the last step and sends its answer
                        # (lastAssistantMessageIsCompleteWithApprovalResponses).
                        asked = True
                        for request in requests:
                            for chunk in request.asked():
                                yield chunk
                        continue
                    if event is None:
                        continue
                    calls = delegated_calls(event, tools)
                    if calls:
                        # Ask about each (a browser tool that needs no
                        # approval was asked by its client_executes input).
                        asked = True
                        for call, spec in calls:
                            pending = PendingCall.new(
                                call.id or "", spec, {}, self._settings.tool_timeout_s
                            )
                            for chunk in pending.ask():
                                yield chunk
                        for chunk in translator.end_step():
                            yield chunk
        if taken.is_set():
            yield chunks.Error("this chat was resumed by another request")
            return
        for item in translator.finish("tool-calls" if asked else None):
            if isinstance(item, chunks.Chunk):
                yield item

    async def _keep(self, session: Session, resolved: _Resolved) -> None:
        """Store the function responses of calls settled while others of
        their step are still waiting, with the tools' state writes."""
        event = Event(
            invocation_id=chunks.new_id("inv"),
            author="user",
            content=types.Content(role="user", parts=list(resolved.responses)),
            actions=EventActions(state_delta=dict(resolved.state_delta)),
        )
        await self._sessions.service.append_event(session, event)
