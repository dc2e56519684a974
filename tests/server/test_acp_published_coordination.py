"""The coordination tools called by an ACP agent somebody else publishes: isaac-acp.

isaac-acp 0.4.0 (an ACP coding agent on pydantic-ai 2.62.0, pinned in
``acp_agents/requirements-isaac.txt``), run from a virtual environment of
its own (``.venv-acp-isaac``) by ``acp_agents/isaac_agent.py``: the
package's ACP agent and agent factory on a scripted pydantic-ai
``FunctionModel`` (its cues are in that file), with one repair of isaac's
MCP setup, named there. isaac advertises ``mcpCapabilities.http``, turns
the session's ``mcpServers`` into a pydantic-ai MCP toolset, and the
calls the model asks for go through pydantic-ai's MCP client over HTTP to
our server's coordination tools — the same tools
``test_acp_coordination.py`` drives with the tests' own agent. The server
is ours as there: the task manager on a real SQLite ledger, and by voice
real uvicorn with the offline live model.

Without ``.venv-acp-isaac`` these tests skip, saying how to make it; with
``AUDIOCORE_REQUIRE_ACP_AGENT=1`` (CI sets it) they fail instead.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from pathlib import Path
from typing import Any

import pytest
from server_helpers import serve_ws, start
from test_acp import Socket, ask, finished, next_turn_saying, run_one, said, tool_output
from test_acp_coordination import TOOLS, answer
from test_acp_published_agent import agent_python
from test_tasks import running, until

from audiocore_server import Settings
from audiocore_server.tasks import TaskRecord
from audiocore_server.tasks.acp_backend import AcpBackend

LAUNCHER = Path(__file__).resolve().parent / "acp_agents" / "isaac_agent.py"
VERSIONS = {"isaac-acp": "0.4.0", "pydantic-ai-slim": "2.62.0"}


@pytest.fixture(scope="module")
def isaac() -> str:
    """The command line that runs isaac-acp."""
    python = agent_python(".venv-acp-isaac", "requirements-isaac.txt", VERSIONS)
    return shlex.join([str(python), str(LAUNCHER)])


@pytest.fixture
def settings(tmp_path: Path, isaac: str) -> Settings:
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "projects"
    (root / "alpha").mkdir(parents=True)
    return Settings(
        data_dir=tmp_path / "data",
        model="offline",
        hello_timeout_s=0.5,
        allowed_hosts=("testserver",),
        task_backend="acp",
        acp_command=isaac,
        acp_cwd=work,
        acp_projects_root=root,
        acp_prompt_timeout_s=60.0,
        acp_restart_backoff_s=0.05,
        max_task_result_chars=4000,
    )


def test_the_agent_lists_the_tools_and_list_tasks_shows_only_the_owner_s_tasks(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[list[TaskRecord], TaskRecord, list[str]]:
        async with running(settings) as manager:
            alice = [
                await run_one(manager, "alice", objective)
                for objective in ("paint the fence", "coordinate: tools", "coordinate: list")
            ]
            bob = await run_one(manager, "bob", "coordinate: list")
            backend = manager.backend
            assert isinstance(backend, AcpBackend)
            return alice, bob, list(backend.coordination._issued.values())

    with caplog.at_level(logging.DEBUG):
        (painted, tools, listed), bob, tokens = asyncio.run(scenario())
    assert "loadSession True, MCP over HTTP True" in caplog.text  # isaac's own capabilities
    assert painted.result == "Done: paint the fence."
    assert tools.result == f"MCP tools: {TOOLS}"
    found = answer(listed, "list_tasks")
    assert [(t["taskId"], t["state"]) for t in found["tasks"]] == [
        (painted.id, "completed"),
        (tools.id, "completed"),
        (listed.id, "running"),  # the task that asks, at work in the tool call
    ]
    assert found["tasks"][0]["result"] == "Done: paint the fence."
    assert [s["project"] for s in found["sessions"]] == [None]
    # Bob's session sees Bob's task only.
    assert [t["taskId"] for t in answer(bob, "list_tasks")["tasks"]] == [bob.id]
    # The tool call is the agent's: reported as isaac reports any tool (kind
    # "other"), its name prefixed with our MCP server's.
    assert "agent other: audiocore_list_tasks" in caplog.text
    # One token per session, never in the log (the agent's stderr included).
    assert len(tokens) == 2 and all(token not in caplog.text for token in tokens)


def test_start_task_and_send_message_add_tasks_to_the_owner_s_ledger_that_run(
    settings: Settings,
) -> None:
    async def scenario() -> tuple[list[TaskRecord], dict[str, TaskRecord]]:
        async with running(settings) as manager:
            asker = await run_one(manager, "alice", "coordinate: start wash the car")
            started = answer(asker, "start_task")["taskId"]
            await until(manager, "alice", finished(started))
            status = await run_one(manager, "alice", f"coordinate: status {started}")
            sender = await run_one(manager, "alice", f"coordinate: message {started} dry it")
            sent = answer(sender, "send_message")["taskId"]
            records = await until(manager, "alice", finished(sent))
            return [asker, status, sender], records

    (asker, status, sender), records = asyncio.run(scenario())
    started = answer(asker, "start_task")
    assert started["state"] == "queued" and started["objective"] == "wash the car"
    child = records[started["taskId"]]
    assert child.state == "completed" and child.result == "Done: wash the car."
    assert child.inline == "**wash the car**: done."
    assert answer(status, "task_status")["result"] == "Done: wash the car."
    sent = records[answer(sender, "send_message")["taskId"]]
    assert sent.objective == "dry it" and sent.result == "Done: dry it."


def test_a_delegation_s_result_comes_back_into_the_asking_task(settings: Settings) -> None:
    async def scenario() -> tuple[TaskRecord, dict[str, TaskRecord]]:
        async with running(settings) as manager:
            # Alone in the queue: the delegation runs on the turn its asker
            # lends it, in a second isaac session (alpha's), beside the
            # asker's, which waits in its tool call.
            asker = await run_one(manager, "alice", "coordinate: delegate wash the car to alpha")
            return asker, {r.id: r for r in await manager.tasks("alice")}

    asker, records = asyncio.run(scenario())
    found = answer(asker, "delegate")
    child = records[found["taskId"]]
    assert child.parent == asker.id and child.project == "alpha"
    assert found["correlationId"] == child.correlation and child.correlation.startswith("corr_")
    assert found["state"] == "completed" and found["result"] == "Done: wash the car."
    assert child.delivery == "none" and asker.delivery == "pending"  # told once, by the asker


def test_another_owner_s_task_is_no_such_task(settings: Settings) -> None:
    async def scenario() -> tuple[TaskRecord, list[TaskRecord], list[TaskRecord]]:
        async with running(settings) as manager:
            alices = await run_one(manager, "alice", "paint the fence")
            tried = [
                await run_one(manager, "bob", f"coordinate: {verb} {alices.id}")
                for verb in ("status", "cancel")
            ]
            return alices, tried, await manager.tasks("alice")

    alices, tried, alice_tasks = asyncio.run(scenario())
    for record, tool in zip(tried, ("task_status", "cancel_task"), strict=True):
        assert record.state == "completed"
        assert record.result == (
            f"MCP {tool}: Error executing tool {tool}: task_id: no task {alices.id!r} of yours"
        )
    assert [(r.id, r.state) for r in alice_tasks] == [(alices.id, "completed")]


def test_by_voice_a_task_answered_and_a_delegation_s_result_told(settings: Settings) -> None:
    """On a live /ws conversation (real uvicorn, a real socket, the offline
    live model): a task answered and told with its inline part; then a
    task whose agent delegates, and the delegation's result told in the
    asker's outcome (the delegation itself is not told)."""
    with serve_ws(settings) as url:
        ws = Socket(url)
        start(ws, userKey="i" * 24, turnDetection="manual")
        _, painted = tool_output(ask(ws, "start a task to paint the fence"), "start_task")
        told = next_turn_saying(ws, f"Your background task {painted['taskId']} completed")
        assert "Done: paint the fence." in said(told)
        assert any(m.get("id") == f"inline_{painted['taskId']}" for m in told)

        turn = ask(ws, "start a task to coordinate: delegate wash the car to alpha")
        _, asker = tool_output(turn, "start_task")
        told = next_turn_saying(ws, f"Your background task {asker['taskId']} completed")
        assert '"result": "Done: wash the car."' in said(told)
        assert '"correlationId": "corr_' in said(told)
        ws.ws.close()


