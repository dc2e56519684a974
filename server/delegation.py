"""Delegated tool calls: approval by the user, and tools the browser runs.

ADK cannot approve tools in live mode (``require_confirmation`` tools never
run under ``run_live``), so the server does it. A delegated tool (see
``server/tools.py``) is a long-running tool to ADK: the model's call is
persisted and yielded, and ADK answers nothing. The connection then hands
the call to its session's ``SessionDelegations``, which

* asks the client: ``tool-approval-request`` for a tool that needs approval,
  or the ``tool-input-available`` it already got (marked ``clientExecutes``)
  for a browser tool — each followed by ``finish-step`` and the end of the
  client's per-turn stream;
* takes the answer — ``tool_approval`` (or the same, read from an AI SDK
  client's resubmitted messages), ``tool_result`` — only from the connection
  that holds the session, and only for a call that is pending;
* runs an approved server tool (once: its approval id is spent before it
  runs), asks the browser to run an approved browser tool, and
* answers the model with the function response — through the live request
  queue, with the tool's writes to the session state riding along, so ADK
  saves them with the session.

Every pending call has a deadline; a timeout, a barge-in, a denial, or the
client going away without coming back resolves it, and the model is told
(while a connection holds the session). Calls outlive their connection for
a grace period: a client that resumes the session is sent the requests
still pending. Every approval decision is logged with the session, the
tool, its arguments and the verdict.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from google.genai import types

from . import protocol
from .protocol import InputError, ToolApproval, ToolResult
from .tools import ToolSpec, ToolState, run_server_tool

log = logging.getLogger(__name__)
Chunk = dict[str, Any]


class DelegationSink(Protocol):
    """The connection that holds the session, as its delegated calls see it."""

    name: str  # for the log

    def tell_client(self, chunks: Sequence[Chunk]) -> None: ...

    def tell_model(self, response: types.FunctionResponse, state_delta: dict[str, Any]) -> None: ...

    async def session_state(self) -> Mapping[str, Any]: ...


@dataclasses.dataclass(eq=False)
class PendingCall:
    call_id: str
    spec: ToolSpec
    args: dict[str, Any]
    approval_id: str | None  # None: no approval asked (or already given)
    timeout_s: float
    message_id: str | None = None  # the assistant message the call belongs to
    timer: asyncio.TimerHandle | None = None
    approved: bool = False  # a browser tool, approved: its result is awaited
    running: bool = False  # an approved server tool is running

    def ask_chunks(self) -> list[Chunk]:
        """What asks the client for the call's answer, in the step of the
        call: its approval request; none for a browser tool that needs no
        approval (its tool-input-available, ``clientExecutes``, asked)."""
        if self.approval_id is not None:
            return [protocol.tool_approval_request_chunk(self.approval_id, self.call_id)]
        return []

    def run_now_chunks(self) -> list[Chunk]:
        """After its approval, a browser tool's cue to run: the call's input
        again, marked ``clientExecutes``, closing the client's stream."""
        return [
            protocol.tool_input_chunk(
                self.call_id, self.spec.name, self.args, client_executes=True
            ),
            protocol.finish_step_chunk(),
            protocol.END_OF_STREAM,
        ]

    def replay_chunks(self) -> list[Chunk]:
        """The whole call, for a client that did not see it (a resumed session)."""
        run_now = self.approval_id is None and self.spec.runs_in == "browser"
        return [
            protocol.start_step_chunk(),
            protocol.tool_input_start_chunk(self.call_id, self.spec.name),
            protocol.tool_input_chunk(
                self.call_id, self.spec.name, self.args, client_executes=run_now
            ),
            *self.ask_chunks(),
            protocol.finish_step_chunk(),
            protocol.END_OF_STREAM,
        ]


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
        self._approvals: dict[str, PendingCall] = {}
        self._sink: DelegationSink | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        return len(self._calls)

    # ------------------------------------------------------------ sinks
    def attach(self, sink: DelegationSink) -> tuple[str | None, list[Chunk]]:
        """``sink`` now holds the session. Returns what asks its client again
        about every call still waiting for an answer (each with a fresh
        deadline), and the assistant message those calls belong to; the
        caller sends the chunks in a turn that continues that message."""
        self._sink = sink
        replay: list[Chunk] = []
        message_id = None
        for call in self._calls.values():
            if not call.running:
                self._arm(call, call.timeout_s)
                replay += call.replay_chunks()
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
        self, call_id: str, spec: ToolSpec, args: dict[str, Any], message_id: str | None = None
    ) -> list[Chunk]:
        """A new delegated call from the model (of assistant message
        ``message_id``); returns what asks the client, in the call's step.
        The caller ends the step, and the client's stream, after all calls."""
        call = PendingCall(
            call_id,
            spec,
            args,
            approval_id=protocol.new_id("apr") if spec.approval else None,
            timeout_s=spec.timeout_s or self.timeout_s,
            message_id=message_id,
        )
        self._calls[call_id] = call
        if call.approval_id is not None:
            self._approvals[call.approval_id] = call
        self._arm(call, call.timeout_s)
        return call.ask_chunks()

    def answer(self, answers: Sequence[ToolApproval | ToolResult]) -> None:
        """Apply the client's answers, in order. An answer to no pending call
        is an ``InputError`` — unless it was read from a resubmitted history,
        which repeats answers already applied: those are ignored."""
        results = {a.tool_call_id for a in answers if isinstance(a, ToolResult)}
        for answer in answers:
            if isinstance(answer, ToolApproval):
                self._approve(answer, result_follows=results)
            else:
                self._result(answer)

    def answer_function_response(self, call_id: str, response: dict[str, Any]) -> None:
        """An ADK client's function response for a delegated call: for a call
        awaiting approval, ``{"confirmed": bool}`` (ADK's confirmation
        convention, ``approved`` also taken) is the answer; otherwise the
        response is the browser tool's result."""
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

    # ------------------------------------------------------------ answers
    def _approve(self, approval: ToolApproval, *, result_follows: set[str]) -> None:
        call = self._approvals.pop(approval.approval_id, None)
        if call is None:
            if approval.from_history:
                return
            raise InputError(f"tool_approval: no pending approval {approval.approval_id!r}")
        call.approval_id = None  # spent: a second answer finds nothing
        log.info(
            "tool approval: session=%s connection=%s tool=%s args=%s verdict=%s reason=%r",
            self.session_id,
            self._sink.name if self._sink else None,
            call.spec.name,
            json.dumps(call.args, sort_keys=True, default=str),
            "approved" if approval.approved else "denied",
            approval.reason,
        )
        if not approval.approved:
            reason = approval.reason or "the user denied this call"
            self._resolve(
                call,
                {"status": "denied", "reason": reason},
                [protocol.tool_output_denied_chunk(call.call_id)],
            )
        elif call.spec.runs_in == "browser":
            call.approved = True
            if call.call_id not in result_follows and self._sink is not None:
                self._sink.tell_client(call.run_now_chunks())
        else:
            call.running = True
            if call.timer is not None:
                call.timer.cancel()
            task = asyncio.create_task(self._run(call))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _result(self, result: ToolResult) -> None:
        call = self._calls.get(result.tool_call_id)
        if call is None or call.running:
            if result.from_history:
                return
            raise InputError(f"tool_result: no pending tool call {result.tool_call_id!r}")
        if call.spec.runs_in != "browser":
            raise InputError(f"tool_result: {call.spec.name} runs on the server")
        if call.approval_id is not None or (call.spec.approval and not call.approved):
            if result.from_history:
                return
            raise InputError(f"tool_result: {call.spec.name} is waiting for its approval")
        if result.error_text is not None:
            self._resolve(
                call,
                {"status": "error", "error": result.error_text},
                [protocol.tool_output_error_chunk(call.call_id, result.error_text)],
            )
        else:
            output = result.output
            self._resolve(
                call,
                output if isinstance(output, dict) else {"result": output},
                [protocol.tool_output_chunk(call.call_id, output)],
            )

    async def _run(self, call: PendingCall) -> None:
        """An approved server tool: run it, then answer the model."""
        try:
            state = ToolState(await self._sink.session_state() if self._sink else {})
            output = await asyncio.wait_for(
                run_server_tool(call.spec, call.args, state), call.timeout_s
            )
        except Exception as exc:
            ref = protocol.new_id("err")
            log.exception(
                "tool %s failed (session %s, ref %s)", call.spec.name, self.session_id, ref
            )
            text = f"{call.spec.name} failed: {type(exc).__name__} (server log reference {ref})"
            self._resolve(
                call,
                {"status": "error", "error": text},
                [protocol.tool_output_error_chunk(call.call_id, text)],
            )
            return
        self._resolve(
            call,
            output if isinstance(output, dict) else {"result": output},
            [protocol.tool_output_chunk(call.call_id, output)],
            state.delta,
        )

    # ------------------------------------------------------------ resolution
    def _arm(self, call: PendingCall, delay: float) -> None:
        if call.timer is not None:
            call.timer.cancel()
        call.timer = asyncio.get_running_loop().call_later(delay, self._expire, call)

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
        self._resolve(
            call,
            {"status": "timed_out" if timed_out else "cancelled", "reason": reason},
            [protocol.tool_output_error_chunk(call.call_id, reason)],
        )

    def _resolve(
        self,
        call: PendingCall,
        response: dict[str, Any],
        chunks: list[Chunk],
        state_delta: dict[str, Any] | None = None,
    ) -> None:
        """The call is over: tell the client and the model, if one is here."""
        self._calls.pop(call.call_id, None)
        if call.approval_id is not None:
            self._approvals.pop(call.approval_id, None)
        if call.timer is not None:
            call.timer.cancel()
        sink = self._sink
        if sink is None:
            # Nobody runs the session: nothing can be told, and nothing the
            # tool wrote is kept.
            log.info(
                "tool call %s of session %s resolved with no client", call.call_id, self.session_id
            )
        else:
            sink.tell_client(chunks)
            sink.tell_model(
                types.FunctionResponse(id=call.call_id, name=call.spec.name, response=response),
                state_delta or {},
            )
        self._check_idle()

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
