"""A user's agent as each surface runs it: a copy of its tree with the
models chosen by the server (docs/agents.md, "Which model runs").

| the agent's ``model`` | live surfaces (``/ws``, ``/live``, ``/run_live``) | HTTP chat |
|---|---|---|
| a ``BaseLlm`` instance | that instance | that instance |
| a model name | the live model (``--model``) | ``--chat-model`` if set, else that name |
| empty (a sub-agent) | inherited from its parent, as in ADK | inherited |
| empty (the root) | the live model | ``--chat-model``, else the chat default |

A model name runs on the provider the server is configured for (Gemini with
a key, the offline model without one). The agent's instruction, tools,
sub-agents and callbacks are kept; the user's objects are never changed.
An ``AgentTool``'s agent runs as the HTTP chat's does (a text run).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Collection, Iterator

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.tools.agent_tool import AgentTool

from ..tools.spec import ToolSpec
from ..tools.user_tools import adapt, gemini_only

# The model an agent runs with: None leaves its own (an instance, or
# inherited from its parent).
ModelFor = Callable[[LlmAgent, bool], BaseLlm | None]


class ToolNameClash(ValueError):
    """Two tools the server completes share a name in one app."""


@dataclasses.dataclass(frozen=True)
class AgentCopy:
    root: BaseAgent
    specs: dict[str, ToolSpec]  # the calls the server completes, by tool name
    gemini_only: list[str]  # the tree's tools that only Gemini runs


def walk(root: BaseAgent) -> Iterator[BaseAgent]:
    yield root
    for sub in root.sub_agents:
        yield from walk(sub)


def copy_tree(
    root: BaseAgent,
    model_for: ModelFor,
    requiring: Collection[str],
    *,
    tool_model_for: ModelFor | None = None,
) -> AgentCopy:
    """``root``'s tree cloned, each LLM agent with ``model_for``'s model and
    its tools adapted (``tools/user_tools.py``); an ``AgentTool``'s agent
    copied with ``tool_model_for`` (default ``model_for``)."""
    clone = root.clone()
    specs: dict[str, ToolSpec] = {}
    only_gemini: list[str] = []
    for agent in walk(clone):
        if not isinstance(agent, LlmAgent):
            continue
        only_gemini += [name for name in gemini_only(agent.tools) if name not in only_gemini]
        model = model_for(agent, agent is clone)
        if model is not None:
            agent.model = model
        adapted = adapt(agent.tools, requiring)
        tools = []
        for tool in adapted.tools:
            if isinstance(tool, AgentTool):
                inner = tool_model_for or model_for
                tool = copy.copy(tool)
                tool.agent = copy_tree(tool.agent, inner, requiring).root
            tools.append(tool)
        agent.tools = tools
        for spec in adapted.specs:
            twin = specs.get(spec.name)
            if twin is not None and twin.function is not spec.function:
                raise ToolNameClash(
                    f"two tools named {spec.name!r} in {root.name!r}'s agents; "
                    "the server could not tell their calls apart"
                )
            specs[spec.name] = spec
    return AgentCopy(clone, specs, only_gemini)


def live_models(live: BaseLlm) -> ModelFor:
    """The live surfaces' rule (see the table above)."""

    def model_for(agent: LlmAgent, is_root: bool) -> BaseLlm | None:
        if isinstance(agent.model, BaseLlm):
            return None
        if agent.model or is_root:
            return live
        return None

    return model_for


def chat_models(text_model: Callable[[str | None], BaseLlm]) -> ModelFor:
    """The HTTP chat's rule: ``text_model(name)`` is the text model the
    server runs for the agent's model name (None: the chat default)."""
    cache: dict[str | None, BaseLlm] = {}

    def model_for(agent: LlmAgent, is_root: bool) -> BaseLlm | None:
        if isinstance(agent.model, BaseLlm):
            return None
        if not agent.model and not is_root:
            return None
        name = agent.model or None
        if name not in cache:
            cache[name] = text_model(name)
        return cache[name]

    return model_for
