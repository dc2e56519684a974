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
The next request's messages carry the answers in their tool parts; for each
call that is still unanswered in the session, an approved server tool runs,
a browser tool's output is taken, and the function responses (with the
tool's state writes) resume the run. Answers to calls already answered are
ignored, so a resubmitted history never runs a tool twice. The approval id
of a call is ``apr_`` + its call id: the call id is ADK's random one, and
the session is reachable only through its chat id.

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
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio

# StreamingMode: ADK's documented import path, though not re-exported by name.
from google.adk.agents.run_config import RunConfig, StreamingMode  # type: ignore[attr-defined,unused-ignore]
from google.adk.events import Event
from google.adk.sessions import Session
from google.genai import types
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from . import protocol
from .claims import SessionBusy
from .events import ModelAudio, TurnEnd, TurnTranslator
from .rest import HttpError, read_json_body
from .runtime import API_SESSION_ID, CHAT_USER_ID, Runtime
from .tools import ToolSpec, ToolState, run_server_tool

log = logging.getLogger(__name__)

# What AI SDK's createUIMessageStreamResponse sends (ui-message-stream-headers.ts).
STREAM_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
DONE = "data: [DONE]\n\n"
APPROVAL_PREFIX = "apr_"
Chunk = dict[str, Any]


def sse(chunk: Chunk) -> str:
    return f"data: {protocol.encode(chunk)}\n\n"


@dataclasses.dataclass
class _Pending:
    spec: ToolSpec
    args: dict[str, Any]


def pending_calls(session: Session, tools: dict[str, ToolSpec]) -> dict[str, _Pending]:
    """Delegated calls in the session that have no function response yet."""
    calls: dict[str, _Pending] = {}
    for event in session.events:
        long_running = event.long_running_tool_ids or set()
        for call in event.get_function_calls():
            spec = tools.get(call.name or "")
            if spec is not None and spec.delegated and call.id in long_running:
                calls[call.id or ""] = _Pending(spec, dict(call.args or {}))
        for response in event.get_function_responses():
            calls.pop(response.id or "", None)
    return calls


def run_now_chunks(call_id: str, pending: _Pending) -> list[Chunk]:
    """An approved browser tool's cue to run: its input, ``clientExecutes``."""
    return [
        protocol.tool_input_chunk(call_id, pending.spec.name, pending.args, client_executes=True),
        protocol.finish_step_chunk(),
    ]


@dataclasses.dataclass
class _Resolved:
    chunks: list[Chunk] = dataclasses.field(default_factory=list)
    responses: list[types.Part] = dataclasses.field(default_factory=list)
    state_delta: dict[str, Any] = dataclasses.field(default_factory=dict)
    asks: list[Chunk] = dataclasses.field(default_factory=list)  # calls the client is to run now


async def resolve_answers(
    session: Session,
    answers: Sequence[protocol.ToolApproval | protocol.ToolResult],
    tools: dict[str, ToolSpec],
) -> _Resolved:
    """Apply the answers a request's messages carry to the session's pending
    calls (see the module docstring)."""
    pending = pending_calls(session, tools)
    approvals = {
        a.approval_id.removeprefix(APPROVAL_PREFIX): a
        for a in answers
        if isinstance(a, protocol.ToolApproval) and a.approval_id.startswith(APPROVAL_PREFIX)
    }
    results = {a.tool_call_id: a for a in answers if isinstance(a, protocol.ToolResult)}
    out = _Resolved()
    state = ToolState(session.state)

    def respond(call_id: str, call: _Pending, response: Any, chunk: Chunk) -> None:
        out.chunks.append(chunk)
        body = response if isinstance(response, dict) else {"result": response}
        out.responses.append(
            types.Part(
                function_response=types.FunctionResponse(
                    id=call_id, name=call.spec.name, response=body
                )
            )
        )

    for call_id, call in pending.items():
        approval = approvals.get(call_id)
        result = results.get(call_id)
        if call.spec.approval:
            if approval is None:
                continue  # not answered in this request
            log.info(
                "tool approval: session=%s tool=%s args=%s verdict=%s reason=%r (http)",
                session.id,
                call.spec.name,
                call.args,
                "approved" if approval.approved else "denied",
                approval.reason,
            )
            if not approval.approved:
                reason = approval.reason or "the user denied this call"
                respond(
                    call_id,
                    call,
                    {"status": "denied", "reason": reason},
                    protocol.tool_output_denied_chunk(call_id),
                )
                continue
        if call.spec.runs_in == "server":
            try:
                output = await run_server_tool(call.spec, call.args, state)
            except Exception as exc:
                ref = protocol.new_id("err")
                log.exception(
                    "tool %s failed (session %s, ref %s)", call.spec.name, session.id, ref
                )
                text = f"{call.spec.name} failed: {type(exc).__name__} (server log reference {ref})"
                respond(
                    call_id,
                    call,
                    {"status": "error", "error": text},
                    protocol.tool_output_error_chunk(call_id, text),
                )
                continue
            respond(call_id, call, output, protocol.tool_output_chunk(call_id, output))
        elif result is None:
            out.asks += run_now_chunks(call_id, call)
        elif result.error_text is not None:
            respond(
                call_id,
                call,
                {"status": "error", "error": result.error_text},
                protocol.tool_output_error_chunk(call_id, result.error_text),
            )
        else:
            respond(
                call_id, call, result.output, protocol.tool_output_chunk(call_id, result.output)
            )
    out.state_delta = state.delta
    return out


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


