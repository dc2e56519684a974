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
- ``coordinate: message TASK_ID MESSAGE``: calls ``send_message``.
- after a tool call: ``MCP NAME: `` and what the tool answered (JSON, or
  its error as pydantic-ai's MCP client words it).
- anything else: ``Done: OBJECTIVE.`` and an ``Inline:`` part.
- ``at length `` before any of these: the model streams a thought and
  "One moment. " at once, then a dot every ``DOT_S`` for ``AT_LENGTH_S``,
  then the rest, as a long answer from a network model would.

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

AT_LENGTH = "at length "
# How long "at length" streams dots before its answer, a dot every DOT_S:
# far longer than a test waits for the cancel it is there to receive.
AT_LENGTH_S = 60.0
DOT_S = 0.05
_OBJECTIVE = re.compile(r"^Objective:\n(.*)$", re.M)
# A cue, the tool it calls and the names of its arguments, in the cue's groups.
_CUES = [
    (re.compile(r"coordinate: list$"), "list_tasks", ()),
    (re.compile(r"coordinate: start (.+)$"), "start_task", ("objective",)),
    (re.compile(r"coordinate: delegate (.+) to ([\w./-]+)$"), "delegate", ("objective", "project")),
    (re.compile(r"coordinate: status (\S+)$"), "task_status", ("task_id",)),
    (re.compile(r"coordinate: cancel (\S+)$"), "cancel_task", ("task_id",)),
    (re.compile(r"coordinate: message (\S+) (.+)$"), "send_message", ("task_id", "message")),
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
    from pydantic_ai.models.function import (
        AgentInfo,
        DeltaThinkingPart,
        DeltaToolCall,
        FunctionModel,
    )

    def offered(info: AgentInfo) -> dict[str, str]:
        """The session's MCP tools, unprefixed name -> the name the agent knows."""
        found = {}
        for tool in info.function_tools:
            for prefix in prefixes:
                if tool.name.startswith(f"{prefix}_"):
                    found[tool.name.removeprefix(f"{prefix}_")] = tool.name
        return found

    def objective_of(messages: list[Any]) -> str:
        """The objective of the prompt the agent is answering."""
        # The last user part: a prompt cancelled before its answer stays in
        # isaac's history, merged into one request with the next.
        asked = next(
            p.content
            for m in reversed(messages)
            if isinstance(m, ModelRequest)
            for p in reversed(m.parts)
            if isinstance(p, UserPromptPart)
        )
        return _objective(asked if isinstance(asked, str) else " ".join(map(str, asked)))

    def reply(messages: list[Any], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returned:  # the tool the script called has answered (its error too)
            content = returned[-1].content
            said = content if isinstance(content, str) else json.dumps(content, default=str)
            name = next(k for k, v in offered(info).items() if v == returned[-1].tool_name)
            return ModelResponse(parts=[TextPart(f"MCP {name}: {said}")])
        objective = objective_of(messages).removeprefix(AT_LENGTH)
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

    async def stream(messages: list[Any], info: AgentInfo) -> AsyncIterator[Any]:
        # Streamed as a network model streams: text as text deltas, a tool
        # call as one delta with its arguments as JSON.
        response = reply(messages, info)
        answered = any(isinstance(p, ToolReturnPart) for p in messages[-1].parts)
        if not answered and objective_of(messages).startswith(AT_LENGTH):
            # A thought (isaac sends it once its part ends: our sign that
            # the model is at work; isaac streams no answer text, it sends
            # the answer whole at the end), then a long answer, a dot at a
            # time: isaac looks for a cancel between the events its model
            # streams, and sees it here.
            yield {0: DeltaThinkingPart(content="taking it at length")}
            yield "One moment. "
            for _ in range(int(AT_LENGTH_S / DOT_S)):
                await asyncio.sleep(DOT_S)
                yield "."
        for i, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                yield part.content
            else:
                call = DeltaToolCall(part.tool_name, part.args_as_json_str())
                yield {i: call}

    return FunctionModel(reply, stream_function=stream, model_name="scripted")


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
