"""Delegated tool calls — approval by the user, tools the browser runs — as
one model that every surface shares.

A delegated tool (``ToolSpec.delegated``, see ``audiocore_server/tools/spec.py``) is a
long-running tool to ADK: the model's call is persisted and yielded, and ADK
answers nothing. What happens next is decided here, whoever asks:

* ``delegated_calls``: the one rule for which calls of an event are delegated;
* ``PendingCall``: a call waiting for the client, with its approval id —
  ``apr_`` + the call id, one scheme everywhere (the call id is ADK's random
  one, and only the client holding the session can answer);
* ``apply``: the client's answers (``tool_approval``, ``tool_result``, or the
  same read from an AI SDK client's resubmitted messages) applied to the
  pending calls, in order: each answer resolves a call (an ``Outcome``: what
  the client and the model are told), or asks for the approved tool to run —
  on the server (``run_on_server``) or in the browser (``PendingCall.run_now``);
  every approval decision is logged with the session, the tool, its
  arguments and the verdict.

Two views hold the pending calls: a live connection's in memory, with
deadlines and resume (``audiocore_server/tools/delegation.py``), and the HTTP chat's, read
back from the session's events on every request (``pending_in``,
``audiocore_server/http/chat.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.adk.events import Event
from google.genai import types

from ..wire import chunks
from ..wire.fields import InputError, ToolApproval, ToolResult
from .spec import ToolSpec, ToolState, run_server_tool

log = logging.getLogger(__name__)

APPROVAL_PREFIX = "apr_"
Answer = ToolApproval | ToolResult


def approval_id_of(call_id: str) -> str:
    return APPROVAL_PREFIX + call_id


def delegated_calls(
    event: Event, tools: Mapping[str, ToolSpec]
) -> list[tuple[types.FunctionCall, ToolSpec]]:
    """The event's calls that the server completes, not ADK: a delegated
    tool's, marked long-running by ADK."""
    long_running = event.long_running_tool_ids or set()
    found = []
    for call in event.get_function_calls():
        spec = tools.get(call.name or "")
        if spec is not None and spec.delegated and call.id in long_running:
            found.append((call, spec))
    return found


@dataclasses.dataclass(eq=False)
class PendingCall:
    call_id: str
    spec: ToolSpec
    args: dict[str, Any]
    timeout_s: float
    message_id: str | None = None  # the assistant message the call belongs to
    approval_id: str | None = None  # None: no approval asked, or already given
    approved: bool = False  # a browser tool, approved: its result is awaited
    running: bool = False  # an approved server tool is running
    # The model response that made the call, with its other calls: the model
    # is answered once all of them are settled.
    step: str | None = None
    # An ADK tool's confirmation request (its hint and payload), and the
    # payload the user approved it with (``ToolApproval.payload``).
    confirmation: chunks.Confirmation | None = None
    payload: Any = None

    @classmethod
    def new(
        cls,
        call_id: str,
        spec: ToolSpec,
        args: dict[str, Any],
        timeout_s: float,
        message_id: str | None = None,
        step: str | None = None,
        confirmation: chunks.Confirmation | None = None,
    ) -> PendingCall:
        approval_id = approval_id_of(call_id) if spec.approval else None
        return cls(
            call_id,
            spec,
            args,
            spec.timeout_s or timeout_s,
            message_id,
            approval_id,
            step=step,
            confirmation=confirmation,
        )

    @property
    def awaits_browser(self) -> bool:
        """The browser is to run it now (no approval is outstanding)."""
        return self.spec.runs_in == "browser" and self.approval_id is None and not self.running

    def ask(self) -> list[chunks.Chunk]:
        """What asks the client for the call's answer, in the step of the
        call: its approval request; none for a browser tool that needs no
        approval (its ``ToolInput``, ``client_executes``, asked)."""
        if self.approval_id is not None:
            return chunks.ToolApprovalRequest(
                self.approval_id, self.call_id, self.confirmation
            ).asked()
        return []

    def run_now(self) -> list[chunks.Chunk]:
        """After its approval, a browser tool's cue to run: the call's input
        again, marked ``client_executes``, closing the client's stream."""
        return [
            chunks.ToolInput(self.call_id, self.spec.name, self.args, client_executes=True),
            chunks.FinishStep(),
            chunks.END_OF_STREAM,
        ]

    def replay(self) -> list[chunks.Chunk]:
        """The whole call, for a client that did not see it (a resumed session)."""
        run_now = self.approval_id is None and self.spec.runs_in == "browser"
        return [
            chunks.StartStep(),
            chunks.ToolInputStart(self.call_id, self.spec.name),
            chunks.ToolInput(self.call_id, self.spec.name, self.args, client_executes=run_now),
            *self.ask(),
            chunks.FinishStep(),
            chunks.END_OF_STREAM,
        ]


def pending_in(
    events: Iterable[Event], tools: Mapping[str, ToolSpec], timeout_s: float
) -> dict[str, PendingCall]:
    """The delegated calls in a session's events that have no function
    response yet (the HTTP chat's view: nothing is kept between requests)."""
    calls: dict[str, PendingCall] = {}
    for event in events:
        for call, spec in delegated_calls(event, tools):
            call_id = call.id or ""
            calls[call_id] = PendingCall.new(
                call_id, spec, dict(call.args or {}), timeout_s, step=event.id
            )
        for response in event.get_function_responses():
            calls.pop(response.id or "", None)
    return calls


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A call resolved: what the client is shown, what the model is answered."""

    call: PendingCall
    response: dict[str, Any]
    client: chunks.ToolOutput | chunks.ToolOutputDenied | chunks.ToolOutputError
    state_delta: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def told(self) -> chunks.Chunk:
        """The client's chunk, carrying what the model is answered (which
        /run_live shows as ADK's function-response event)."""
        answer = chunks.ToolAnswer(self.call.spec.name, self.response, self.state_delta)
        return dataclasses.replace(self.client, answer=answer)

    def function_response(self) -> types.FunctionResponse:
        return types.FunctionResponse(
            id=self.call.call_id, name=self.call.spec.name, response=self.response
        )


