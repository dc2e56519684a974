"""A real ACP agent for the tests, on the agent side of the same package.

Run as ``python acp_agent.py [--load] [--state DIR]``; it speaks ACP on its
stdin/stdout like any coding agent would. What it does with a prompt is
chosen by cues in the task's objective (the line after "Objective:" of the
envelope):

* "leak secrets" — progress carrying fake secrets (a tool call, a plan, a
  message), then an answer with one in its speech and one in its inline
  part;
* "ask permission" — asks to run a tool (allow_once, allow_always,
  reject_once, reject_always), titled "run the tests" or what follows
  "ask permission to", answers with the option kind chosen (or
  "cancelled"); a session allowed "always" is not asked again;
* "never answer" — sends one progress update and never answers, not even a
  cancel;
* "wait for cancel" — one progress update, then waits until cancelled and
  stops with ``cancelled``;
* "report steps" — as "wait for cancel", having noted its progress and an
  interim result (with a fake secret, 2000 characters): a status question
  in a fork of the session (``session/fork``) answers with them; with
  "slow status" the fork's answer never comes (until cancelled);
* "read file NAME" / "write file NAME" — through the client's fs methods;
* "race files N" — N rounds of reading ``flip.txt`` and ``d/f.txt`` and
  writing ``d/out.txt`` and ``wflip.txt`` (a test swaps them for symbolic
  links meanwhile); answers how many reads said "SECRET" and how many
  requests were refused;
* "answer in markdown" — a speech and an inline part (``MARKDOWN``: a
  heading, a list, a link, a ``javascript:`` link and an HTML tag);
* "big answer" — one 200 000-character message chunk;
* "show context" — answers with the envelope's voice turns and preferences;
* "fail saying TEXT" — answers the prompt with a JSON-RPC error whose
  message is TEXT;
* "crash" — writes a 5000-character line to stderr and exits at once with
  code 3 (``os._exit``);
* "what was cancelled" — lists the cancelled tasks the envelope tells of
  (their ids), or "none";
* "what did I ask" — lists the earlier objectives of this session, and the
  earlier results the envelope recalls (a new session's);
* "show cwd" — answers with the session's ``cwd``;
* "mcp tools" — lists the tools of the MCP servers offered to the session;
* "mcp call NAME {JSON}" — calls tool NAME with the JSON arguments on the
  first MCP server offered to the session (streamable HTTP, with the
  headers given), answers "MCP NAME: " and the tool's text (or "MCP error:
  " and it); an argument "$queued" is the id of the owner's last queued
  task, found with ``list_tasks``; "mcp token NAME {JSON}" calls it with a
  made-up bearer token;
* anything else — answers "Done: <objective>.", then an "Inline:" line and
  Markdown naming the objective and linking to a page (after N seconds with
  "work N seconds").

Every agent advertises MCP over HTTP (``mcpCapabilities.http``) unless
``--no-mcp``, and ``session/fork`` and ``session/close`` unless
``--no-fork``; a prompt starting with "[A status question" is answered
from the forked session's notes (the stderr says "fork_session" and
"close_session").
``--resume`` also advertises ``session/resume`` (no history replayed); the
agent's stderr says which of ``resume_session``/``load_session`` was asked.
``--session-id-chars N`` gives session ids of N characters (a hostile
agent's). ``--load`` advertises ``loadSession``, with the sessions' histories kept in
``--state DIR`` so a new process of the agent continues them. ``--times
FILE`` appends, for each answer, the objective and the ``time.monotonic()``
at which the answer left (``benchmarks/bench_acp.py`` reads it: one clock
for every process of the machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    plan_entry,
    run_agent,
    start_tool_call,
    update_agent_message_text,
    update_plan,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    CloseSessionResponse,
    ForkSessionResponse,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionForkCapabilities,
    SessionResumeCapabilities,
    ToolCallUpdate,
)

FAKE_KEY = "sk-test0123456789abcdefghij"
MARKDOWN = (
    "## Notes\n"
    "- see [the notes](https://example.com/notes) and `notes.txt`\n"
    '- [bad](javascript:alert(1)) <img id="from-agent-md" src=x onerror="window.pwned=1">\n'
)


class TestAgent:
    def __init__(
        self,
        load: bool,
        state: Path | None,
        times: Path | None = None,
        session_id_chars: int | None = None,
        resume: bool = False,
        fork: bool = True,
        mcp: bool = True,
    ) -> None:
        self.mcp = mcp
        self.mcp_servers: dict[str, list[Any]] = {}  # session -> the MCP servers offered
        self.cwds: dict[str, str] = {}
        self.load = load
        self.resume = resume
        self.fork = fork
        self.notes: dict[str, tuple[str, str]] = {}  # session -> (progress, interim)
        self.session_id_chars = session_id_chars
        self.state = state
        self.times = times
        self.conn: Any = None
        self.histories: dict[str, list[str]] = {}
        self.cancelled: dict[str, asyncio.Event] = {}
        self.always_allowed: set[str] = set()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        print(f"initialize: client speaks version {protocol_version}", file=sys.stderr)
        caps = kwargs.get("client_capabilities")
        fs = caps.fs if caps is not None else None
        print(
            f"client capabilities: fs read {bool(fs and fs.read_text_file)}, "
            f"terminal {bool(caps and caps.terminal)}",
            file=sys.stderr,
            flush=True,
        )
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=self.load,
                mcp_capabilities=McpCapabilities(http=self.mcp),
                session_capabilities=SessionCapabilities(
                    resume=SessionResumeCapabilities() if self.resume else None,
                    fork=SessionForkCapabilities() if self.fork else None,
                    close=SessionCloseCapabilities() if self.fork else None,
                ),
            ),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = "sess_" + uuid.uuid4().hex[:12]
        if self.session_id_chars is not None:
            session_id = session_id.ljust(self.session_id_chars, "x")
        self.histories[session_id] = []
        self._offered(session_id, cwd, kwargs)
        self._save()
        return NewSessionResponse(session_id=session_id)

    def _offered(self, session_id: str, cwd: str, kwargs: dict[str, Any]) -> None:
        self.cwds[session_id] = cwd
        self.mcp_servers[session_id] = list(kwargs.get("mcp_servers") or [])

    async def resume_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> ResumeSessionResponse:
        print(f"resume_session {session_id}", file=sys.stderr, flush=True)
        saved = self._read().get(session_id)
        if saved is None:
            raise RequestError.resource_not_found(session_id)
        self.histories[session_id] = list(saved)
        self._offered(session_id, cwd, kwargs)
        return ResumeSessionResponse()

    async def fork_session(self, cwd: str, session_id: str, **kwargs: Any) -> ForkSessionResponse:
        print(f"fork_session {session_id}", file=sys.stderr, flush=True)
        fork = "fork_" + uuid.uuid4().hex[:12]
        self.histories[fork] = list(self.histories.get(session_id, []))
        if session_id in self.notes:
            self.notes[fork] = self.notes[session_id]
        return ForkSessionResponse(session_id=fork)

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        print(f"close_session {session_id}", file=sys.stderr, flush=True)
        self.histories.pop(session_id, None)
        self.notes.pop(session_id, None)
        return CloseSessionResponse()

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        print(f"load_session {session_id}", file=sys.stderr, flush=True)
        saved = self._read().get(session_id)
        if saved is None:
            raise RequestError.resource_not_found(session_id)
        self.histories[session_id] = list(saved)
        self._offered(session_id, cwd, kwargs)
        for objective in saved:  # the history replayed, as the protocol asks
            await self.conn.session_update(
                session_id=session_id, update=update_agent_message_text(f"(earlier) {objective}")
            )
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        if text.startswith("[A status question"):
            return await self._status(session_id)
        objective = text.split("Objective:\n", 1)[-1].split("\n", 1)[0]
        history = self.histories.setdefault(session_id, [])
        earlier = list(history)
        history.append(objective)
        self._save()
        cancelled = self.cancelled[session_id] = asyncio.Event()
        lowered = objective.lower()
        say = self._say(session_id)
        if lowered.startswith(("mcp tools", "mcp call ", "mcp token ")):  # first: its JSON
            await say(await self._mcp(session_id, objective))  # may carry other cues
            return PromptResponse(stop_reason="end_turn")
        if "fail saying " in lowered:
            raise RequestError(-32000, objective.partition("fail saying ")[2])
        if "crash" in lowered:
            print("x" * 5000, file=sys.stderr, flush=True)  # a last, long line
            os._exit(3)
        if "never answer" in lowered:
            await self._tool(session_id, "thinking forever")
            await asyncio.Event().wait()
        if "report steps" in lowered:
            interim = f"the notes mention {FAKE_KEY} and " + "x" * 2000
            progress = "slow" if "slow status" in lowered else "read 2 of 3 files"
            self.notes[session_id] = (progress, interim)
            await self._tool(session_id, "reading the notes")
            await cancelled.wait()
            return PromptResponse(stop_reason="cancelled")
        if "wait for cancel" in lowered:
            await self._tool(session_id, "waiting for a cancel")
            await cancelled.wait()
            return PromptResponse(stop_reason="cancelled")
        if "leak secrets" in lowered:
            await self._tool(session_id, f"export OPENAI_API_KEY={FAKE_KEY}")
            await self.conn.session_update(
                session_id=session_id,
                update=update_plan([plan_entry("clone https://bob:hunter2@git.example.com/r")]),
            )
            await say(f"Using Authorization: Bearer {FAKE_KEY}. Done.")
            await say(f"\nInline:\n```\nexport OPENAI_API_KEY={FAKE_KEY}\n```")
            return PromptResponse(stop_reason="end_turn")
        if "ask permission" in lowered:
            title = objective.partition("ask permission to ")[2].strip() or "run the tests"
            return await self._ask(session_id, title, say)
        race = re.search(r"\brace files (\d+)\b", lowered)
        if race:
            return await self._race(session_id, int(race[1]), say)
        if "read file" in lowered or "write file" in lowered:
            return await self._file(session_id, objective, say)
        if "show cwd" in lowered:
            await say(f"cwd: {self.cwds.get(session_id)}")
            return PromptResponse(stop_reason="end_turn")
        if "answer in markdown" in lowered:  # an inline part, hostile too
            await say("The notes are tidy.\nInline:\n" + MARKDOWN)
            return PromptResponse(stop_reason="end_turn")
        if "big answer" in lowered:  # one message line of about 200 kB
            await say("A" * 200_000)
            return PromptResponse(stop_reason="end_turn")
        if "show context" in lowered:
            turns = text.partition("(for context):\n")[2].split("\n\n", 1)[0]
            prefs = text.partition("The user's preferences: ")[2].split("\n", 1)[0]
            await say(f"Context: {' | '.join(turns.splitlines())}. Preferences: {prefs}")
            return PromptResponse(stop_reason="end_turn")
        if "what was cancelled" in lowered:
            told = text.partition("(cancelled: do not resume them):\n")[2].split("\n\n", 1)[0]
            ids = [line[2:].split(":", 1)[0] for line in told.splitlines() if line.startswith("- ")]
            await say("Told cancelled: " + (", ".join(ids) or "none") + ".")
            return PromptResponse(stop_reason="end_turn")
        if "what did i ask" in lowered:
            await say("Earlier in this session: " + ("; ".join(earlier) or "nothing") + ".")
            recalled = text.partition("(your history of them was lost):\n")[2]
            if recalled:
                lines = recalled.split("\n\n", 1)[0].splitlines()
                await say(" Recalled: " + "; ".join(line.lstrip("- ") for line in lines) + ".")
            return PromptResponse(stop_reason="end_turn")
        work = re.search(r"\bwork (\d+(?:\.\d+)?) seconds\b", lowered)
        if work:  # the time real work would take
            await asyncio.sleep(float(work[1]))
        await say(f"Done: {objective}.")
        await say(f"\nInline:\n**{objective}**: see [the notes](https://example.com/notes).")
        if self.times is not None:
            with self.times.open("a") as out:
                out.write(json.dumps({"objective": objective, "at": time.monotonic()}) + "\n")
        return PromptResponse(stop_reason="end_turn")

    async def _mcp(self, session_id: str, objective: str) -> str:
        """A cue's MCP call, on the first server offered to the session."""
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        servers = self.mcp_servers.get(session_id)
        if not servers:
            return "MCP error: no MCP server was offered"
        server = servers[0]
        headers = {h.name: h.value for h in server.headers}
        words = objective.split(" ", 3)
        if words[1] == "token":
            headers["Authorization"] = "Bearer made-up-token"
        transport = streamable_http_client(
            server.url, http_client=create_mcp_http_client(headers=headers)
        )
        async with Client(transport) as client:
            if words[1] == "tools":
                names = sorted(t.name for t in (await client.list_tools()).tools)
                return f"MCP tools: {', '.join(names)}"
            name, arguments = words[2], json.loads(words[3] if len(words) > 3 else "{}")
            if "$queued" in arguments.values():  # the owner's last queued task, listed
                listed = await client.call_tool("list_tasks", {})
                tasks = json.loads("".join(getattr(c, "text", "") for c in listed.content))
                queued = [t["taskId"] for t in tasks["tasks"] if t["state"] == "queued"]
                arguments = {k: queued[-1] if v == "$queued" else v for k, v in arguments.items()}
            result = await client.call_tool(name, arguments)
        text = "".join(getattr(c, "text", "") for c in result.content)
        if result.is_error:  # the package's prefix off, the tool's words kept
            text = text.removeprefix(f"Error executing tool {name}: ")
        return f"MCP {'error' if result.is_error else name}: {text}"

    async def _status(self, session_id: str) -> PromptResponse:
        cancelled = self.cancelled[session_id] = asyncio.Event()
        progress, interim = self.notes.get(session_id, ("nothing noted", ""))
        if progress == "slow":
            await cancelled.wait()
            print(f"status question cancelled in {session_id}", file=sys.stderr, flush=True)
            return PromptResponse(stop_reason="cancelled")
        await self._say(session_id)(f"Progress: {progress}.\nInterim: {interim}")
        return PromptResponse(stop_reason="end_turn")

    def _say(self, session_id: str) -> Any:
        async def say(text: str) -> None:
            await self.conn.session_update(
                session_id=session_id, update=update_agent_message_text(text)
            )

        return say

    async def _tool(self, session_id: str, title: str) -> None:
        await self.conn.session_update(
            session_id=session_id,
            update=start_tool_call("call_1", title, kind="execute", status="in_progress"),
        )

    async def _ask(self, session_id: str, title: str, say: Any) -> PromptResponse:
        if session_id in self.always_allowed:
            await say("Ran the tool: allowed always earlier in this session.")
            return PromptResponse(stop_reason="end_turn")
        await self._tool(session_id, title)
        kinds = ("allow_once", "allow_always", "reject_once", "reject_always")
        response = await self.conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id="call_1", title=title),
            options=[PermissionOption(option_id=f"opt-{k}", name=k, kind=k) for k in kinds],
        )
        outcome = response.outcome
        if outcome.outcome == "cancelled":
            await self.conn.session_update(
                session_id=session_id,
                update=update_tool_call("call_1", status="failed"),
            )
            return PromptResponse(stop_reason="cancelled")
        kind = outcome.option_id.removeprefix("opt-")
        if kind == "allow_always":
            self.always_allowed.add(session_id)
        await say(f"Permission: {kind}.")
        return PromptResponse(stop_reason="end_turn")

    async def _file(self, session_id: str, objective: str, say: Any) -> PromptResponse:
        name = objective.split("file ", 1)[1].split()[0]
        try:
            if "write file" in objective:
                await self.conn.write_text_file(
                    session_id=session_id, path=name, content="written by the agent\n"
                )
                await say(f"Wrote {name}.")
            else:
                found = await self.conn.read_text_file(session_id=session_id, path=name)
                await say(f"{name} says: {found.content.strip()}")
        except RequestError as exc:
            await say(f"Refused: {exc}")
        return PromptResponse(stop_reason="end_turn")

    async def _race(self, session_id: str, rounds: int, say: Any) -> PromptResponse:
        secrets = refused = 0
        for _ in range(rounds):
            for path in ("flip.txt", "d/f.txt"):
                try:
                    found = await self.conn.read_text_file(session_id=session_id, path=path)
                except RequestError:
                    refused += 1
                else:
                    secrets += "SECRET" in found.content
            for path in ("d/out.txt", "wflip.txt"):
                try:
                    await self.conn.write_text_file(
                        session_id=session_id, path=path, content="written by the agent\n"
                    )
                except RequestError:
                    refused += 1
        await say(f"Race: {secrets} secrets read, {refused} refused.")
        return PromptResponse(stop_reason="end_turn")

    def _read(self) -> dict[str, list[str]]:
        if self.state is None or not (self.state / "sessions.json").exists():
            return {}
        return json.loads((self.state / "sessions.json").read_text())

    def _save(self) -> None:
        if self.state is not None:
            saved = self._read()
            saved.update(self.histories)
            (self.state / "sessions.json").write_text(json.dumps(saved))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--load", action="store_true")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--no-fork", action="store_true")
    parser.add_argument("--no-mcp", action="store_true")
    parser.add_argument("--state", type=Path)
    parser.add_argument("--times", type=Path)
    parser.add_argument("--session-id-chars", type=int)
    parser.add_argument("--name", help="nothing but another command line (another agent)")
    args = parser.parse_args()
    agent = TestAgent(
        args.load,
        args.state,
        args.times,
        args.session_id_chars,
        args.resume,
        not args.no_fork,
        not args.no_mcp,
    )
    # session/resume, fork and close are "unstable" to the package: routed
    # only when asked (and offered only when advertised).
    asyncio.run(run_agent(agent, use_unstable_protocol=True))


if __name__ == "__main__":
    main()
