"""ADK's tool confirmation as our approval, in live mode too.

An ADK tool asks for the user's confirmation three ways:
``FunctionTool(fn, require_confirmation=True)`` (or a callable deciding per
call from the args), ``tool_context.request_confirmation(hint=, payload=)``
inside its body, or a deployment naming it in ``tools_requiring_approval``.
ADK's ``run_async`` answers such a call with an ``adk_request_confirmation``
function call and re-runs the tool when the client's function response for
it confirms; its live path cannot (``_live_caller.py``: the request is never
emitted, the approval never consumed), so a gated tool is only ever refused.

``ConfirmedTool`` wraps such a tool (every ``FunctionTool`` of a user's
agent: whether a body asks is known only when it runs). Outside a live
connection of ours it is the tool itself, with ADK's own confirmation
(``http/chat.py`` maps ADK's request and the client's answer). In a live
connection it decides per call: a call that needs no confirmation runs and
answers as the tool does; one that does is **kept** (the tool, its args and
its tool context, by function call id) and returns nothing, so ADK sends
the model no response; the connection's hook (``ConfirmationHook``, set on
its live request queue) hands the call to the session's delegated calls,
which ask the client (``tool-approval-request`` with the hint and payload,
or ADK's ``adk_request_confirmation`` event on /run_live). An approval runs
the tool again (``resume``) with ``tool_context.tool_confirmation`` set —
once: the entry is taken out before it runs — and the model gets its
response and state writes; a denial, a timeout, a barge-in or the client
gone past its grace resolve the call and drop the entry (``forget``).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from google.adk.events import Event
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from ..wire import chunks
from ..wire.fields import ToolApproval
from .calls import approval_id_of
from .spec import ToolSpec

log = logging.getLogger(__name__)

# Calls of one tool kept waiting for a confirmation, in the whole process:
# beyond it a call is refused (the model is told), never queued unbounded.
MAX_KEPT = 64

REQUEST_CONFIRMATION = "adk_request_confirmation"  # ADK's function call name


@dataclasses.dataclass(frozen=True)
class KeptCall:
    """A live call held for the user's confirmation."""

    call_id: str
    spec: ToolSpec  # how the delegated calls run and resolve it
    args: dict[str, Any]
    confirmation: chunks.Confirmation
    tool_context: ToolContext


# The live connection's hook: ask the client about a kept call. False: no
# one can (the call is refused at once).
ConfirmationHook = Callable[[KeptCall], bool]


def _hook(tool_context: ToolContext) -> ConfirmationHook | None:
    """The connection's hook, if this call runs in a live connection of ours."""
    queue = tool_context.get_invocation_context().live_request_queue
    # BoundedLiveRequestQueue.confirmation_hook (live/request_queue.py).
    hook = getattr(queue, "confirmation_hook", None)
    return hook if callable(hook) else None


def _default_hint(name: str) -> str:
    # ADK's own wording (_confirmation_utils.py, function_tool.py).
    return (
        f"Please approve or reject the tool call {name}() by responding with a "
        "FunctionResponse with an expected ToolConfirmation payload."
    )


class ConfirmedTool(BaseTool):
    """``inner`` with ADK's confirmation kept in live mode too (see the
    module docstring); ``forced``: a deployment requires it of every call."""

    def __init__(self, inner: BaseTool, *, forced: bool = False) -> None:
        super().__init__(name=inner.name, description=inner.description)
        self.inner = inner
        self.forced = forced
        # Returning nothing must leave the call unanswered (ADK's rule for a
        # tool that defers its response), without marking every call of the
        # tool long-running as ``is_long_running`` would.
        self._defers_response = True
        self._kept: dict[str, KeptCall] = {}
        self.spec = ToolSpec(inner.name, self._never_called, approval=True, confirm=self)

    @staticmethod
    def _never_called(**_: Any) -> None:
        raise RuntimeError("a confirmed ADK tool runs through ConfirmedTool.resume")

    def _get_declaration(self) -> types.FunctionDeclaration | None:
        return self.inner._get_declaration()

    @property
    def kept(self) -> int:
        return len(self._kept)

    async def check_require_confirmation(
        self, args: dict[str, Any], tool_context: ToolContext
    ) -> bool:
        if _hook(tool_context) is not None:
            return False  # run_async keeps the call itself
        if self.forced:
            return True
        return await self.inner.check_require_confirmation(args, tool_context)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        hook = _hook(tool_context)
        if hook is None:
            # ADK's run_async: its confirmation gate (check_require_confirmation,
            # above) and its re-run after the client's answer.
            return _answered(await self.inner.run_async(args=args, tool_context=tool_context))
        call_id = tool_context.function_call_id or ""
        if self.forced and tool_context.tool_confirmation is None:
            request = ToolConfirmation(hint=_default_hint(self.name))
        else:
            result = await self.inner.run_async(args=args, tool_context=tool_context)
            requested = tool_context.actions.requested_tool_confirmations.pop(call_id, None)
            if requested is None:
                return _answered(result)
            request = requested  # what the tool (or FunctionTool's gate) asked
        return self._keep(hook, call_id, args, request, tool_context)

    def _keep(
        self,
        hook: ConfirmationHook,
        call_id: str,
        args: dict[str, Any],
        request: ToolConfirmation,
        tool_context: ToolContext,
    ) -> Any:
        if len(self._kept) >= MAX_KEPT:
            log.warning("tool %s: %d calls await confirmation; refused", self.name, MAX_KEPT)
            return {"error": "Too many calls of this tool await confirmation; try again later."}
        confirmation = chunks.Confirmation(
            self.name,
            dict(args),
            request.hint,
            request.payload,
            tool_context.agent_name,
            tool_context.invocation_id,
        )
        kept = KeptCall(call_id, self.spec, dict(args), confirmation, tool_context)
        self._kept[call_id] = kept
        if not hook(kept):
            self._kept.pop(call_id, None)
            return {"error": "This tool call requires confirmation, and no client can give it."}
        return None  # the delegated calls answer the model

    async def resume(self, call_id: str, payload: Any) -> tuple[Any, Mapping[str, Any]]:
        """The approved call, run once: its result and its state writes.
        ``payload``: the client's (None: the one the tool offered)."""
        kept = self._kept.pop(call_id, None)
        if kept is None:
            raise RuntimeError(f"{self.name}: no call {call_id!r} awaits confirmation")
        context = kept.tool_context
        offered = kept.confirmation
        context.tool_confirmation = ToolConfirmation(
            hint=offered.hint,
            confirmed=True,
            payload=offered.payload if payload is None else payload,
        )
        result = await self.inner.run_async(args=kept.args, tool_context=context)
        context.actions.requested_tool_confirmations.pop(call_id, None)
        return result, dict(context.actions.state_delta)

    def forget(self, call_id: str) -> None:
        """The call is resolved (denied, timed out, cancelled): drop it."""
        self._kept.pop(call_id, None)


