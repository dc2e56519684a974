"""The main flows against an ACP agent somebody else publishes: deepagents-acp.

LangChain's Deep Agents over ACP (``deepagents-acp`` 0.0.13 on
``deepagents`` 0.7.32, pinned in ``acp_agents/requirements.txt``), run from
a virtual environment of its own (``.venv-acp-agents``) by
``acp_agents/deepagents_agent.py``: the package's adapter and agent, on a
scripted chat model instead of a network one (what it answers is in that
file). The agent's own code runs the tools (its file tools write into the
session's ``cwd``), asks permission (its human-in-the-loop interrupts),
keeps the session's history (its LangGraph checkpointer) and stops on
``session/cancel``. The server is ours as in ``test_acp.py``: the task
manager on a real SQLite ledger, and by voice real uvicorn with the offline
live model.

Without ``.venv-acp-agents`` these tests skip, saying how to make it;
with ``AUDIOCORE_REQUIRE_ACP_AGENT=1`` (CI sets it) they fail instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from server_helpers import serve_ws, start
from test_acp import Socket, ask, next_turn_saying, run_one, said, stored_session, tool, tool_output
from test_tasks import running, until

from audiocore_server import Settings
from audiocore_server.tasks import TaskRecord
from audiocore_server.tasks.acp_backend import AcpBackend

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = Path(__file__).resolve().parent / "acp_agents" / "deepagents_agent.py"
REQUIRE_VARIABLE = "AUDIOCORE_REQUIRE_ACP_AGENT"
VERSIONS = {
    "deepagents-acp": "0.0.13",
    "deepagents": "0.7.32",
    "langgraph-checkpoint-sqlite": "3.1.2",
}


def agent_python(venv: str, requirements: str, versions: dict[str, str]) -> Path:
    """The Python of the virtual environment ``venv`` (in the checkout),
    which must hold ``versions``; without it the test skips saying how to
    make it, or fails with ``AUDIOCORE_REQUIRE_ACP_AGENT=1``."""
    python = ROOT / venv / "bin" / "python"
    install = (
        f"python3 -m venv {venv} && "
        f"{venv}/bin/pip install -r tests/server/acp_agents/{requirements}"
    )
    reason = None
    if not python.exists():
        reason = f"no {venv} (make it: {install})"
    else:
        probe = "import importlib.metadata as m; print(*(m.version(p) for p in {!r}))"
        found = subprocess.run(
            [str(python), "-c", probe.format(list(versions))],
            capture_output=True,
            text=True,
            check=False,
        )
        if found.returncode != 0 or found.stdout.split() != list(versions.values()):
            wanted = ", ".join(f"{p} {v}" for p, v in versions.items())
            got = found.stdout.strip() or found.stderr.strip()[-300:]
            reason = f"{wanted} not installed in {venv} ({got}; {install})"
    if reason is not None:
        if os.environ.get(REQUIRE_VARIABLE, "") not in ("", "0"):
            pytest.fail(f"{reason} ({REQUIRE_VARIABLE}=1)", pytrace=False)
        pytest.skip(reason)
    return python


@pytest.fixture(scope="module")
def published_agent() -> str:
    """The command line that runs deepagents-acp."""
    python = agent_python(".venv-acp-agents", "requirements.txt", VERSIONS)
    return shlex.join([str(python), str(LAUNCHER)])


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The agent's working directory (``--acp-cwd``)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "readme.txt").write_text("the project's readme\n")
    return work


@pytest.fixture
def settings(tmp_path: Path, work: Path, published_agent: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        model="offline",
        hello_timeout_s=0.5,
        allowed_hosts=("testserver",),
        task_backend="acp",
        acp_command=published_agent,
        acp_cwd=work,
        acp_prompt_timeout_s=60.0,
        acp_permission_timeout_s=60.0,
        acp_restart_backoff_s=0.05,
        task_cancel_grace_s=8.0,
    )


def asking(task_id: str) -> Any:
    """The agent's permission question is on the task's card."""
    return lambda r: r[task_id].permission is not None


def test_by_voice_an_answer_a_write_allowed_always_and_the_session_continued(
    settings: Settings, work: Path
) -> None:
    """On a live /ws conversation (real uvicorn, a real socket): a task
    answered and told, its inline part shown; the agent's write_file stopped
    for permission, told, allowed "always" by voice and then done by the
    agent; its next write not asked again (the agent's "always"); and a
    later task in the same ACP session, which the agent's history shows."""
    with serve_ws(settings) as url:
        ws = Socket(url)
        start(ws, userKey="d" * 24, turnDetection="manual")

        _, painted = tool_output(ask(ws, "start a task to paint the fence"), "start_task")
        told = next_turn_saying(ws, f"Your background task {painted['taskId']} completed")
        assert "Done: paint the fence." in said(told)
        inline = [
            m["delta"]
            for m in told
            if m.get("id") == f"inline_{painted['taskId']}" and "delta" in m
        ]
        assert inline == ["**paint the fence**: done."]

        _, asked = tool_output(ask(ws, "start a task to write the file notes.md"), "start_task")
        question = next_turn_saying(ws, "asks permission to Write `/notes.md`")
        assert asked["taskId"] in said(question)
        assert not (work / "notes.md").exists()  # the agent waits for the answer
        shown = [c["permission"] for c in ws.cards(asked["taskId"]) if c["permission"]]
        assert shown and shown[-1]["title"] == "Write `/notes.md`"
        assert "editing files" in [
            (c["progress"] or {}).get("phrase") for c in ws.cards(asked["taskId"])
        ]

        args, answered = tool_output(ask(ws, "yes, always"), "respond_agent_permission")
        assert args == {"decision": "always"} and answered["taskId"] == asked["taskId"]
        outcome = next_turn_saying(ws, f"Your background task {asked['taskId']} completed")
        assert "The tool said: Updated file /notes.md" in said(outcome)
        assert (work / "notes.md").read_text() == f"written for {asked['taskId']}\n"

        # "Always" is the agent's to keep: its next write_file is not asked.
        _, again = tool_output(ask(ws, "start a task to write the file todo.md"), "start_task")
        outcome = next_turn_saying(ws, f"Your background task {again['taskId']} completed")
        assert "The tool said: Updated file /todo.md" in said(outcome)
        assert (work / "todo.md").read_text() == f"written for {again['taskId']}\n"
        assert not any(c["permission"] for c in ws.cards(again["taskId"]))

        # The same ACP session: the agent's checkpointer holds the earlier prompts.
        _, history = tool_output(ask(ws, "start a task: what did I ask before"), "start_task")
        outcome = next_turn_saying(ws, f"Your background task {history['taskId']} completed")
        assert (
            "Earlier in this session: paint the fence; write the file notes.md; "
            "write the file todo.md." in said(outcome)
        )
        ws.ws.close()


def test_by_voice_a_write_rejected_and_one_cancelled_are_not_done(
    settings: Settings, work: Path
) -> None:
    with serve_ws(settings) as url:
        ws = Socket(url)
        start(ws, userKey="n" * 24, turnDetection="manual")
        _, asked = tool_output(ask(ws, "start a task to write the file notes.md"), "start_task")
        next_turn_saying(ws, "asks permission to Write `/notes.md`")
        args, answered = tool_output(ask(ws, "no"), "respond_agent_permission")
        assert args == {"decision": "reject"} and answered["decision"] == "reject"
        outcome = next_turn_saying(ws, f"Your background task {asked['taskId']} completed")
        assert "User rejected the tool call for `write_file`" in said(outcome)
        assert not (work / "notes.md").exists()

        # Cancelled by voice while the agent asks again.
        _, again = tool_output(ask(ws, "start a task to write the file notes.md"), "start_task")
        next_turn_saying(ws, "asks permission to Write `/notes.md`")
        cancel = ask(ws, f"cancel my task {again['taskId']}")
        args, cancelled = tool_output(cancel, "cancel_task")
        assert args == {"task_id": again["taskId"]} and cancelled["state"] == "cancelled"
        assert ws.cards(again["taskId"])[-1]["permission"] is None
        assert not (work / "notes.md").exists()
        ws.ws.close()


def test_cancel_while_the_agent_asks_and_the_session_goes_on(
    settings: Settings, work: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cancel while the agent waits on its permission question: the
    question is answered ``cancelled``, the agent stops its prompt with
    ``cancelled``, nothing is written, and the session takes the next task,
    whose prompt tells the agent, once, that the task was cancelled.
    Its status meanwhile is our record alone: the agent offers no fork."""

    async def scenario() -> tuple[dict[str, Any], TaskRecord, TaskRecord]:
        async with running(settings) as manager:
            record = await manager.submit("alice", "write the file cancelled.md")
            await until(manager, "alice", asking(record.id))
            status = await tool(manager, "get_task_status")(object(), record.id)
            cancelled = await manager.cancel("alice", record.id)
            assert cancelled is not None and cancelled.state == "cancelled"
            assert manager.permissions.pending("alice") == []
            told = await run_one(manager, "alice", "what was cancelled")
            assert told.result == f"Told cancelled: {record.id}."
            after = await run_one(manager, "alice", "paint the fence")
            history = await run_one(manager, "alice", "what did I ask before")
            return status, after, history

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_backend"):
        status, after, history = asyncio.run(scenario())
    logged = [r.getMessage() for r in caplog.records]
    assert any(m.endswith("the ACP prompt stopped (cancelled)") for m in logged), logged
    assert not any("did not confirm the cancel" in m for m in logged)
    assert not (work / "cancelled.md").exists()
    assert status["agent"] == {
        "unavailable": "the agent cannot be asked (it does not offer session/fork); "
        "the record above is ours"
    }
    assert after.state == "completed" and after.result == "Done: paint the fence."
    assert history.result == (
        "Earlier in this session: write the file cancelled.md; what was cancelled; paint the fence."
    )


def test_a_cancel_the_agent_confirms_late_holds_the_session_until_it_did(
    settings: Settings, work: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """deepagents-acp looks for a cancel only between the chunks its model
    streams, and forgets one when the session's next prompt begins. A model
    slower than the server waits for the confirmation: the task is
    cancelled for the user at once, but the session's next prompt waits
    for the agent's ``cancelled`` — sent at once, the next prompt would
    clear the cancel and the cancelled work would go on (here, an edit of
    the readme) beside it."""
    impatient = dataclasses.replace(settings, task_cancel_grace_s=1.0)

    async def scenario() -> TaskRecord:
        async with running(impatient) as manager:
            record = await manager.submit("alice", "slowly edit the readme")
            await until(
                manager, "alice", lambda r: r[record.id].progress == {"phrase": "organizing result"}
            )
            cancelled = await manager.cancel("alice", record.id)
            assert cancelled is not None and cancelled.state == "cancelled"
            return await run_one(manager, "alice", "slowly answer")

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_backend"):
        after = asyncio.run(scenario())
    logged = [r.getMessage() for r in caplog.records]
    assert any("did not confirm the cancel" in m for m in logged), logged
    assert (work / "readme.txt").read_text() == "the project's readme\n"
    assert after.state == "completed" and after.result == "One moment. Done: answer."


def test_owners_in_parallel_on_the_one_agent_process_keep_their_sessions_apart(
    settings: Settings,
) -> None:
    """Our server sends several owners' prompts to the one agent process at
    once; the adapter keeps one agent object and rebuilds it when the
    session changes, and each session's history stays its own."""

    async def scenario() -> list[TaskRecord]:
        async with running(settings) as manager:
            await asyncio.gather(
                run_one(manager, "alice", "paint the fence"),
                run_one(manager, "bob", "wash the car"),
            )
            return list(
                await asyncio.gather(
                    run_one(manager, "alice", "what did I ask before"),
                    run_one(manager, "bob", "what did I ask before"),
                )
            )

    alice, bob = asyncio.run(scenario())
    assert alice.result == "Earlier in this session: paint the fence."
    assert bob.result == "Earlier in this session: wash the car."


def test_a_restarted_server_makes_a_new_session_recalling_the_results(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """deepagents-acp advertises neither session/resume nor (as launched)
    session/load: after a restart the owner gets a new session, whose first
    prompt recalls the earlier results."""

    async def scenario() -> tuple[TaskRecord, str | None, TaskRecord, str | None]:
        async with running(settings) as manager:
            first = await run_one(manager, "alice", "paint the fence")
            before = await stored_session(manager, "alice")
        async with running(settings) as manager:  # a new server, a new agent process
            second = await run_one(manager, "alice", "what did I ask before")
            after = await stored_session(manager, "alice")
        return first, before, second, after

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_backend"):
        first, before, second, after = asyncio.run(scenario())
    assert first.result == "Done: paint the fence."
    assert before is not None and after is not None and before != after
    assert second.result == (
        "Earlier in this session: nothing. Recalled: paint the fence -> Done: paint the fence."
    )
    started = [r.getMessage() for r in caplog.records if "ACP agent started" in r.getMessage()]
    assert len(started) == 2 and all("loadSession False" in m for m in started), started


def test_with_its_sessions_on_disk_a_restarted_server_loads_the_session(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Launched with a durable checkpointer the adapter advertises
    ``loadSession``: a new server (and agent process) takes the owner's
    session back with ``session/load``, the agent replaying its history
    (which is not progress), and the next task continues it."""
    durable = dataclasses.replace(
        settings,
        acp_command=shlex.join(
            [*shlex.split(settings.acp_command or ""), "--sessions", str(tmp_path / "sessions.db")]
        ),
    )

    async def scenario() -> tuple[str | None, TaskRecord, str | None]:
        async with running(durable) as manager:
            await run_one(manager, "alice", "paint the fence")
            before = await stored_session(manager, "alice")
        async with running(durable) as manager:
            second = await run_one(manager, "alice", "what did I ask before")
            after = await stored_session(manager, "alice")
        return before, second, after

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_backend"):
        before, second, after = asyncio.run(scenario())
    started = [r.getMessage() for r in caplog.records if "ACP agent started" in r.getMessage()]
    assert len(started) == 2 and all("loadSession True" in m for m in started), started
    assert before is not None and before == after
    # The agent's own history, taken back; its replay of "Done: paint the
    # fence." (before session/load answers) is not in the new task's answer.
    assert second.result == "Earlier in this session: paint the fence."


def test_an_agent_without_mcp_over_http_gets_no_coordination_tools(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """deepagents-acp 0.0.13 advertises no ``mcpCapabilities`` (and its
    adapter keeps a session's ``mcpServers`` without connecting to them):
    the server offers it no MCP server and makes no token, and its tasks
    run as before."""

    async def scenario() -> tuple[TaskRecord, int]:
        async with running(settings) as manager:
            record = await run_one(manager, "alice", "list the files")
            backend = manager.backend
            assert isinstance(backend, AcpBackend)
            return record, len(backend.coordination._issued)

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_backend"):
        record, tokens = asyncio.run(scenario())
    assert "MCP over HTTP False (no coordination tools offered)" in caplog.text
    assert tokens == 0
    # The agent's own tool ran in the session's cwd: it listed what is there.
    assert record.result == "The tool said: ['/readme.txt']"
    assert record.progress == {"phrase": "organizing result"}