def succeeded(
    call: PendingCall, output: Any, state_delta: Mapping[str, Any] | None = None
) -> Outcome:
    body = output if isinstance(output, dict) else {"result": output}
    return Outcome(call, body, chunks.ToolOutput(call.call_id, output), state_delta or {})


def failed(call: PendingCall, text: str) -> Outcome:
    return Outcome(
        call, {"status": "error", "error": text}, chunks.ToolOutputError(call.call_id, text)
    )


def cancelled(call: PendingCall, reason: str, *, timed_out: bool = False) -> Outcome:
    status = "timed_out" if timed_out else "cancelled"
    return Outcome(
        call, {"status": status, "reason": reason}, chunks.ToolOutputError(call.call_id, reason)
    )


def denied(call: PendingCall, reason: str | None) -> Outcome:
    reason = reason or "the user denied this call"
    return Outcome(
        call, {"status": "denied", "reason": reason}, chunks.ToolOutputDenied(call.call_id)
    )


# What an answer asks for besides resolving a call: the approved server tool
# is to run (``run_on_server``), or the approved browser tool (``run_now``).
@dataclasses.dataclass(frozen=True)
class RunOnServer:
    """An approved server tool: run it (``run_on_server``), then settle it."""

    call: PendingCall


@dataclasses.dataclass(frozen=True)
class AskBrowser:
    """An approved browser tool whose result has not come: ask the browser
    to run it now."""

    call: PendingCall


Step = Outcome | RunOnServer | AskBrowser


def apply(
    calls: Mapping[str, PendingCall],
    answers: Sequence[Answer],
    *,
    session_id: str,
    via: str,
) -> list[Step]:
    """Apply the client's answers to ``calls``, in order. An answer to no
    pending call is an ``InputError`` — unless it was read from a
    resubmitted history, which repeats answers already applied: those are
    ignored. ``via`` names who answered, for the log."""
    results = {a.tool_call_id for a in answers if isinstance(a, ToolResult)}
    steps: list[Step] = []
    for answer in answers:
        step = (
            _approve(calls, answer, results, session_id, via)
            if isinstance(answer, ToolApproval)
            else _result(calls, answer)
        )
        if step is not None:
            steps.append(step)
    return steps


def log_decision(
    session_id: str, via: str, tool: str, args: Mapping[str, Any], approval: ToolApproval
) -> None:
    """Every approval decision, whoever made it, in one form."""
    log.info(
        "tool approval: session=%s via=%s tool=%s args=%s verdict=%s reason=%r payload=%s",
        session_id,
        via,
        tool,
        json.dumps(args, sort_keys=True, default=str),
        "approved" if approval.approved else "denied",
        approval.reason,
        "-" if approval.payload is None else json.dumps(approval.payload, default=str)[:200],
    )


def _approve(
    calls: Mapping[str, PendingCall],
    approval: ToolApproval,
    results: set[str],
    session_id: str,
    via: str,
) -> Step | None:
    call = calls.get(approval.approval_id.removeprefix(APPROVAL_PREFIX))
    if call is None or call.approval_id != approval.approval_id:
        if approval.from_history:
            return None
        raise InputError(f"tool_approval: no pending approval {approval.approval_id!r}")
    call.approval_id = None  # spent: a second answer finds nothing
    log_decision(session_id, via, call.spec.name, call.args, approval)
    if not approval.approved:
        return denied(call, approval.reason)
    call.payload = approval.payload
    if call.spec.runs_in == "browser":
        call.approved = True
        return None if call.call_id in results else AskBrowser(call)
    call.running = True
    return RunOnServer(call)


def _result(calls: Mapping[str, PendingCall], result: ToolResult) -> Outcome | None:
    call = calls.get(result.tool_call_id)
    if call is None or call.running:
        if result.from_history:
            return None
        raise InputError(f"tool_result: no pending tool call {result.tool_call_id!r}")
    if call.spec.runs_in != "browser":
        raise InputError(f"tool_result: {call.spec.name} runs on the server")
    if call.approval_id is not None or (call.spec.approval and not call.approved):
        if result.from_history:
            return None
        raise InputError(f"tool_result: {call.spec.name} is waiting for its approval")
    if result.error_text is not None:
        return failed(call, result.error_text)
    return succeeded(call, result.output)


async def run_on_server(call: PendingCall, state: ToolState, session_id: str) -> Outcome:
    """An approved server tool: run it (within its timeout) and resolve the
    call. A failure is logged under a fresh reference; the client and the
    model get the reference, never the exception's text."""
    confirm = call.spec.confirm
    state_delta: Mapping[str, Any] = state.delta
    try:
        if confirm is not None:
            output, state_delta = await asyncio.wait_for(
                confirm.resume(call.call_id, call.payload), call.timeout_s
            )
        else:
            output = await asyncio.wait_for(
                run_server_tool(call.spec, call.args, state), call.timeout_s
            )
    except Exception as exc:
        ref = chunks.new_id("err")
        log.exception("tool %s failed (session %s, ref %s)", call.spec.name, session_id, ref)
        return failed(
            call, f"{call.spec.name} failed: {type(exc).__name__} (server log reference {ref})"
        )
    return succeeded(call, output, state_delta)