def test_a_delegation_cancelled_at_the_agent_answers_its_asker_cancelled(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """The delegation's prompt is cancelled at isaac once its model thinks
    (``session/cancel``, seen between the events its model streams, and
    ended ``cancelled``),
    the asker's tool call answers ``cancelled``, and the project's session
    takes the next task."""

    def streaming_child(asker_id: str) -> Any:
        return lambda r: any(
            t.parent == asker_id and t.progress == {"phrase": "thinking"} for t in r.values()
        )

    async def scenario() -> tuple[TaskRecord, TaskRecord, TaskRecord]:
        async with running(settings) as manager:
            asker = await manager.submit(
                "alice", "coordinate: delegate at length wash the car to alpha"
            )
            records = await until(manager, "alice", streaming_child(asker.id))
            child = next(t for t in records.values() if t.parent == asker.id)
            cancelled = await manager.cancel("alice", child.id)
            assert cancelled is not None and cancelled.state == "cancelled"
            done = (await until(manager, "alice", finished(asker.id)))[asker.id]
            after = await manager.submit("alice", "paint the fence", project="alpha")
            return done, child, (await until(manager, "alice", finished(after.id)))[after.id]

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_backend"):
        asker, child, after = asyncio.run(scenario())
    logged = [r.getMessage() for r in caplog.records]
    assert any(m.endswith("the ACP prompt stopped (cancelled)") for m in logged), logged
    assert not any("did not confirm the cancel" in m for m in logged)
    found = answer(asker, "delegate")
    assert found["taskId"] == child.id and found["state"] == "cancelled"
    assert after.state == "completed" and after.result == "Done: paint the fence."