def _answered(result: Any) -> Any:
    """The tool's result as a response ADK sends: a tool that defers its
    response answers nothing when it returns a falsy value."""
    if result is None or (isinstance(result, dict) and not result):
        return {"result": result}
    return result


def may_confirm(tool: BaseTool, forced: bool) -> bool:
    """An ADK function tool whose calls may ask for a confirmation: one
    declared ``require_confirmation``, required by the deployment, or whose
    function takes the tool context (its body may ask). A long-running
    tool's answer comes later anyway; it is left as it is."""
    if not isinstance(tool, FunctionTool) or tool.is_long_running:
        return False
    if forced or tool._require_confirmation:
        return True
    try:
        parameters = inspect.signature(tool.func).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.name == "tool_context"
        or (isinstance(p.annotation, type) and issubclass(p.annotation, ToolContext))
        or p.annotation in ("ToolContext", "Context")
        for p in parameters
    )


def wrap(tool: BaseTool, requiring: Collection[str]) -> BaseTool:
    """``tool`` wrapped in a ``ConfirmedTool`` when its calls may ask."""
    forced = tool.name in requiring
    return ConfirmedTool(tool, forced=forced) if may_confirm(tool, forced) else tool


# ------------------------------------------------------------ ADK's run_async
# The HTTP chat runs ADK's own confirmation: these read its requests from a
# session's events and an event stream, and write the client's answers.


def requests_pending(events: Iterable[Event]) -> dict[str, types.FunctionCall]:
    """ADK's ``adk_request_confirmation`` calls in ``events`` that no
    function response answered yet, by approval id (``apr_`` + their id)."""
    pending: dict[str, types.FunctionCall] = {}
    for event in events:
        for call in event.get_function_calls():
            if call.name == REQUEST_CONFIRMATION and call.id:
                pending[approval_id_of(call.id)] = call
        for response in event.get_function_responses():
            pending.pop(approval_id_of(response.id or ""), None)
    return pending


def confirmation_answer(request: types.FunctionCall, approval: ToolApproval) -> types.Part:
    """The client's approval as ADK takes it: the function response to the
    request, a ``ToolConfirmation``; without a payload of the client's, the
    one the tool offered."""
    offered = ToolConfirmation.model_validate((request.args or {}).get("toolConfirmation") or {})
    payload = offered.payload if approval.payload is None else approval.payload
    answer = ToolConfirmation(hint=offered.hint, confirmed=approval.approved, payload=payload)
    return types.Part(
        function_response=types.FunctionResponse(
            id=request.id,
            name=REQUEST_CONFIRMATION,
            response=answer.model_dump(by_alias=True, exclude_none=True),
        )
    )


def original_call(request: types.FunctionCall) -> types.FunctionCall:
    return types.FunctionCall.model_validate((request.args or {}).get("originalFunctionCall") or {})


def as_approval_requests(event: Event) -> tuple[Event | None, list[chunks.ToolApprovalRequest]]:
    """An event of ADK's ``run_async`` as the chat shows it: its
    ``adk_request_confirmation`` calls become our approval requests for the
    calls they are about, and the placeholder responses of those calls (a
    "requires confirmation" error, or what the body returned when it asked)
    are hidden. Returns the rest of the event (None: nothing left)."""
    content = event.content
    if content is None or not content.parts:
        return event, []
    held = set(event.actions.requested_tool_confirmations or {})
    requests: list[chunks.ToolApprovalRequest] = []
    kept: list[types.Part] = []
    for part in content.parts:
        call, response = part.function_call, part.function_response
        if call is not None and call.name == REQUEST_CONFIRMATION and call.id:
            original = original_call(call)
            asked = ToolConfirmation.model_validate((call.args or {}).get("toolConfirmation") or {})
            confirmation = chunks.Confirmation(
                original.name or "",
                dict(original.args or {}),
                asked.hint,
                asked.payload,
                event.author,
                event.invocation_id,
            )
            requests.append(
                chunks.ToolApprovalRequest(approval_id_of(call.id), original.id or "", confirmation)
            )
        elif response is None or response.id not in held:
            kept.append(part)
    if len(kept) == len(content.parts):
        return event, requests
    if not kept:
        return None, requests
    rest = event.model_copy(update={"content": content.model_copy(update={"parts": kept})})
    return rest, requests
