"""ADK's ``Gemini`` model with its live connection made to survive Google's
connection hand-overs.

A Gemini Live connection lasts about ten minutes; the service announces the
end with ``goAway{timeLeft}`` and, with ``sessionResumption`` on, hands out
a handle at every point the conversation can be resumed from. ADK 2.13's
live flow reconnects with the latest handle, but checked against the local
endpoint (tests/server/test_gemini_e2e.py) two things lose the conversation:

* Google sends ``sessionResumptionUpdate{resumable: false}`` (no handle)
  while the model is generating or a tool call is pending; ADK stores that
  empty handle, so a goAway or a dropped connection during a turn starts a
  fresh session instead of resuming.
* ADK reconnects the moment ``goAway`` arrives, ignoring ``timeLeft``: the
  rest of the turn being spoken is never received, and the client's turn
  never finishes.

``LiveGemini.connect`` wraps ADK's connection in ``_ResumableConnection``,
which keeps the last resumable handle and holds a ``goAway`` back until the
current turn is over and the handle that follows it has arrived (or the
service closes first: ADK then reconnects with the last good handle). A
turn cut off by a dropped connection is ended with ``interrupted``, so the
client is never left inside a turn that will not finish; the resumed
connection is given again what went to the model since that handle, the
user's unanswered words (the socket's ``ModelLink``, ``model_link.py``).
A connection the socket's watchdog finds stalled mid-answer is closed by
us and resumed the same way. A resumed connection the service refuses is
tried again (``RECONNECT_BACKOFF_S``) before the run gives up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from google.adk.models.base_llm_connection import BaseLlmConnection, RealtimeInput
from google.adk.models.google_llm import Gemini
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import errors, types
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, InvalidStatus

from ..settings import Settings
from . import model_link

log = logging.getLogger(__name__)

# The delays before each attempt to open a resumed session's connection.
RECONNECT_BACKOFF_S = (0.0, 0.25, 1.0)


class LiveGemini(Gemini):
    """ADK's Gemini model; live connections as described in the module docstring."""

    @contextlib.asynccontextmanager
    async def connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
        config = llm_request.live_connect_config.session_resumption
        link = model_link.current()
        resuming = config is not None and bool(config.handle)
        async with contextlib.AsyncExitStack() as stack:
            # A resumption's new connection refused (the service's 5xx, or
            # nothing listening for a moment) is tried again with backoff;
            # ADK's run would otherwise end on it. A first connection is not:
            # its failure is the clear error the client gets at once.
            delays = RECONNECT_BACKOFF_S if resuming else (0.0,)
            for attempt, delay in enumerate(delays, 1):
                if delay:
                    await asyncio.sleep(delay)  # backoff before the next attempt
                try:
                    connection = await stack.enter_async_context(super().connect(llm_request))
                    break
                except (InvalidStatus, OSError) as exc:
                    refused = isinstance(exc, InvalidStatus) and exc.response.status_code < 500
                    if refused or attempt == len(delays):
                        raise
                    log.warning("resuming the model's session failed (%s): trying again", exc)
            wrapped = _ResumableConnection(connection, config is not None, link)
            if link is not None and config is not None and config.handle:
                # Resumed after a drop or a stall: the user's words the
                # handle does not hold are given again (model_link.py).
                for item in link.to_give_again():
                    if isinstance(item, types.Content):
                        await wrapped._send_content(item)
                    else:
                        await wrapped.send_realtime(item)
            try:
                yield wrapped
            finally:
                wrapped.stop_watching()


