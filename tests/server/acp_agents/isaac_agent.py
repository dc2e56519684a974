"""A launcher for isaac-acp, an ACP coding agent on pydantic-ai, on a scripted model.

Run by its own virtual environment (``.venv-acp-isaac``,
``requirements-isaac.txt`` beside this file), never by the server's.
Everything that speaks ACP and runs the agent is the published package's:
``isaac.agent.ACPAgent`` (sessions, prompts, tool-call updates, permission
questions), which turns each session's ``mcpServers`` into pydantic-ai MCP
toolsets (``isaac.agent.mcp_support``, prefixed with the server's name),
and its own agent factory (``create_subagent_for_model``: its tools, its
capabilities, the session's MCP toolsets) — handed to ``ACPAgent`` as its
``runner_factory``, the constructor's own hook, and run with ``run_agent``
as isaac's ``run_acp_agent`` does. The only part of ours is the model: the
factory's pydantic-ai agent gets a ``FunctionModel``
(``pydantic_ai.models.function``) instead of isaac's offline ``TestModel``,
a function that answers from the messages the agent hands it. So the tool
calls it asks for are made by pydantic-ai's MCP client, over HTTP, to the
server the session was offered.

The model's cues, in the objective of the task (the envelope's line after
``Objective:``); it calls only tools of the session's MCP servers (their
prefix), never isaac's own:

- ``coordinate: tools``: names the MCP tools it was offered.
- ``coordinate: list``: calls ``list_tasks``.
- ``coordinate: start OBJECTIVE``: calls ``start_task``.
- ``coordinate: delegate OBJECTIVE to PROJECT``: calls ``delegate``.
- ``coordinate: status TASK_ID`` / ``coordinate: cancel TASK_ID``: calls
  ``task_status`` / ``cancel_task``.
- after a tool call: ``MCP NAME: `` and what the tool answered (JSON, or
  its error as pydantic-ai's MCP client words it).
- anything else: ``Done: OBJECTIVE.`` and an ``Inline:`` part.

isaac keeps its configuration, state and logs under the XDG directories
(``platformdirs``), and writes each session's ``mcpServers`` — a bearer
token among them — to its state directory: the launcher points them at a
directory of its own (``--home``, else a temporary one removed at exit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator
from typing import Any

_OBJECTIVE = re.compile(r"^Objective:\n(.*)$", re.M)
# A cue, the tool it calls and the names of its arguments, in the cue's groups.
_CUES = [
    (re.compile(r"coordinate: list$"), "list_tasks", ()),
    (re.compile(r"coordinate: start (.+)$"), "start_task", ("objective",)),
    (re.compile(r"coordinate: delegate (.+) to ([\w./-]+)$"), "delegate", ("objective", "project")),
    (re.compile(r"coordinate: status (\S+)$"), "task_status", ("task_id",)),
    (re.compile(r"coordinate: cancel (\S+)$"), "cancel_task", ("task_id",)),
]


def _objective(text: str) -> str:
    found = _OBJECTIVE.search(text)
    return (found.group(1) if found else text).strip()


def scripted_model(prefixes: list[str]) -> Any:
    """A ``FunctionModel`` that calls the MCP tools named by the cues.

    ``prefixes`` are the session's MCP toolsets' (isaac prefixes a server's
    tools with its name): a tool is ours to call only under one of them.
    """
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    def offered(info: AgentInfo) -> dict[str, str]:
        """The session's MCP tools, unprefixed name -> the name the agent knows."""
        found = {}
        for tool in info.function_tools:
            for prefix in prefixes:
                if tool.name.startswith(f"{prefix}_"):
                    found[tool.name.removeprefix(f"{prefix}_")] = tool.name
        return found

    def reply(messages: list[Any], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returned:  # the tool the script called has answered (its error too)
            content = returned[-1].content
            said = content if isinstance(content, str) else json.dumps(content, default=str)
            name = next(k for k, v in offered(info).items() if v == returned[-1].tool_name)
            return ModelResponse(parts=[TextPart(f"MCP {name}: {said}")])
        asked = next(
            p.content
            for m in reversed(messages)
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, UserPromptPart)
        )
        objective = _objective(asked if isinstance(asked, str) else " ".join(map(str, asked)))
        tools = offered(info)
        if objective == "coordinate: tools":
            return ModelResponse(parts=[TextPart(f"MCP tools: {', '.join(sorted(tools))}")])
        for pattern, tool, names in _CUES:
            if wanted := pattern.match(objective):
                if tool not in tools:
                    return ModelResponse(parts=[TextPart(f"MCP error: no tool {tool} offered")])
                arguments = dict(zip(names, wanted.groups(), strict=True))
                return ModelResponse(parts=[ToolCallPart(tools[tool], arguments)])
        done = f"Done: {objective}.\nInline:\n**{objective}**: done."
        return ModelResponse(parts=[TextPart(done)])

    def answer(messages: list[Any], info: AgentInfo) -> ModelResponse:
        return reply(messages, info)

    async def stream(messages: list[Any], info: AgentInfo) -> AsyncIterator[Any]:
        # Streamed as a network model streams: text as text deltas, a tool
        # call as one delta with its arguments as JSON.
        for i, part in enumerate(reply(messages, info).parts):
            if isinstance(part, TextPart):
                yield part.content
            else:
                call = DeltaToolCall(part.tool_name, part.args_as_json_str())
                yield {i: call}

    return FunctionModel(answer, stream_function=stream, model_name="scripted")


def runner_factory(model_id: str, toolsets: list[Any] | None = None, **kwargs: Any) -> Any:
    """isaac's own agent for the session, on the scripted model."""
    from isaac.agent.brain.agent_factory import create_subagent_for_model

    runner = create_subagent_for_model(model_id, toolsets=toolsets, **kwargs)
    prefixes = [p for t in toolsets or () if (p := getattr(t, "prefix", None))]
    runner.model = scripted_model(prefixes)
    return runner


def mend_mcp_over_http() -> None:
    """Give isaac's ``build_mcp_toolsets`` the pydantic-ai 2 class it needs.

    isaac-acp 0.4.0 requires pydantic-ai 2.5 or later but builds an HTTP MCP
    server's toolset with ``pydantic_ai.mcp.MCPServerStreamableHTTP(url,
    headers=, id=)``, a pydantic-ai 1 class that 2.0 removed for
    ``MCPToolset`` (same arguments); its ``except Exception: continue``
    then drops every server unseen. Its own function runs, given
    ``MCPToolset`` under the old name: nothing else is changed.
    """
    from types import SimpleNamespace

    from isaac.agent import mcp_support
    from pydantic_ai.mcp import MCPToolset

    mcp_support.mcp_client = SimpleNamespace(MCPServerStreamableHTTP=MCPToolset)


async def serve() -> None:
    from acp import run_agent
    from isaac.acp_runtime import ACP_STDIO_BUFFER_LIMIT_BYTES
    from isaac.agent import ACPAgent

    mend_mcp_over_http()

    await run_agent(
        ACPAgent(runner_factory=runner_factory),
        stdio_buffer_limit_bytes=ACP_STDIO_BUFFER_LIMIT_BYTES,
        use_unstable_protocol=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--home", help="isaac's configuration, state and logs (else a temporary)")
    home = parser.parse_args().home
    made = None if home else tempfile.mkdtemp(prefix="isaac-acp-")
    root = home or made
    assert root is not None
    # Before isaac is imported: it resolves its directories at import.
    for name in ("CONFIG", "STATE", "CACHE", "DATA"):
        os.environ[f"XDG_{name}_HOME"] = os.path.join(root, name.lower())
    try:
        asyncio.run(serve())
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    main()
