"""One OpenAI realtime conversation across the service's sessions: what ADK
sees as its live connection, with the sessions under it replaced when one
is lost.

OpenAI has no session resumption: a session that drops, stalls or reaches
its 60-minute limit takes the conversation with it. ``RecoveringConnection``
opens a new session and rebuilds the conversation there from its items
(``openai_transcript.py``): the earlier turns as text, the model's calls
and the tools' outputs. The user's words the model had not answered are
given again as they were sent, audio included (the socket's ``ModelLink``,
``model_link.py``), and an answer owed after tool outputs is asked for
again. A call the old session issued keeps its id, so its output (the tool
ran once) is taken by the new one. The client sees a
``data-model-reconnected`` notice; a turn cut off by the loss ended as
``interrupted``.

The same replacement renews a session before its limit: after
``renew_after_s``, at the first quiet moment (no answer under way, no call
owed, the user not speaking), the session is closed and the conversation
continues on a new one, with no notice (nothing was lost).

A loss is recovered in at most ``len(backoff_s)`` attempts to open a new
session, and at most ``max_recoveries`` times without an answer in
between; past either, the run ends with the clear error of the loss, as
before.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence

from google.adk.models.base_llm_connection import BaseLlmConnection, RealtimeInput
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from websockets.exceptions import ConnectionClosed

from . import model_link
from .openai_connection import OpenAIRealtimeConnection, SessionLost, function_output
from .openai_transcript import Transcript
from .provider_error import ProviderError

log = logging.getLogger(__name__)

# OpenAI's sessions end at 60 minutes; renewing at 55 leaves the five for a
# turn under way to end first.
RENEW_AFTER_S = 55 * 60.0
BACKOFF_S = (0.0, 0.25, 1.0)
MAX_RECOVERIES = 3


@dataclasses.dataclass
class Session:
    """One open session of the service, and how to close it for good."""

    connection: OpenAIRealtimeConnection
    close: Callable[[], Awaitable[None]]


class RecoveringConnection(BaseLlmConnection):
    def __init__(
        self,
        open_session: Callable[[], Awaitable[Session]],
        first: Session,
        link: model_link.ModelLink | None,
        *,
        renew_after_s: float = RENEW_AFTER_S,
        backoff_s: Sequence[float] = BACKOFF_S,
        max_recoveries: int = MAX_RECOVERIES,
    ) -> None:
        self._open = open_session
        self._session = first
        self._link = link if link is not None else model_link.ModelLink()
        self._renew_after_s = renew_after_s
        self._backoff_s = tuple(backoff_s)
        self._max_recoveries = max_recoveries
        self._transcript = Transcript()
        self._ready = asyncio.Event()  # no replacement under way: sends go through
        self._ready.set()
        self._closed = False
        self._given_up: str | None = None  # why we closed the session ourselves
        self._renew_due = False
        self._recoveries = 0  # since the last answer
        self._answering = False  # the model's output of this answer has begun
        self._watches: list[asyncio.Task[None]] = []
        self._watch()

    # ------------------------------------------------------------ inputs
    async def send_history(self, history: list[types.Content]) -> None:
        self._transcript.history(history)
        await self._sending(lambda c: c.send_history(history))

    async def send_content(self, content: types.Content) -> None:
        await self._ready.wait()
        connection = self._session.connection
        for part in content.parts or []:
            answer = part.function_response
            if answer is not None and answer.id in connection.pending_calls():
                # Kept before it is sent: if the session is lost on the way,
                # the new one is given the output, and the tool is not run again.
                self._transcript.tool_output(answer.id or "", function_output(answer))
        if not any(p.function_response for p in content.parts or []):
            self._transcript.user_text(_text(content))
        self._link.sent(content)
        await self._sending(lambda c: c.send_content(content), ready=True)

    async def send_realtime(self, blob: RealtimeInput) -> None:
        await self._ready.wait()
        self._link.sent(blob)
        await self._sending(lambda c: c.send_realtime(blob), ready=True)

    async def _sending(
        self, send: Callable[[OpenAIRealtimeConnection], Awaitable[None]], *, ready: bool = False
    ) -> None:
        if not ready:
            await self._ready.wait()
        try:
            await send(self._session.connection)
        except ConnectionClosed:
            # The receiver finds the loss and recovers; what this carried
            # is kept (the ModelLink, the transcript) and given again.
            log.debug("a send found the model's session closed; the receiver recovers it")

    # ------------------------------------------------------------ outputs
    async def receive(self) -> AsyncGenerator[LlmResponse, None]:
        while not self._closed:
            connection = self._session.connection
            try:
                async with contextlib.aclosing(connection.receive()) as responses:
                    async for response in responses:
                        self._observe(response)
                        yield response
                        if self._renew_due and connection.quiet():
                            await self._give_up("renewal")
            except SessionLost as exc:
                if self._closed or not exc.recoverable:
                    raise
                cause = self._given_up or exc.cause
                await self._recover(cause, exc)
                continue
            if self._closed or self._given_up is None:
                return  # closed by ADK, or the service ended the session cleanly
            await self._recover(self._given_up, None)

    def _observe(self, response: LlmResponse) -> None:
        """What the conversation became, for the next session's rebuild."""
        if not self._answering and (response.content or response.output_transcription):
            self._answering = True
            self._link.mark()  # what it answers is what was sent so far
        if response.input_transcription and response.input_transcription.finished:
            self._transcript.user_speech(response.input_transcription.text or "")
        if response.output_transcription and response.output_transcription.finished:
            self._transcript.model_words(response.output_transcription.text or "")
        parts = response.content.parts or [] if response.content else []
        calls = [p.function_call for p in parts if p.function_call]
        if calls:
            self._transcript.model_calls(calls)
        if calls or response.turn_complete:
            # Everything the user said before has had its answer (or its
            # call): it is in the transcript, not to be given again. (Not on
            # ``interrupted``: a lost session ends its turn that way too,
            # and the words it cut off are still owed.)
            self._transcript.answered()
            self._link.resumable()
            self._recoveries = 0
        if calls or response.turn_complete or response.interrupted:
            self._answering = False

    # ------------------------------------------------------------ replacing
    async def _give_up(self, why: str) -> None:
        """Close the session under way ourselves (a stall, a renewal): the
        receiver then opens the next one."""
        if self._given_up is None and not self._closed:
            self._given_up = why
            await self._session.connection.close()

    async def _recover(self, cause: str, error: SessionLost | None) -> None:
        self._ready.clear()
        try:
            await self._replace(cause, error)
        finally:
            self._ready.set()  # on failure, sends meet the closed session and are dropped

    async def _replace(self, cause: str, error: SessionLost | None) -> None:
        old = self._session
        pending = old.connection.pending_calls()
        self._stop_watching()
        await _quietly(old.close)
        lost = cause != "renewal"
        if lost:
            self._recoveries += 1
            if self._recoveries > self._max_recoveries:
                raise _exhausted(error, f"lost {self._recoveries} times without an answer")
            log.warning("the model's session was lost (%s): opening a new one", cause)
            self._link.ended_early(cause)  # type: ignore[arg-type]
        session = await self._reopen(error)
        connection = session.connection
        connection.expect_calls(pending)
        items, owed = self._transcript.rebuild()
        for item in items:
            await connection.create_item(item)
        if owed and not pending:
            await connection.respond()
        for again in self._link.to_give_again() if lost else self._link.take_since():
            if isinstance(again, types.Content):
                self._transcript.user_text(_text(again))
                self._link.sent(again)
                await connection.send_content(again)
            else:
                self._link.sent(again)
                await connection.send_realtime(again)
        self._session = session
        self._given_up = None
        self._renew_due = False
        self._watch()

    async def _reopen(self, error: SessionLost | None) -> Session:
        last: BaseException | None = None
        for delay in self._backoff_s:
            if delay:
                await asyncio.sleep(delay)  # backoff before the next attempt
            try:
                return await self._open()
            except (ProviderError, OSError, ConnectionClosed) as exc:
                if isinstance(exc, SessionLost) and not exc.recoverable:
                    raise
                log.warning("opening a new model session failed: %s", exc)
                last = exc
        raise _exhausted(error, f"{len(self._backoff_s)} attempts failed: {last}") from last

    # ------------------------------------------------------------ watches
    def _watch(self) -> None:
        stalled = self._link.opened()
        self._watches = [
            asyncio.ensure_future(self._on_stall(stalled)),
            asyncio.ensure_future(self._renew_later()),
        ]

    async def _on_stall(self, stalled: asyncio.Event) -> None:
        # The socket's watchdog saw the model stop mid-answer.
        await stalled.wait()
        log.warning("the model stopped mid-answer: its session is replaced")
        await self._give_up("stall")

    async def _renew_later(self) -> None:
        await asyncio.sleep(self._renew_after_s)  # a deadline, not a synchronisation
        self._renew_due = True
        if self._session.connection.quiet():
            await self._give_up("renewal")

    def _stop_watching(self) -> None:
        for task in self._watches:
            task.cancel()
        self._watches = []

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop_watching()
        self._ready.set()
        await self._session.close()


def _text(content: types.Content) -> str:
    return " ".join(p.text for p in content.parts or [] if p.text and not p.thought)


def _exhausted(error: SessionLost | None, why: str) -> ProviderError:
    base = str(error) if error is not None else "the model stopped answering"
    return ProviderError(f"{base}; recovering it failed ({why})")


async def _quietly(close: Callable[[], Awaitable[None]]) -> None:
    try:
        await close()
    except (ConnectionClosed, OSError) as exc:
        log.debug("closing a lost model session: %s", exc)
