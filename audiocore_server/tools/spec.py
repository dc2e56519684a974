"""Agent tools and where they run: declared once, next to the function.

A tool is a plain Python function whose signature and docstring declare it
to the model. ``@tool(...)`` says how it is called:

* ``@tool()`` (or no decorator): the server runs it as soon as the model
  calls it (ADK executes it, as any ADK function tool).
* ``@tool(approval=True)``: the user must approve each call first; the server
  runs it after an approval, never after a denial.
* ``@tool(runs_in="browser")``: the client runs it (and returns its result);
  the function's body never runs on the server, its signature and docstring
  are the declaration.
* ``@tool(runs_in="browser", approval=True)``: both.

An embedder adds a tool with one decorator and one entry in the agent's tool
list. A deployment chooses which tools need approval
(``Settings.tools_requiring_approval``, applied by ``with_approvals``): its
choice overrides what the decorators declare.

Approval and browser tools are *delegated*: ADK sees them as long-running
tools (it sends the model no answer of its own), and the connection asks the
client, runs the tool when approved, and sends the model the function
response (``audiocore_server/tools/delegation.py``).

A server tool that keeps data in the session declares a parameter annotated
``ToolState``: it receives the session's state, and what it writes is saved
with the function response (the ``state`` parameter is not declared to the
model).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Collection, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.adk.tools.tool_context import ToolContext

RunsIn = Literal["server", "browser"]


class Confirmable(Protocol):
    """An ADK tool whose kept calls run after the user's confirmation
    (``tools/confirmation.py``)."""

    async def resume(self, call_id: str, payload: Any) -> tuple[Any, Mapping[str, Any]]: ...

    def forget(self, call_id: str) -> None: ...


_F = TypeVar("_F", bound=Callable[..., Any])
_SPEC = "__audiocore_tool__"


@dataclasses.dataclass(frozen=True)
class ToolSpec:
    name: str
    function: Callable[..., Any]
    approval: bool = False
    runs_in: RunsIn = "server"
    timeout_s: float | None = None  # None: the server's tool_timeout_s
    # The ADK tool of a server tool that needs more than a FunctionTool.
    adk: Callable[[Callable[..., Any]], BaseTool] | None = None
    # An ADK tool that asked for a confirmation: approved, it runs there.
    confirm: Confirmable | None = None

    @property
    def delegated(self) -> bool:
        """The connection, not ADK, completes its calls."""
        return self.approval or self.runs_in == "browser"

    def describe(self) -> dict[str, Any]:
        """What a client is told about the tool (in ``data-session``)."""
        return {"name": self.name, "approval": self.approval, "runsIn": self.runs_in}


def tool(
    *, approval: bool = False, runs_in: RunsIn = "server", timeout_s: float | None = None
) -> Callable[[_F], _F]:
    """Declare how a tool is called (see the module docstring)."""
    if runs_in not in ("server", "browser"):
        raise ValueError(f'runs_in: expected "server" or "browser", got {runs_in!r}')

    def mark(function: _F) -> _F:
        setattr(
            function,
            _SPEC,
            ToolSpec(function.__name__, function, approval, runs_in, timeout_s),
        )
        return function

    return mark


def spec_of(function: Callable[..., Any]) -> ToolSpec:
    spec = getattr(function, _SPEC, None)
    return spec if isinstance(spec, ToolSpec) else ToolSpec(function.__name__, function)


def with_approvals(specs: Sequence[ToolSpec], requiring: Collection[str]) -> list[ToolSpec]:
    """``specs`` with approval required of exactly the tools named in
    ``requiring`` (a deployment's choice, over what each ``@tool`` declares);
    ``ValueError`` for a name none of them has."""
    names = {spec.name for spec in specs}
    unknown = sorted(set(requiring) - names)
    if unknown:
        raise ValueError(
            f"tools_requiring_approval: no tool named {', '.join(map(repr, unknown))} "
            f"(the agent's tools: {', '.join(sorted(names))})"
        )
    return [dataclasses.replace(spec, approval=spec.name in requiring) for spec in specs]


class ToolState(MutableMapping[str, Any]):
    """The session state as a tool sees it; writes are collected as a delta."""

    def __init__(self, state: Mapping[str, Any]) -> None:
        self._state = dict(state)
        self.delta: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        return self._state[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._state[key] = value
        self.delta[key] = value

    def __delitem__(self, key: str) -> None:
        raise TypeError("ToolState: keys cannot be deleted; set them to None")

    def __iter__(self) -> Iterator[str]:
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)


def _state_parameter(function: Callable[..., Any]) -> str | None:
    hints = inspect.get_annotations(function, eval_str=True)
    return next((name for name, hint in hints.items() if hint is ToolState), None)


def adk_tool(spec: ToolSpec) -> BaseTool:
    """The ADK tool for ``spec``: a function tool, or a declaration-only
    long-running tool for a delegated one."""
    state_param = _state_parameter(spec.function)
    if not spec.delegated:
        if spec.adk is not None:
            return spec.adk(spec.function)
        if state_param is None:
            return FunctionTool(spec.function)
        return FunctionTool(_run_by_adk_with_state(spec, state_param))

    def declared(**_: Any) -> None:
        return None  # never answers: the connection completes the call

    _declare(declared, spec, state_param)
    return LongRunningFunctionTool(declared)


def _run_by_adk_with_state(spec: ToolSpec, state_param: str) -> Callable[..., Any]:
    """A ``ToolState`` tool that ADK runs itself (no approval asked): the
    session's state comes from ADK's tool context, and what the tool writes
    goes back there (ADK saves it with the function response)."""

    async def run(tool_context: ToolContext, **kwargs: Any) -> Any:
        state = ToolState(tool_context.state.to_dict())
        result = await run_server_tool(spec, kwargs, state)
        for key, value in state.delta.items():
            tool_context.state[key] = value
        return result

    context = inspect.Parameter(
        "tool_context", inspect.Parameter.KEYWORD_ONLY, annotation=ToolContext
    )
    _declare(run, spec, state_param, extra=context)
    return run


def _declare(
    function: Callable[..., Any],
    spec: ToolSpec,
    state_param: str | None,
    extra: inspect.Parameter | None = None,
) -> None:
    """Give ``function`` the name, docstring and signature ADK declares to
    the model: ``spec``'s, without its state parameter (and with ``extra``,
    a parameter ADK fills itself)."""
    signature = inspect.signature(spec.function)
    parameters = [p for p in signature.parameters.values() if p.name != state_param]
    annotations = {
        k: v
        for k, v in inspect.get_annotations(spec.function, eval_str=True).items()
        if k != state_param
    }
    if extra is not None:
        parameters.append(extra)
        annotations[extra.name] = extra.annotation
    function.__name__ = spec.name
    function.__doc__ = spec.function.__doc__
    function.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    function.__annotations__ = annotations


async def run_server_tool(spec: ToolSpec, args: Mapping[str, Any], state: ToolState) -> Any:
    """Run a server tool of ours (a delegated one after its approval, or a
    ``ToolState`` one ADK calls) with ``args`` as the model gave them. Raises
    what the tool raises; TypeError for bad args."""
    kwargs = dict(args)
    state_param = _state_parameter(spec.function)
    if state_param is not None:
        kwargs[state_param] = state
    bound = inspect.signature(spec.function).bind(**kwargs)  # TypeError if wrong
    if inspect.iscoroutinefunction(spec.function):
        return await spec.function(*bound.args, **bound.kwargs)
    return await asyncio.to_thread(spec.function, *bound.args, **bound.kwargs)
