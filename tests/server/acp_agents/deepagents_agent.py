"""A launcher for deepagents-acp, LangChain's Deep Agents over ACP, on a scripted model.

Run by the tests' own virtual environment for published agents
(``.venv-acp-agents``, ``requirements.txt`` beside this file), never by the
server's. Everything that speaks ACP and runs the agent is the published
packages' — ``deepagents_acp.server.AgentServerACP`` (the adapter),
``deepagents.create_deep_agent`` (the agent: its middleware, its file
tools on a ``FilesystemBackend`` rooted in the session's ``cwd``, its
human-in-the-loop interrupts) and LangGraph's checkpointer — assembled as
the package's README shows ("Launch a custom Deep Agent with ACP"; with
``--sessions FILE``, "Persist and load sessions"). The
only part of ours is the chat model, which stands in for a network one: it
answers from the conversation the agent hands it, so what the agent does
with its answers (tool calls run, permissions asked, history kept) is the
agent's own.

The model's cues, in the objective of the task (the envelope's line after
``Objective:``):

- ``write the file NAME``: calls ``write_file`` (``/NAME``, its content
  naming the task), which the agent stops on for permission
  (``interrupt_on``); then says what the tool answered.
- ``edit the readme``: calls ``edit_file`` on ``/readme.txt`` (never
  asked: only ``write_file`` is); then says what the tool answered.
- ``list the files``: calls ``ls`` on ``/``; then says what it listed.
- ``what did I ask before``: names the objectives of the earlier prompts
  the agent's checkpointer kept in this session, and the earlier results
  the envelope recalls, if any.
- ``what was cancelled``: the task ids the envelope says were stopped by
  the user (or none).
- anything else: ``Done: OBJECTIVE.`` and an ``Inline:`` part.
- ``slowly`` before any of these: the model streams "One moment. " at
  once and the rest ``SLOW_S`` later, as a slow network model would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any
from uuid import uuid4

from acp import run_agent
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from deepagents_acp.server import AgentServerACP, AgentSessionContext
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.checkpoint.memory import MemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

SLOWLY = "slowly "
# How long "slowly" takes: longer than the tests' server waits for an agent
# to confirm a cancel (half of task_cancel_grace_s).
SLOW_S = 2.0
_OBJECTIVE = re.compile(r"^Objective:\n(.*)$", re.M)
_TASK = re.compile(r"^Task (task_\w+) ")
_CANCELLED = re.compile(r"^Stopped by the user[^\n]*\n((?:- [^\n]*\n?)+)", re.M)
_RECALLED = re.compile(r"^Earlier tasks of this user[^\n]*\n((?:- [^\n]*\n?)+)", re.M)


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def _objective(message: BaseMessage) -> str:
    found = _OBJECTIVE.search(_text(message))
    return found.group(1).strip() if found else _text(message).strip()


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from the messages it is given, by cue."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self  # the tools it calls are named in its script

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        prompts = [m for m in messages if isinstance(m, HumanMessage)]
        asked = prompts[-1]
        objective = _objective(asked).removeprefix(SLOWLY)
        task = _TASK.match(_text(asked))
        last = messages[-1]
        if last.type == "tool":  # the tool the script called has answered
            return AIMessage(content=f"The tool said: {_text(last)}")
        if wanted := re.match(r"write the file ([\w.-]+)", objective):
            content = f"written for {task.group(1) if task else 'no task'}\n"
            call = {"file_path": f"/{wanted.group(1)}", "content": content}
            return AIMessage(content="", tool_calls=[_call("write_file", call)])
        if objective.startswith("edit the readme"):
            done = f"readme, edited for {task.group(1) if task else 'no task'}"
            call = {"file_path": "/readme.txt", "old_string": "readme", "new_string": done}
            return AIMessage(content="", tool_calls=[_call("edit_file", call)])
        if objective.startswith("list the files"):
            return AIMessage(content="", tool_calls=[_call("ls", {"path": "/"})])
        if objective.startswith("what was cancelled"):
            told = _CANCELLED.search(_text(asked))
            ids = [line[2:].split(":", 1)[0] for line in told.group(1).splitlines()] if told else []
            return AIMessage(content=f"Told cancelled: {', '.join(ids) or 'none'}.")
        if objective.startswith("what did I ask before"):
            earlier = [_objective(m) for m in prompts[:-1]]
            said = f"Earlier in this session: {'; '.join(earlier) or 'nothing'}."
            if recalled := _RECALLED.search(_text(asked)):  # the envelope's, for a new session
                lines = recalled.group(1).splitlines()
                said += " Recalled: " + "; ".join(line.removeprefix("- ") for line in lines)
            return AIMessage(content=said)
        return AIMessage(content=f"Done: {objective}.\nInline:\n**{objective}**: done.")

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        # Streamed as a network model streams: the adapter reports tool calls
        # from the chunks' tool_call_chunks and the text from their content.
        reply = self._reply(messages)
        asked = [m for m in messages if isinstance(m, HumanMessage)][-1]
        if messages[-1].type != "tool" and _objective(asked).startswith(SLOWLY):
            # A model that takes its time: a word at once, then the rest.
            first = AIMessageChunk(content="One moment. ")
            if run_manager is not None:
                run_manager.on_llm_new_token(
                    "One moment. ", chunk=ChatGenerationChunk(message=first)
                )
            yield ChatGenerationChunk(message=first)
            time.sleep(SLOW_S)
        chunks = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
            for i, c in enumerate(reply.tool_calls)
        ]
        chunk = AIMessageChunk(content=reply.content, tool_call_chunks=chunks)  # type: ignore[arg-type]
        if run_manager is not None:
            run_manager.on_llm_new_token(_text(reply), chunk=ChatGenerationChunk(message=chunk))
        yield ChatGenerationChunk(message=chunk)


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{uuid4().hex[:12]}"}


def agent_factory(checkpointer: Any) -> Any:
    """The adapter's agent factory: a Deep Agent per session, in its ``cwd``."""

    def build_agent(context: AgentSessionContext) -> Any:
        return create_deep_agent(
            model=ScriptedChatModel(),
            backend=FilesystemBackend(root_dir=context.cwd, virtual_mode=True),
            checkpointer=checkpointer,
            interrupt_on={"write_file": True},
        )

    return build_agent


async def serve(sessions: str | None) -> None:
    """Serve ACP on stdio; with ``sessions`` (a SQLite file) the agent's
    checkpointer outlives the process and the adapter offers
    ``session/load`` (``load_sessions``, as its README says)."""
    if sessions is None:
        await run_agent(AgentServerACP(agent=agent_factory(MemorySaver())))
        return
    async with AsyncSqliteSaver.from_conn_string(sessions) as saver:
        await run_agent(AgentServerACP(agent=agent_factory(saver), load_sessions=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", help="a SQLite file for the sessions (session/load)")
    asyncio.run(serve(parser.parse_args().sessions))


if __name__ == "__main__":
    main()
