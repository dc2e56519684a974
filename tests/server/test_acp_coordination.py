"""The ACP agent's coordination tools over MCP, and projects (issue #41, 1 and 5).

The tests' agent (``acp_agent.py``) connects to the MCP server each session
is offered and calls its tools on a cue ("mcp call NAME {JSON}"), so every
call here goes agent → our MCP server over HTTP → the task manager and
back, end to end. Waits are on the manager's change notifications.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_acp import agent_command, finished, run_one
from test_acp import settings as settings  # the fixture
from test_tasks import all_final, running, until

from audiocore_server import Settings
from audiocore_server.tasks import TaskManager, TaskRecord
from audiocore_server.tasks.acp_backend import AcpBackend
from audiocore_server.tasks.live_tools import build_live_tools
from audiocore_server.tasks.projects import ProjectError, check_name, project_dir

TOOLS = "cancel_task, delegate, list_tasks, send_message, start_task, task_status"


def call(name: str, **arguments: Any) -> str:
    """The objective that has the agent call tool ``name``."""
    return f"mcp call {name} {json.dumps(arguments)}"


def answer(record: TaskRecord, name: str) -> Any:
    """The JSON a tool answered, as the agent said it."""
    assert record.state == "completed", record
    assert record.result is not None and record.result.startswith(f"MCP {name}: "), record.result
    return json.loads(record.result.removeprefix(f"MCP {name}: ").removesuffix("…"))


@pytest.fixture
def projects(tmp_path: Path, settings: Settings) -> Settings:
    root = tmp_path / "projects"
    for name in ("alpha", "beta", "nested/gamma"):
        (root / name).mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "escape").symlink_to(tmp_path / "outside")
    (root / "alpha" / "alpha-notes.txt").write_text("alpha's notes\n")
    return dataclasses.replace(
        settings,
        acp_projects_root=root,
        acp_fs=True,
        max_task_result_chars=4000,
    )


def test_every_session_is_offered_the_tools_and_they_list_only_the_owner_s_tasks(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = dataclasses.replace(settings, max_task_result_chars=4000)

    async def scenario() -> tuple[TaskRecord, TaskRecord, TaskRecord, TaskRecord, list[str]]:
        async with running(settings) as manager:
            tools = await run_one(manager, "alice", "mcp tools")
            mine = await run_one(manager, "alice", "count the words")
            listed = await run_one(manager, "alice", call("list_tasks"))
            bobs = await run_one(manager, "bob", call("list_tasks"))
            forged = await run_one(manager, "bob", "mcp token list_tasks {}")
            backend = manager.backend
            assert isinstance(backend, AcpBackend)
            tokens = list(backend.coordination._issued.values())
            assert mine.state == "completed"
            return tools, listed, bobs, forged, tokens

    with caplog.at_level(logging.DEBUG):
        tools, listed, bobs, forged, tokens = asyncio.run(scenario())
    assert tools.result == f"MCP tools: {TOOLS}"
    found = answer(listed, "list_tasks")
    assert [t["objective"] for t in found["tasks"]][:2] == ["mcp tools", "count the words"]
    assert found["sessions"] and found["sessions"][0]["project"] is None
    # Bob's session sees Bob's tasks, and no session of Alice's.
    bob_found = answer(bobs, "list_tasks")
    assert [t["objective"] for t in bob_found["tasks"]] == [call("list_tasks")]
    assert all(s["sessionId"] != found["sessions"][0]["sessionId"] for s in bob_found["sessions"])
    assert forged.result is not None and forged.result.startswith("MCP error: unauthorized")
    # The tokens, one per session, never reach a log.
    assert len(tokens) == 2 and all(token not in caplog.text for token in tokens)


def test_the_tools_server_leaves_the_process_s_signals_and_loggers_alone(
    settings: Settings,
) -> None:
    access = logging.getLogger("uvicorn.access")

    def seen() -> tuple[Any, ...]:
        return (
            signal.getsignal(signal.SIGINT),  # asyncio.run's, inside the scenario
            signal.getsignal(signal.SIGTERM),
            logging.getLogger("uvicorn.error").level,
            access.level,
            list(access.handlers),
            access.propagate,
        )

    async def scenario() -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        before = seen()
        async with running(settings) as manager:
            await run_one(manager, "alice", "mcp tools")  # served meanwhile
            return before, seen()

    before, during = asyncio.run(scenario())
    assert during == before


def test_an_agent_without_mcp_over_http_is_offered_no_tools(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = dataclasses.replace(settings, acp_command=agent_command("--no-mcp"))

    async def scenario() -> TaskRecord:
        async with running(settings) as manager:
            return await run_one(manager, "alice", "mcp tools")

    with caplog.at_level(logging.INFO):
        assert asyncio.run(scenario()).result == "MCP error: no MCP server was offered"
    assert "MCP over HTTP False (no coordination tools offered)" in caplog.text


def test_an_owner_cannot_see_nor_touch_another_owner_s_task(settings: Settings) -> None:
    async def scenario() -> tuple[TaskRecord, TaskRecord, TaskRecord]:
        async with running(settings) as manager:
            alices = await run_one(manager, "alice", "count the words")
            status = await run_one(manager, "bob", call("task_status", task_id=alices.id))
            cancel = await run_one(manager, "bob", call("cancel_task", task_id=alices.id))
            message = await run_one(
                manager, "bob", call("send_message", task_id=alices.id, message="hi")
            )
            assert [r.id for r in await manager.tasks("alice")] == [alices.id]
            return status, cancel, message

    for record in asyncio.run(scenario()):
        assert record.result is not None
        assert record.result.startswith("MCP error: task_id: no task"), record.result


def test_start_status_message_and_cancel_through_the_tools(settings: Settings) -> None:
    async def scenario() -> dict[str, Any]:
        async with running(settings) as manager:
            found: dict[str, Any] = {}
            found["started"] = answer(
                await run_one(manager, "alice", call("start_task", objective="say hello")),
                "start_task",
            )
            await until(manager, "alice", finished(found["started"]["taskId"]))
            found["status"] = answer(
                await run_one(
                    manager, "alice", call("task_status", task_id=found["started"]["taskId"])
                ),
                "task_status",
            )
            found["sent"] = answer(
                await run_one(
                    manager,
                    "alice",
                    call("send_message", task_id=found["started"]["taskId"], message="say more"),
                ),
                "send_message",
            )
            await until(manager, "alice", finished(found["sent"]["taskId"]))
            # While a task holds the queue, one that cancels through the tool
            # and, behind it, the task it cancels.
            blocker = await manager.submit("alice", "wait for cancel")
            await until(manager, "alice", agent_at_work(blocker.id))
            asking = await manager.submit("alice", call("cancel_task", task_id="$queued"))
            victim = await manager.submit("alice", "count the words")
            await manager.cancel("alice", blocker.id)
            records = await until(manager, "alice", all_final(asking.id, victim.id))
            found["cancel"] = answer(records[asking.id], "cancel_task")
            found["victim"] = records[victim.id]
            return found

    found = asyncio.run(scenario())
    assert found["started"]["state"] == "queued"
    assert found["status"]["state"] == "completed"
    assert found["status"]["result"] == "Done: say hello."
    assert found["sent"]["objective"] == "say more"
    assert found["cancel"]["state"] == "cancelled"
    assert found["victim"].state == "cancelled" and found["victim"].started_at is None


def test_a_delegation_runs_beside_its_asker_and_its_result_comes_back_into_it(
    projects: Settings,
) -> None:
    async def scenario() -> tuple[TaskRecord, dict[str, TaskRecord]]:
        async with running(projects) as manager:
            # Alone in the queue, the asker would wait for itself: the
            # delegation runs on the turn it lends.
            asker = await run_one(
                manager, "alice", call("delegate", objective="show cwd", project="alpha")
            )
            return asker, {r.id: r for r in await manager.tasks("alice")}

    asker, records = asyncio.run(scenario())
    found = answer(asker, "delegate")
    child = records[found["taskId"]]
    assert child.parent == asker.id and child.project == "alpha"
    assert found["correlationId"] == child.correlation and child.correlation.startswith("corr_")
    assert found["state"] == "completed"
    assert found["result"] == f"cwd: {projects.acp_projects_root / 'alpha'}"
    assert child.delivery == "none" and asker.delivery == "pending"  # told once, by the asker


def test_a_delegation_to_the_asker_s_own_session_or_nowhere_is_refused(
    projects: Settings,
) -> None:
    async def scenario() -> list[TaskRecord]:
        async with running(projects) as manager:
            return [
                await run_one(manager, "alice", call("delegate", objective="show cwd")),
                await run_one(
                    manager, "alice", call("delegate", objective="show cwd", project="../x")
                ),
                await run_one(manager, "alice", call("delegate", objective="", project="beta")),
            ]

    same, escape, empty = (r.result or "" for r in asyncio.run(scenario()))
    assert same.startswith("MCP error: project: the asking task works in the main session")
    assert escape.startswith("MCP error: project: expected a name without empty, '.' or '..'")
    assert empty.startswith("MCP error: objective: expected a description")


def test_cancelling_a_delegation_answers_its_asker_and_cancelling_the_asker_stops_it(
    projects: Settings,
) -> None:
    async def delegation(manager: TaskManager, asker_id: str) -> TaskRecord:
        def child(records: dict[str, TaskRecord]) -> bool:
            return any(
                r.parent == asker_id and r.progress == {"phrase": "running commands"}
                for r in records.values()
            )

        records = await until(manager, "alice", child)
        return next(r for r in records.values() if r.parent == asker_id)

    async def scenario() -> tuple[TaskRecord, TaskRecord, TaskRecord, TaskRecord]:
        async with running(projects) as manager:
            wait = call("delegate", objective="wait for cancel", project="beta")
            first = await manager.submit("alice", wait)
            child = await delegation(manager, first.id)
            await manager.cancel("alice", child.id)  # by voice, or another session
            first_done = (await until(manager, "alice", finished(first.id)))[first.id]
            second = await manager.submit("alice", wait)
            child2 = await delegation(manager, second.id)
            await manager.cancel("alice", second.id)
            records = await until(manager, "alice", all_final(second.id, child2.id))
            return first_done, records[child.id], records[second.id], records[child2.id]

    first, child, second, child2 = asyncio.run(scenario())
    assert child.state == "cancelled"
    assert answer(first, "delegate")["state"] == "cancelled"
    assert second.state == "cancelled" and child2.state == "cancelled"


def test_a_delegation_nobody_waits_for_is_stopped_and_misuse_is_refused(
    projects: Settings,
) -> None:
    async def scenario() -> tuple[list[str], TaskRecord]:
        async with running(projects) as manager:
            errors = []
            with pytest.raises(RuntimeError) as caught:  # no task runs
                await manager.delegate("alice", "task_00000000", "show cwd", "beta")
            errors.append(str(caught.value))
            asker = await manager.submit("alice", "wait for cancel")
            await until(manager, "alice", agent_at_work(asker.id))
            waiter = asyncio.create_task(
                manager.delegate("alice", asker.id, "wait for cancel", "beta")
            )
            records = await until(
                manager,
                "alice",
                lambda r: any(
                    t.parent == asker.id and t.progress == {"phrase": "running commands"}
                    for t in r.values()
                ),
            )
            child = next(t for t in records.values() if t.parent == asker.id)
            with pytest.raises(RuntimeError) as caught:  # one at a time
                await manager.delegate("alice", asker.id, "show cwd", "alpha")
            errors.append(str(caught.value))
            with pytest.raises(RuntimeError) as caught:  # not from a delegation
                await manager.delegate("alice", child.id, "show cwd", "alpha")
            errors.append(str(caught.value))
            waiter.cancel()  # the tool call dropped: the child is stopped
            stopped = (await until(manager, "alice", finished(child.id)))[child.id]
            await manager.cancel("alice", asker.id)
            return errors, stopped

    errors, stopped = asyncio.run(scenario())
    assert errors[0] == "task task_00000000 is not running here: only it may delegate"
    assert errors[1].endswith("already waits for a delegation")
    assert errors[2] == "a delegated task cannot delegate in turn"
    assert stopped.state == "cancelled" and stopped.delivery == "none"


# ---------------------------------------------------------------- projects


def test_project_names_are_checked() -> None:
    for name in ("alpha", "nested/gamma", "a.b", "x_1-2"):
        assert check_name(name) == name
    bad = {
        "": "expected 1 to",
        "/etc": "got the absolute path",
        "\\server\\x": "got the absolute path",
        "C:/x": "got the absolute path",
        "..": "without empty, '.' or '..' parts",
        "a/../b": "without empty, '.' or '..' parts",
        "a//b": "without empty, '.' or '..' parts",
        ".hidden": "letters, digits",
        "a b": "letters, digits",
        "x" * 201: "expected 1 to 200",
    }
    for name, why in bad.items():
        with pytest.raises(ProjectError, match="project: ") as caught:
            check_name(name)
        assert why in str(caught.value), name
    with pytest.raises(ProjectError, match="expected a name, got int"):
        check_name(3)


def test_a_project_is_a_directory_under_the_root_and_links_do_not_lead_out(
    projects: Settings,
) -> None:
    root = projects.acp_projects_root
    assert root is not None
    assert project_dir(root, "alpha") == (root / "alpha").resolve()
    assert project_dir(root, "nested/gamma") == (root / "nested" / "gamma").resolve()
    for name, why in {
        "escape": "leads out of the projects root",
        "missing": "no project 'missing'",
        "alpha/alpha-notes.txt": "no project 'alpha/alpha-notes.txt'",
    }.items():
        with pytest.raises(ProjectError, match=why):
            project_dir(root, name)
    with pytest.raises(ProjectError, match="acp_projects_root is not set"):
        project_dir(None, "alpha")


def test_a_projects_root_that_is_no_directory_is_a_settings_problem(
    settings: Settings, tmp_path: Path
) -> None:
    missing = dataclasses.replace(settings, acp_projects_root=tmp_path / "none")
    assert f"acp_projects_root: {tmp_path / 'none'} is not a directory" in missing.problems()


def test_a_task_naming_a_bad_project_is_refused_at_once(projects: Settings) -> None:
    async def scenario() -> list[str]:
        errors = []
        async with running(projects) as manager:
            for name in ("../outside", "escape", "missing"):
                with pytest.raises(ValueError) as caught:
                    await manager.submit("alice", "show cwd", project=name)
                errors.append(str(caught.value))
            assert await manager.tasks("alice") == []
        return errors

    assert [e.split(":")[0] for e in asyncio.run(scenario())] == ["project"] * 3


def test_a_project_s_task_runs_in_its_directory_with_its_files_and_is_resumed_there(
    projects: Settings, tmp_path: Path
) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    settings = dataclasses.replace(
        projects, acp_command=agent_command("--resume", "--state", str(state))
    )

    async def scenario() -> tuple[list[TaskRecord], list[TaskRecord], str | None, str | None]:
        async with running(settings) as manager:
            first = [
                await run_one_in(manager, "show cwd", "alpha"),
                await run_one_in(manager, "read file alpha-notes.txt", "alpha"),
                await run_one_in(manager, "read file alpha-notes.txt", None),
                await run_one_in(manager, "show cwd", "nested/gamma"),
            ]
            sessions = await sessions_of(manager)
        async with running(settings) as manager:  # a new agent process: resumed
            again = [await run_one_in(manager, "show cwd", "alpha")]
            assert await sessions_of(manager) == sessions
        return first, again, sessions.get("alpha"), sessions.get(None)

    first, again, alpha_session, main_session = asyncio.run(scenario())
    root = projects.acp_projects_root
    assert root is not None
    assert first[0].result == f"cwd: {root / 'alpha'}"
    assert first[1].result == "alpha-notes.txt says: alpha's notes"
    assert first[2].result is not None and first[2].result.startswith("Refused")
    assert first[3].result == f"cwd: {root / 'nested' / 'gamma'}"
    assert again[0].result == f"cwd: {root / 'alpha'}"
    assert alpha_session and main_session and alpha_session != main_session


def test_the_voice_names_a_project_with_start_project_task(
    projects: Settings, settings: Settings
) -> None:
    context = SimpleNamespace(state={}, session=SimpleNamespace(events=[]))

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], TaskRecord, list[str]]:
        async with running(settings) as plain:
            without = [t.__name__ for t in build_live_tools(plain, lambda _: "alice")]
        async with running(projects) as manager:
            tools = {t.__name__: t for t in build_live_tools(manager, lambda _: "alice")}
            start = tools["start_project_task"]
            refused = await start("show cwd", "../etc", context)
            started = await start("show cwd", "alpha", context)
            done = (await until(manager, "alice", finished(started["taskId"])))[started["taskId"]]
            return refused, started, done, without

    refused, started, done, without = asyncio.run(scenario())
    assert "start_project_task" not in without
    assert refused == {
        "error": "project: expected a name without empty, '.' or '..' parts, got '../etc'"
    }
    assert started["state"] in ("queued", "running")
    assert done.project == "alpha" and done.result == f"cwd: {projects.acp_projects_root / 'alpha'}"


async def run_one_in(manager: TaskManager, objective: str, project: str | None) -> TaskRecord:
    record = await manager.submit("alice", objective, project=project)
    return (await until(manager, "alice", finished(record.id)))[record.id]


async def sessions_of(manager: TaskManager) -> dict[str | None, str | None]:
    backend = manager.backend
    assert isinstance(backend, AcpBackend)
    return {s["project"]: s["sessionId"] for s in await backend.sessions.sessions("alice")}


def agent_at_work(task_id: str) -> Any:
    return lambda r: r[task_id].progress == {"phrase": "running commands"}
