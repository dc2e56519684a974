"""The live view of delegated tool calls: a session's pending calls in
memory, with deadlines, while a connection holds the session and after.

What a call is and how an answer resolves it is ``audiocore_server/tools/calls.py``,
which the HTTP chat shares. Here: the connection hands each delegated call
of the model to its session's ``SessionDelegations`` (``add``), which asks
the client, takes the client's answers — only from the connection that
holds the session (the sink), only for a call that is pending — runs an
approved server tool (once: its approval id is spent before it runs), asks
the browser to run an approved browser tool, and answers the model with the
function response through the sink (the live request queue, with the tool's
writes to the session state riding along, so ADK saves them). The calls of
one model response are one step: the model is answered once, with all
their responses in one content, and the client is told their outcomes,
when the step's last call is settled (the seed's rule: no result of a step
before all of it is answered).

Every pending call has a deadline; a timeout, a barge-in, a denial, or the
client going away without coming back resolves it, and the model is told
(while a connection holds the session). Calls outlive their connection for
a grace period: a client that resumes the session is sent the requests
still pending.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from ..wire import chunks
from ..wire.fields import InputError, ToolApproval, ToolResult, approval_payload
from .calls import (
    APPROVAL_PREFIX,
    Answer,
    AskBrowser,
    Outcome,
    PendingCall,
    apply,
    cancelled,
    run_on_server,
)
from .spec import ToolSpec, ToolState

log = logging.getLogger(__name__)


class DelegationSink(Protocol):
    """The connection that holds the session, as its delegated calls see it."""

    name: str  # for the log

    def tell_client(self, items: Sequence[chunks.Chunk]) -> None: ...

    def tell_model(
        self, responses: Sequence[types.FunctionResponse], state_delta: Mapping[str, Any]
    ) -> None: ...

    async def session_state(self) -> Mapping[str, Any]: ...


class SessionDelegations:
    """The pending delegated calls of one session, and the connection (sink)
    that answers for them."""

    def __init__(
        self,
        session_id: str,
        *,
        timeout_s: float,
        grace_s: float,
        on_idle: Callable[[SessionDelegations], None] = lambda _: None,
    ) -> None:
        self.session_id = session_id
        self.timeout_s = timeout_s  # a call's default time to be answered
        self.grace_s = grace_s  # how long calls wait for a client to come back
        self._on_idle = on_idle  # no call and no sink: the registry may forget us
        self._calls: dict[str, PendingCall] = {}
        # The outcomes of a step's calls while others of the step are pending:
        # the model is answered once, when the whole step is settled.
        self._settled: dict[str, list[Outcome]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._sink: DelegationSink | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        return len(self._calls)

    # ------------------------------------------------------------ sinks
    def attach(self, sink: DelegationSink) -> tuple[str | None, list[chunks.Chunk]]:
        """``sink`` now holds the session. Returns what asks its client again
        about every call still waiting for an answer (each with a fresh
        deadline), and the assistant message those calls belong to; the
        caller sends the chunks in a turn that continues that message."""
        self._sink = sink
        replay: list[chunks.Chunk] = []
        message_id = None
        for call in self._calls.values():
            if not call.running:
                self._arm(call, call.timeout_s)
                replay += call.replay()
                message_id = message_id or call.message_id
        return message_id, replay

    def detach(self, sink: DelegationSink) -> None:
        """``sink`` let the session go: waiting calls get ``grace_s`` for a
        client to resume the session, then they are cancelled."""
        if self._sink is not sink:
            return
        self._sink = None
        for call in self._calls.values():
            if not call.running:
                self._arm(call, min(self.grace_s, call.timeout_s))
        self._check_idle()

    # ------------------------------------------------------------ calls
    def add(
        self,
        call_id: str,
        spec: ToolSpec,
        args: dict[str, Any],
        message_id: str | None = None,
        step: str | None = None,
        confirmation: chunks.Confirmation | None = None,
    ) -> list[chunks.Chunk]:
        """A new delegated call from the model (of assistant message
        ``message_id``, of the model response ``step``; an ADK tool's
        ``confirmation`` request); returns what asks the client, in the
        call's step. The caller ends the step, and the client's stream,
        after all calls."""
        call = PendingCall.new(call_id, spec, args, self.timeout_s, message_id, step, confirmation)
        self._calls[call_id] = call
        self._arm(call, call.timeout_s)
        return call.ask()

    def answer(self, answers: Sequence[Answer]) -> None:
        """Apply the client's answers, in order (``tool_calls.apply``)."""
        via = self._sink.name if self._sink else "-"
        for step in apply(self._calls, answers, session_id=self.session_id, via=via):
            if isinstance(step, Outcome):
                self._resolve(step)
            elif isinstance(step, AskBrowser):
                if self._sink is not None:
                    self._sink.tell_client(step.call.run_now())
            else:
                self._disarm(step.call)
                task = asyncio.create_task(self._run(step.call))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def answer_function_response(self, call_id: str, response: dict[str, Any]) -> None:
        """An ADK client's function response for a delegated call: for a call
        awaiting approval, ``{"confirmed": bool}`` (ADK's confirmation
        convention, ``approved`` also taken) is the answer; otherwise the
        response is the browser tool's result. ``call_id`` may be the
        approval id: the client answers the ``adk_request_confirmation``
        call that /run_live sent for an ADK tool's confirmation, with a
        ``ToolConfirmation`` (``confirmed``, and a ``payload``)."""
        if call_id.startswith(APPROVAL_PREFIX):
            self._confirm(call_id, response)
            return
        call = self._calls.get(call_id)
        if call is None:
            raise InputError(f"function_response: no pending tool call {call_id!r}")
        if call.approval_id is not None:
            verdict = response.get("confirmed", response.get("approved"))
            if not isinstance(verdict, bool):
                raise InputError(
                    f"function_response: {call.spec.name} awaits approval: expected "
                    f'{{"confirmed": true|false}}'
                )
            reason = response.get("reason")
            self.answer(
                [
                    ToolApproval(
                        call.approval_id, verdict, reason if isinstance(reason, str) else None
                    )
                ]
            )
        else:
            self.answer([ToolResult(call_id, output=response)])

    def _confirm(self, approval_id: str, response: dict[str, Any]) -> None:
        try:
            answer = ToolConfirmation.from_response_dict(response)
        except (ValueError, TypeError):  # pydantic's ValidationError is a ValueError
            raise InputError(
                "function_response: adk_request_confirmation expects a ToolConfirmation "
                '({"confirmed": true|false, "payload": ...})'
            ) from None
        payload = approval_payload(answer.payload, "function_response payload")
        self.answer([ToolApproval(approval_id, answer.confirmed, None, payload=payload)])

    def cancel_all(self, reason: str) -> None:
        """Resolve every call still waiting for the client (barge-in)."""
        for call in list(self._calls.values()):
            if not call.running:
                self._cancel(call, reason)

    async def close(self) -> None:
        """Stop tool runs still under way (the server is shutting down)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _run(self, call: PendingCall) -> None:
        state = ToolState(await self._sink.session_state() if self._sink else {})
        self._resolve(await run_on_server(call, state, self.session_id))

    # ------------------------------------------------------------ resolution
    def _arm(self, call: PendingCall, delay: float) -> None:
        self._disarm(call)
        self._timers[call.call_id] = asyncio.get_running_loop().call_later(
            delay, self._expire, call
        )

    def _disarm(self, call: PendingCall) -> None:
        timer = self._timers.pop(call.call_id, None)
        if timer is not None:
            timer.cancel()

    def _expire(self, call: PendingCall) -> None:
        if self._calls.get(call.call_id) is not call or call.running:
            return
        if self._sink is None:
            self._cancel(call, "the client went away before answering")
        else:
            self._cancel(call, f"no answer within {call.timeout_s:g} s", timed_out=True)

    def _cancel(self, call: PendingCall, reason: str, *, timed_out: bool = False) -> None:
        log.info(
            "tool call %s: session=%s tool=%s (%s)",
            "timed out" if timed_out else "cancelled",
            self.session_id,
            call.spec.name,
            reason,
        )
        self._resolve(cancelled(call, reason, timed_out=timed_out))

    def _resolve(self, outcome: Outcome) -> None:
        """The call is over. Once every call of its step is over, the client
        is told their outcomes and the model gets their responses (one
        answer however many tools ran), if a connection holds the session.
        Until then nothing is told: an outcome alone would reach an AI SDK
        client after the stream that asked it to run the step's browser tool
        had closed, as a turn with no end, ahead of that tool's own output."""
        call = outcome.call
        self._calls.pop(call.call_id, None)
        self._disarm(call)
        if call.spec.confirm is not None:
            call.spec.confirm.forget(call.call_id)  # denied, expired: never runs
        settled = self._step_settled(outcome)
        sink = self._sink
        if sink is None:
            # Nobody runs the session: nothing can be told, and nothing the
            # tool wrote is kept.
            log.info(
                "tool call %s of session %s resolved with no client", call.call_id, self.session_id
            )
        elif settled:
            sink.tell_client([done.told() for done in settled])
            state_delta: dict[str, Any] = {}
            for done in settled:
                state_delta.update(done.state_delta)
            sink.tell_model([done.function_response() for done in settled], state_delta)
        self._check_idle()

    def _step_settled(self, outcome: Outcome) -> list[Outcome]:
        """The outcomes to answer the model with now: ``outcome`` with the
        others of its step, once none of the step is pending; else none."""
        step = outcome.call.step
        if step is None:
            return [outcome]
        settled = self._settled.setdefault(step, [])
        settled.append(outcome)
        if any(c.step == step for c in self._calls.values()):
            return []
        return self._settled.pop(step)

    def _check_idle(self) -> None:
        if self._sink is None and not self._calls:
            self._on_idle(self)


class Delegations:
    """Every session's delegated calls, in this process."""

    def __init__(self, *, timeout_s: float, grace_s: float) -> None:
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self._sessions: dict[str, SessionDelegations] = {}

    def for_session(self, session_id: str) -> SessionDelegations:
        found = self._sessions.get(session_id)
        if found is None:
            found = SessionDelegations(
                session_id, timeout_s=self.timeout_s, grace_s=self.grace_s, on_idle=self._forget
            )
            self._sessions[session_id] = found
        return found

    def _forget(self, delegations: SessionDelegations) -> None:
        if self._sessions.get(delegations.session_id) is delegations:
            del self._sessions[delegations.session_id]

    @property
    def pending(self) -> int:
        return sum(s.pending for s in self._sessions.values())

    async def close(self) -> None:
        for delegations in list(self._sessions.values()):
            await delegations.close()
