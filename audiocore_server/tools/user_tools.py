"""A user's agent's tools, as the server runs them.

An ADK agent lists its tools as plain functions, ADK tools (``FunctionTool``,
``LongRunningFunctionTool``, ``AgentTool``, built-in Gemini tools) and
toolsets (an MCP server's). The server keeps them all, and takes over the
calls it must complete itself:

* a plain function declared with ``@tool(...)`` (``tools/spec.py``): runs in
  the browser, or after the user's approval, exactly as the demo's tools do;
* a plain function named in ``tools_requiring_approval``: the same, after the
  user's approval;
* an ADK function tool that asks for ADK's confirmation
  (``require_confirmation``, ``tool_context.request_confirmation``, or named
  in ``tools_requiring_approval``): wrapped so that live connections ask
  too (``tools/confirmation.py``); ADK's ``run_async`` asks as ADK does;
* anything else is ADK's to run, as in ``run_async``.

``adapt`` returns the agent's tool list for ADK and the specs of the calls
the server completes (by name: what the connection and the chat look up).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset

from .confirmation import wrap
from .spec import ToolSpec, adk_tool, spec_of

ToolUnion = Callable[..., Any] | BaseTool | BaseToolset


@dataclasses.dataclass(frozen=True)
class AdaptedTools:
    tools: list[ToolUnion]  # for the agent, in its order
    specs: list[ToolSpec]  # the plain functions', by which the server runs them


def adapt(tools: Iterable[ToolUnion], requiring: Collection[str]) -> AdaptedTools:
    """The agent's ``tools`` with approval required of those named in
    ``requiring`` (over what a ``@tool`` declares, as for the demo)."""
    adapted: list[ToolUnion] = []
    specs: list[ToolSpec] = []
    for item in tools:
        if isinstance(item, BaseTool):
            adapted.append(wrap(item, requiring))
            continue
        if isinstance(item, BaseToolset) or not callable(item):
            adapted.append(item)
            continue
        spec = spec_of(item)
        if spec.name in requiring:
            spec = dataclasses.replace(spec, approval=True)
        specs.append(spec)
        # A server tool whose body asks for a confirmation gets it as ADK's do.
        adapted.append(wrap(adk_tool(spec), ()))
    return AdaptedTools(adapted, specs)


def static_names(tools: Sequence[ToolUnion]) -> tuple[set[str], bool]:
    """The names of ``tools`` known before any call, and whether some are
    not (a toolset lists its tools only when it connects)."""
    names: set[str] = set()
    dynamic = False
    for item in tools:
        if isinstance(item, BaseToolset):
            dynamic = True
        elif isinstance(item, BaseTool):
            names.add(item.name)
        elif callable(item):
            names.add(spec_of(item).name)
    return names, dynamic


def gemini_only(tools: Iterable[ToolUnion]) -> list[str]:
    """The names of ``tools`` that only Gemini runs (ADK's built-in search,
    maps, URL context and retrieval tools, which ADK refuses for any other
    model while it builds the request)."""
    kinds = _gemini_only_kinds()
    return [item.name for item in tools if isinstance(item, kinds)]


def _gemini_only_kinds() -> tuple[type[BaseTool], ...]:
    from google.adk.tools.enterprise_search_tool import EnterpriseWebSearchTool
    from google.adk.tools.google_maps_grounding_tool import GoogleMapsGroundingTool
    from google.adk.tools.google_search_tool import GoogleSearchTool
    from google.adk.tools.url_context_tool import UrlContextTool
    from google.adk.tools.vertex_ai_search_tool import VertexAiSearchTool

    kinds: list[type[BaseTool]] = [
        EnterpriseWebSearchTool,
        GoogleMapsGroundingTool,
        GoogleSearchTool,
        UrlContextTool,
        VertexAiSearchTool,
    ]
    try:  # needs Vertex AI's SDK, which the server does not install
        from google.adk.tools.retrieval.vertex_ai_rag_retrieval import VertexAiRagRetrieval
    except ImportError:
        pass
    else:
        kinds.append(VertexAiRagRetrieval)
    return tuple(kinds)
