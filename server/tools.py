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
list. Approval and browser tools are *delegated*: ADK sees them as
long-running tools (it sends the model no answer of its own), and the
connection asks the client, runs the tool when approved, and sends the
model the function response (``server/delegation.py``).

A server tool that keeps data in the session declares a parameter annotated
``ToolState``: it receives the session's state, and what it writes is saved
with the function response (the ``state`` parameter is not declared to the
model).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, Literal, TypeVar

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool

RunsIn = Literal["server", "browser"]
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
    if not spec.delegated:
        return (spec.adk or FunctionTool)(spec.function)
    state_param = _state_parameter(spec.function)
    signature = inspect.signature(spec.function)

    def declared(**_: Any) -> None:
        return None  # never answers: the connection completes the call

    declared.__name__ = spec.name
    declared.__doc__ = spec.function.__doc__
    declared.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name != state_param]
    )
    declared.__annotations__ = {
        k: v
        for k, v in inspect.get_annotations(spec.function, eval_str=True).items()
        if k != state_param
    }
    return LongRunningFunctionTool(declared)


async def run_server_tool(spec: ToolSpec, args: Mapping[str, Any], state: ToolState) -> Any:
    """Run a delegated server tool (after its approval) with ``args`` as the
    model gave them. Raises what the tool raises; TypeError for bad args."""
    kwargs = dict(args)
    state_param = _state_parameter(spec.function)
    if state_param is not None:
        kwargs[state_param] = state
    bound = inspect.signature(spec.function).bind(**kwargs)  # TypeError if wrong
    if inspect.iscoroutinefunction(spec.function):
        return await spec.function(*bound.args, **bound.kwargs)
    return await asyncio.to_thread(spec.function, *bound.args, **bound.kwargs)