class ChatEndpoint:
    def __init__(self, runtime_of: Callable[[Request], Runtime]) -> None:
        self._runtime_of = runtime_of
        self._runs: dict[str, _Replay] = {}

    def routes(self) -> list[Route]:
        return [
            Route("/api/chat", self.post, methods=["POST"]),
            Route("/stream", self.post, methods=["POST"]),
            Route("/api/chat/{chat_id}/stream", self.resume, methods=["GET"]),
        ]

    async def post(self, request: Request) -> Response:
        runtime = self._runtime_of(request)
        limits = protocol.Limits(
            runtime.settings.max_message_bytes,
            runtime.settings.max_image_bytes,
            runtime.settings.max_text_chars,
        )
        try:
            body = await read_json_body(request, runtime.settings.max_http_body_bytes)
            if not isinstance(body, dict):
                raise HttpError(400, "request body: expected a JSON object")
            chat_id = body.get("id")
            if not isinstance(chat_id, str) or not API_SESSION_ID.fullmatch(chat_id):
                raise HttpError(400, "id: expected the chat id (1 to 128 of A-Z a-z 0-9 . _ : -)")
            submit = protocol.decode_chat(body, limits)
        except HttpError as exc:
            return Response(exc.detail, status_code=exc.status, media_type="text/plain")
        except protocol.InputError as exc:
            return Response(str(exc), status_code=400, media_type="text/plain")
        message_id = body.get("messageId")
        continuing = isinstance(message_id, str) and submit.text is None
        return StreamingResponse(
            self._stream(runtime, chat_id, submit, message_id if continuing else None),
            headers=STREAM_HEADERS,
        )

    async def resume(self, request: Request) -> Response:
        replay = self._runs.get(request.path_params["chat_id"])
        if replay is None:
            return Response(status_code=204)
        return StreamingResponse(replay.follow(), headers=STREAM_HEADERS)

    async def _stream(
        self, runtime: Runtime, chat_id: str, submit: protocol.ChatSubmit, message_id: str | None
    ) -> AsyncIterator[str]:
        replay = _Replay()
        self._runs[chat_id] = replay
        try:
            async for chunk in self._chunks(runtime, chat_id, submit, message_id):
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
        self, runtime: Runtime, chat_id: str, submit: protocol.ChatSubmit, message_id: str | None
    ) -> AsyncIterator[Chunk]:
        translator = TurnTranslator(runtime.tools, runtime.chat_model_name)
        taken = asyncio.Event()  # another request took the chat: stop this run
        try:
            async with runtime.open_session(
                chat_id, taken.set, user_id=CHAT_USER_ID, keep_id=True
            ) as opened:
                for chunk in translator.begin(message_id):
                    yield chunk
                async for chunk in self._turn(runtime, opened.session, submit, translator, taken):
                    yield chunk
        except SessionBusy:
            yield protocol.error_chunk("this chat is still running elsewhere; try again later")
        except Exception:
            ref = protocol.new_id("err")
            log.exception("chat %s failed (ref %s)", chat_id, ref)
            yield protocol.error_chunk(f"the chat failed (server log reference {ref})")

    async def _turn(
        self,
        runtime: Runtime,
        session: Session,
        submit: protocol.ChatSubmit,
        translator: TurnTranslator,
        taken: asyncio.Event,
    ) -> AsyncIterator[Chunk]:
        resolved = await resolve_answers(session, submit.answers, runtime.tools)
        for chunk in resolved.chunks:
            yield chunk
        parts = list(resolved.responses)
        for image in submit.images:
            parts.append(
                types.Part(inline_data=types.Blob(mime_type=image.media_type, data=image.data))
            )
        if submit.text is not None:
            parts.append(types.Part(text=submit.text))
        asked = bool(resolved.asks)
        for chunk in resolved.asks:
            yield chunk
        if parts and not asked:
            events = runtime.chat_runner.run_async(
                user_id=CHAT_USER_ID,
                session_id=session.id,
                new_message=types.Content(role="user", parts=parts),
                state_delta=resolved.state_delta or None,
                run_config=RunConfig(streaming_mode=StreamingMode.SSE),
                abort_signal=taken,
            )
            async with contextlib.aclosing(events):
                async for event in events:
                    for item in translator.translate(event):
                        if not isinstance(item, (ModelAudio, TurnEnd)):
                            yield item
                    asks = _delegated_asks(event, runtime.tools)
                    if asks is not None:
                        asked = True
                        for chunk in [*asks, *translator.end_step()]:
                            yield chunk
        if taken.is_set():
            yield protocol.error_chunk("this chat was resumed by another request")
            return
        for item in translator.finish("tool-calls" if asked else "stop"):
            if isinstance(item, dict):
                yield item


def _delegated_asks(event: Event, tools: dict[str, ToolSpec]) -> list[Chunk] | None:
    """The approval requests for the event's delegated calls (a browser tool
    that needs none was asked by its ``clientExecutes`` input); None if it
    has no delegated call."""
    asks: list[Chunk] | None = None
    long_running = event.long_running_tool_ids or set()
    for call in event.get_function_calls():
        spec = tools.get(call.name or "")
        if spec is not None and spec.delegated and call.id in long_running:
            asks = asks or []
            if spec.approval:
                call_id = call.id or ""
                asks.append(
                    protocol.tool_approval_request_chunk(APPROVAL_PREFIX + call_id, call_id)
                )
    return asks