class _ResumableConnection(BaseLlmConnection):
    def __init__(
        self,
        inner: BaseLlmConnection,
        resumption: bool,
        link: model_link.ModelLink | None = None,
    ) -> None:
        self._inner = inner
        self._resumption = resumption  # the service sends handles
        self._link = link
        self._in_turn = False  # the model has started a turn that has not completed
        self._handle_stale = False  # a turn completed; its handle has not come yet
        self._go_away: LlmResponse | None = None  # held back until the turn is over
        self._issued: set[str | None] = set()  # the calls this connection's model made
        self._answering = False  # the model's output of this turn has begun
        self._awaiting_calls = False  # its last output called tools
        # Only a session that can be resumed is given up on a stall.
        self._stalled = link.opened() if link is not None and resumption else None
        self._watch = (
            asyncio.ensure_future(self._give_up_on_stall()) if self._stalled is not None else None
        )

    async def _give_up_on_stall(self) -> None:
        """The socket's watchdog saw the model stop mid-answer: close, so
        that ADK resumes the session on a new connection."""
        assert self._stalled is not None
        await self._stalled.wait()
        log.warning("the model stopped mid-answer: its connection is given up and resumed")
        await self._inner.close()

    def stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.cancel()

    async def send_history(self, history: list[types.Content]) -> None:
        await self._inner.send_history(history)

    async def send_content(self, content: types.Content) -> None:
        for part in self._for_this_session(content):
            await self._inner.send_content(part)
            if self._link is not None:
                self._link.sent(part)

    async def _send_content(self, content: types.Content, *, partial: bool = False) -> None:
        # What ADK's live flow calls for content (send_content is the public form).
        for part in self._for_this_session(content):
            await self._inner._send_content(part, partial=partial)
            if self._link is not None:
                self._link.sent(part)

    def _for_this_session(self, content: types.Content) -> list[types.Content]:
        """``content`` as this session can take it. A call pending when the
        last connection died is unknown here: the service hands out no
        handle while a call is pending, so the resumed session is from
        before it, and it refuses an answer to it (1008 "Requested entity
        was not found", ending the run). Such an answer (the tool ran once,
        or the user answered its approval, after the loss) is told as a
        turn of words instead, which the model answers."""
        parts = content.parts or []
        unknown = [
            p.function_response
            for p in parts
            if p.function_response is not None and p.function_response.id not in self._issued
        ]
        if not unknown:
            return [content]
        kept = [
            p for p in parts if p.function_response is None or p.function_response not in unknown
        ]
        log.info("answers to %d call(s) of a lost connection told as words", len(unknown))
        told = types.Content(
            role="user",
            parts=[
                types.Part(
                    text=f"[The result of {r.name}, which you called before the connection "
                    f"to you was lost: {json.dumps(r.response or {}, default=str)}]"
                )
                for r in unknown
            ],
        )
        return ([content.model_copy(update={"parts": kept})] if kept else []) + [told]

    async def send_realtime(self, blob: RealtimeInput) -> None:
        # The base class says Blob; ADK's flow passes every RealtimeInput.
        await self._inner.send_realtime(blob)  # type: ignore[arg-type]
        if self._link is not None:
            self._link.sent(blob)

    async def close(self) -> None:
        await self._inner.close()

    async def receive(self) -> AsyncGenerator[LlmResponse, None]:
        link, stalled = self._link, self._stalled
        try:
            async with contextlib.aclosing(self._inner.receive()) as responses:
                async for response in responses:
                    update = response.live_session_resumption_update
                    if update is not None:
                        if not (update.resumable and update.new_handle):
                            continue  # ADK would forget the last good handle
                        self._handle_stale = False
                        if link is not None:
                            link.resumable()
                        yield response
                    elif response.go_away is not None:
                        log.info(
                            "goAway (%s left): held until the turn is over",
                            response.go_away.time_left,
                        )
                        self._go_away = response
                    else:
                        if link is not None and not self._answering and _answers(response):
                            link.mark()  # the next handle holds what it answers
                        self._track_turn(response)
                        if _calls_a_tool(response):
                            self._issued.update(_call_ids(response))
                            if link is not None:
                                link.tool_called()
                        yield response
                    if self._go_away is not None and self._may_leave():
                        go_away, self._go_away = self._go_away, None
                        yield go_away
                        return
        except (errors.APIError, ConnectionClosed):
            if self._in_turn and not self._awaiting_calls:
                # The connection died mid-answer: end the turn for the
                # client; ADK then reconnects (with a handle) or fails the
                # run. (A turn that waits on its calls stays: their answers
                # reach the resumed session, ``_for_this_session``.)
                self._in_turn = False
                yield LlmResponse(interrupted=True)
            if link is not None:
                link.ended_early("stall" if stalled is not None and stalled.is_set() else "drop")
            raise
        if stalled is not None and stalled.is_set():
            # Given up on a stall, the connection closed by us: as a drop,
            # so that ADK resumes it.
            if self._in_turn:
                self._in_turn = False
                yield LlmResponse(interrupted=True)
            assert link is not None
            link.ended_early("stall")
            raise ConnectionClosedError(None, None)

    def _track_turn(self, response: LlmResponse) -> None:
        self._answering = _answers(response) or self._answering
        if _answers(response):
            self._awaiting_calls = _calls_a_tool(response)
        if response.turn_complete or response.interrupted:
            self._answering = self._awaiting_calls = False
            self._in_turn = False
            self._handle_stale = self._resumption
        elif response.content or response.output_transcription or response.input_transcription:
            self._in_turn = True

    def _may_leave(self) -> bool:
        """Reconnecting now loses nothing: no turn is under way, and the
        handle ADK holds is the one after the last turn."""
        return not self._in_turn and not self._handle_stale


def gemini_client_kwargs(settings: Settings) -> dict[str, Any] | None:
    """google-genai client options: the CAs to trust, when set.

    The live client takes its SSL context from ``async_client_args["ssl"]``
    (websockets); the HTTP clients from ``verify``. ADK merges its own
    headers, base URL and API version into these options.
    """
    if settings.gemini_ca_file is None:
        return None
    context = ssl.create_default_context(cafile=str(settings.gemini_ca_file))
    return {
        "http_options": types.HttpOptions(
            client_args={"verify": context},
            async_client_args={"ssl": context, "verify": context},
        )
    }


def _calls_a_tool(response: LlmResponse) -> bool:
    content = response.content
    return content is not None and any(p.function_call for p in content.parts or [])


def _call_ids(response: LlmResponse) -> list[str | None]:
    parts = response.content.parts or [] if response.content else []
    return [p.function_call.id for p in parts if p.function_call]


def _answers(response: LlmResponse) -> bool:
    """The model's own output (not the echo of what the user said)."""
    return bool(response.content or response.output_transcription)
