"""Background tasks on an ACP agent (``--task-backend acp``).

The agent is a real process speaking ACP on its stdio (``acp_agent.py``,
built on the agent side of the same package): what it does is chosen by
cues in the objective. The task manager, its ledger on a real SQLite file,
the live conversation on the offline model, and the permission desk are the
server's own. Tests wait on the manager's change notifications (``until``)
and on the socket's chunks, never on time; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shlex
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from server_helpers import receive_until, serve_ws, start
from starlette.testclient import TestClient
from test_tasks import all_final, running, until
from websockets.sync.client import connect

from audiocore_server import Settings, create_app
from audiocore_server.offline.permission_cues import call_for, told
from audiocore_server.tasks import TaskManager, TaskRecord
from audiocore_server.tasks.acp_backend import AcpBackend
from audiocore_server.tasks.acp_client import (
    MAX_READ_BYTES,
    MAX_WRITE_CHARS,
    AcpClient,
    AgentFiles,
)
from audiocore_server.tasks.acp_permissions import (
    MAX_TITLE_CHARS,
    Option,
    PermissionDesk,
    PermissionRequest,
    choose,
)
from audiocore_server.tasks.acp_progress import VOCABULARY, PromptRun
from audiocore_server.tasks.acp_stdio import StderrLog
from audiocore_server.tasks.adk_backend import MAX_FAILURE_CHARS
from audiocore_server.tasks.envelope import split_answer
from audiocore_server.tasks.live_tools import build_live_tools, heard_after
from audiocore_server.tasks.redact import REDACTED, redact

AGENT = Path(__file__).resolve().parent / "acp_agent.py"
FAKE_KEY = "sk-test0123456789abcdefghij"


def agent_command(*args: str) -> str:
    return shlex.join([sys.executable, str(AGENT), *args])


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        model="offline",
        hello_timeout_s=0.5,
        allowed_hosts=("testserver",),
        task_backend="acp",
        acp_command=agent_command(),
        acp_prompt_timeout_s=30.0,
        acp_permission_timeout_s=30.0,
        acp_restart_backoff_s=0.05,
        task_cancel_grace_s=4.0,
    )


def finished(task_id: str) -> Any:
    return all_final(task_id)


async def stored_session(manager: TaskManager, owner: str) -> str | None:
    """The owner's session id on the manager's agent, as its ledger keeps it."""
    backend = manager.backend
    assert isinstance(backend, AcpBackend)
    return (await manager.store.read(owner)).acp_session(backend.sessions.agent)


async def run_one(manager: TaskManager, owner: str, objective: str) -> TaskRecord:
    record = await manager.submit(owner, objective)
    return (await until(manager, owner, finished(record.id)))[record.id]


def agent_at_work(task_id: str) -> Any:
    """The agent's first tool call is on the task's card."""
    return lambda r: r[task_id].progress == {"phrase": "running commands"}


def tool(manager: TaskManager, name: str) -> Any:
    """The live tool ``name``, for the owner "alice" whatever its context."""
    return {t.__name__: t for t in build_live_tools(manager, lambda _: "alice")}[name]


# ---------------------------------------------------------------- pure parts


def test_redact_hides_what_looks_like_a_secret_and_keeps_the_rest() -> None:
    cases = {
        f"export OPENAI_API_KEY={FAKE_KEY} then": f"export OPENAI_API_KEY={REDACTED} then",
        "Authorization: Bearer abcdefgh.ijklmnop": f"Authorization: Bearer {REDACTED}",
        "git clone https://bob:hunter2@host/r.git": f"git clone https://bob:{REDACTED}@host/r.git",
        'DB_PASSWORD="two words" next': f"DB_PASSWORD={REDACTED} next",
        '{"access_token": "zz9"}': f'{{"access_token": {REDACTED}}}',
        f"the key is {FAKE_KEY}.": f"the key is {REDACTED}.",
        "AKIAABCDEFGHIJKLMNOP": REDACTED,
        "sum the amount column of sales.csv": "sum the amount column of sales.csv",
        "https://example.com/a?b=c": "https://example.com/a?b=c",
    }
    for text, expected in cases.items():
        assert redact(text) == expected, text


def test_redact_on_hostile_text() -> None:
    jwt = "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4f"
    assert redact(f"token={jwt}") == f"token={REDACTED}"
    assert redact(f"a JWT {jwt}, then") == f"a JWT {REDACTED}, then"
    assert redact("\x00 \ud800 API_KEY=\ud800\x00 x") == f"\x00 \ud800 API_KEY={REDACTED} x"
    assert redact("") == ""
    # Megabytes of near-misses of each pattern, kept as they are, in linear
    # time (a quadratic scan of these takes minutes, past the suite's time-out).
    for near in (
        "eyJ-",
        "eyJaaaaaaaa.b ",
        "sk-abc ",
        "Bearer ",
        "a://b:",
        " ghp_",
        "xoxa-ab ",
        " aKEY",
    ):
        text = near * (2_000_000 // len(near))
        assert redact(text) == text, near


def test_decisions_pick_options_by_kind_never_by_name() -> None:
    every = [Option("a", "allow_once"), Option("b", "allow_always"), Option("c", "reject_once")]
    assert choose(every, "always") == Option("b", "allow_always")
    assert choose(every[:1], "always") == Option("a", "allow_once")
    assert choose(every, "reject") == Option("c", "reject_once")
    assert choose([Option("d", "reject_always")], "reject") == Option("d", "reject_always")
    assert choose(every[:2], "reject") is None


def test_the_permission_desk_on_odd_options_and_wrong_decisions() -> None:
    async def scenario() -> None:
        shown = asyncio.Event()

        async def on_change(request: PermissionRequest, pending: bool) -> None:
            if pending:
                shown.set()

        desk = PermissionDesk(30.0, on_change)
        # No option either decision takes: answered at once, never shown.
        assert await desk.ask("alice", "task_1", "run it", []) is None
        assert not shown.is_set() and desk.pending("alice") == []

        only_reject = [Option("r", "reject_always")]
        asked = asyncio.create_task(
            desk.ask("alice", "task_2", f"deploy with {FAKE_KEY} " + "x\x00 " * 10_000, only_reject)
        )
        await shown.wait()
        request = desk.next_untold("alice")
        assert request is not None and len(request.title) <= MAX_TITLE_CHARS
        assert request.title.startswith(f"deploy with {REDACTED} x\x00 x")  # read aloud
        for wrong in (None, 5, ["always"], {"always": 1}, "ALWAYS", "", "always " * 1000):
            answer = desk.respond("alice", wrong, lambda _: True)
            assert answer["error"].startswith("decision: expected 'always' or 'reject'"), wrong
            assert len(answer["error"]) < 8000
        assert desk.respond("alice", "always", lambda _: True) == {
            "error": "the agent offered no option for 'always'"
        }
        assert desk.respond("alice", "reject", lambda _: True)["decision"] == "reject"
        assert await asked == "r"
        assert desk.pending("alice") == []

    asyncio.run(scenario())


def test_the_offline_model_s_permission_cues() -> None:
    tools = {"respond_agent_permission"}
    for text in ("yes, always", "Yes always.", "always allow", "allow it always"):
        assert call_for(text, tools) == {"decision": "always"}, text
    for text in ("no", "No.", "reject", "deny it", "no, reject"):
        assert call_for(text, tools) == {"decision": "reject"}, text
    for text in ("no idea what time it is", "always play jazz", "yes"):
        assert call_for(text, tools) is None, text
    assert call_for("yes, always", set()) is None  # not an ACP server
    asked = told(
        "[agent permission request perm_0a1b2c3d for task task_01234567] The agent working "
        "on the task asks permission to: run the tests. Ask the user whether …"
    )
    assert asked is not None and "run the tests" in asked and "task_01234567" in asked


def test_heard_after_needs_the_user_s_own_words_after_the_question() -> None:
    from google.adk.events import Event
    from google.genai import types

    def user(text: str) -> Event:
        return Event(
            author="user", content=types.Content(role="user", parts=[types.Part(text=text)])
        )

    def spoken(text: str) -> Event:
        return Event(author="user", input_transcription=types.Transcription(text=text))

    def agent(text: str) -> Event:
        return Event(
            author="live", content=types.Content(role="model", parts=[types.Part(text=text)])
        )

    question = user("[agent permission request perm_0a1b2c3d for task task_1] The agent …")
    outcome = user("[background task task_2 completed] Objective: x. Result: y. Tell …")
    assert heard_after([question, user("yes, always")], "perm_0a1b2c3d")
    assert heard_after([question, agent("Allow it?"), spoken("yes always")], "perm_0a1b2c3d")
    assert not heard_after([user("yes, always"), question], "perm_0a1b2c3d")  # before it
    assert not heard_after([question, agent("Allow it?")], "perm_0a1b2c3d")  # the model alone
    assert not heard_after([question, outcome], "perm_0a1b2c3d")  # the server's own turn
    assert not heard_after([question, user("yes, always")], "perm_99999999")  # another one
    assert not heard_after([user("yes"), question, user("ok"), question], "perm_0a1b2c3d")


def test_an_answer_s_speech_and_its_inline_part() -> None:
    assert split_answer("Done.\nInline: more") == ("Done.", "more")
    assert split_answer("Speech: Done.\nInline:\n- a\n- b\n") == ("Done.", "- a\n- b")
    assert split_answer("Done.") == ("Done.", None)
    # "Inline:" starts the part at a line's start only.
    assert split_answer("Say Inline: no.") == ("Say Inline: no.", None)
    # Nothing to say: the inline part's first line is said.
    assert split_answer("Inline: only this\nand more") == ("only this", "only this\nand more")


def test_files_stay_inside_the_working_directory(tmp_path: Path) -> None:
    from acp import RequestError

    root = tmp_path / "work"
    root.mkdir()
    (root / "in.txt").write_text("inside\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    files = AgentFiles(root, enabled=True)
    assert files.read("in.txt", None, None) == "inside\n"
    (root / "lines.txt").write_text("a\fb\r\nc\u2028d\ne")
    lines = {
        (2, 1): "c\u2028d\n",
        (1, 2): "a\fb\r\nc\u2028d\n",
        (3, None): "e",
        (None, 1): "a\fb\r\n",
    }
    lines |= {(-5, 1): "a\fb\r\n", (2, -1): "", (9, 9): "", (1, 10**18): "a\fb\r\nc\u2028d\ne"}
    for (line, limit), expected in lines.items():
        assert files.read("lines.txt", line, limit) == expected, (line, limit)
    assert files.read(str(root / "in.txt"), None, None) == "inside\n"
    for path in ("../secret.txt", str(tmp_path / "secret.txt"), "link.txt", "a/../../x"):
        with pytest.raises(RequestError):
            files.read(path, None, None)
    with pytest.raises(RequestError):
        files.write("../escape.txt", "x")
    assert not (tmp_path / "escape.txt").exists()
    with pytest.raises(RequestError) as refused:
        AgentFiles(root, enabled=False).read("in.txt", None, None)
    assert refused.value.data == {"method": "fs (not enabled on this server)"}


def test_files_follow_no_symbolic_link_and_write_beside_never_through(tmp_path: Path) -> None:
    from acp import RequestError

    root, outside = tmp_path / "work", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "victim.txt").write_text("untouched\n")
    (root / "sub" / "in.txt").write_text("inside\n")
    (root / "alias").symlink_to(root / "sub")  # a link that stays inside: not followed either
    (root / "out").symlink_to(outside)
    (root / "victim.txt").symlink_to(outside / "victim.txt")
    os.mkfifo(root / "fifo")
    files = AgentFiles(root, enabled=True)
    assert files.read("./sub/./in.txt", None, None) == "inside\n"
    refusals = {
        "alias/in.txt": "'alias' is not a directory of the working directory",
        "out/victim.txt": "'out' is not a directory of the working directory",
        "victim.txt": "is a symbolic link (not followed)",
        "fifo": "is not a regular file",
        "sub/in.txt/x": "'in.txt' is not a directory",
        "nowhere/x.txt": "no such directory",
        ".": "Is a directory",
    }
    for path, why in refusals.items():
        with pytest.raises(RequestError) as refused:
            files.read(path, None, None)
        assert why in refused.value.data["path"], path
    with pytest.raises(RequestError) as refused:
        files.write("out/new.txt", "x")
    assert "'out' is not a directory" in refused.value.data["path"]
    # A write replaces the link with a file of its own, inside.
    files.write("victim.txt", "replaced\n")
    assert not (root / "victim.txt").is_symlink()
    assert (root / "victim.txt").read_text() == "replaced\n"
    assert (outside / "victim.txt").read_text() == "untouched\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    # A file rewritten keeps its mode; no temporary file is left behind.
    (root / "sub" / "in.txt").chmod(0o751)
    files.write("sub/in.txt", "rewritten\n")
    assert (root / "sub" / "in.txt").stat().st_mode & 0o777 == 0o751
    assert sorted(p.name for p in (root / "sub").iterdir()) == ["in.txt"]


def test_files_refuse_hostile_paths_and_content_as_the_agent_s_bad_request(
    tmp_path: Path,
) -> None:
    """Every refusal is an invalid-params error saying why, never an OS or
    codec error (the agent would get an internal error, our log a trace)."""
    from acp import RequestError

    root = tmp_path / "work"
    (root / "sub").mkdir(parents=True)
    os.close(os.open(os.path.join(os.fsencode(root), b"\xff.txt"), os.O_CREAT | os.O_WRONLY))
    (root / "big.txt").write_bytes(b"x" * (MAX_READ_BYTES + 1))
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    files = AgentFiles(root, enabled=True)
    # A name that is not UTF-8 on disk is one the agent can name.
    assert files.read("\udcff.txt", None, None) == ""
    refusals = {
        "a\x00b": "expected a file path",
        "": "expected a file path",
        "\ud800.txt": "is not a file name",
        "a" * 100_000: "File name too long",
        "a/" * 5_000 + "x": "File name too long",
        "big.txt": f"more than {MAX_READ_BYTES} bytes",
        "latin1.txt": "is not UTF-8 text",
    }
    for path, why in refusals.items():
        with pytest.raises(RequestError) as refused:
            files.read(path, None, None)
        assert refused.value.code == -32602 and why in refused.value.data["path"], path
        assert len(refused.value.data["path"]) < 300  # a huge path is not echoed whole
    with pytest.raises(RequestError) as refused:
        files.read(5, None, None)  # type: ignore[arg-type]
    assert refused.value.data == {"path": "expected a file path"}
    writes = {
        ("sub", "x"): ("path", "Is a directory"),
        (".", "x"): ("path", "Is a directory"),
        ("\ud800.txt", "x"): ("path", "is not a file name"),
        ("a" * 100_000, "x"): ("path", "File name too long"),
        ("out.txt", "a\ud800b"): ("content", "expected UTF-8 text"),
        ("out.txt", "x" * (MAX_WRITE_CHARS + 1)): ("content", "at most"),
        ("out.txt", 5): ("content", "at most"),
    }
    for (path, content), (field, why) in writes.items():
        with pytest.raises(RequestError) as refused:
            files.write(path, content)  # type: ignore[arg-type]
        assert refused.value.code == -32602 and why in refused.value.data[field], path
    assert not (root / "out.txt").exists()
    files.write("out.txt", "café €\n")  # UTF-8 whatever the locale
    assert (root / "out.txt").read_bytes() == "café €\n".encode()


def test_settings_name_a_backend_and_its_command(tmp_path: Path) -> None:
    base = Settings(data_dir=tmp_path)
    assert base.problems() == []
    assert (
        Settings.from_env(
            {"AUDIOCORE_TASK_BACKEND": "acp", "AUDIOCORE_ACP_COMMAND": "agent --acp"},
            data_dir=tmp_path,
        ).problems()
        == []
    )
    bad = {
        dataclasses.replace(base, task_backend="mcp"): "task_backend: expected one of adk, acp",
        dataclasses.replace(base, task_backend="acp"): "acp_command: expected",
        dataclasses.replace(base, task_backend="acp", acp_command="a 'b"): "acp_command: cannot",
        dataclasses.replace(base, acp_prompt_timeout_s=0): "acp_prompt_timeout_s: expected more",
        dataclasses.replace(base, acp_status_timeout_s=-1): "acp_status_timeout_s: expected more",
    }
    for settings, problem in bad.items():
        assert any(p.startswith(problem) for p in settings.problems()), settings.problems()


# ---------------------------------------------------------------- the agent behind the tasks


def test_a_task_s_answer_progress_and_stages(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            seen: list[dict[str, Any]] = []
            manager.subscribe("alice", lambda r: seen.append(r.card().data()))
            done = await run_one(manager, "alice", "tidy the notes")
            assert done.state == "completed", done
            assert done.result == "Done: tidy the notes."
            assert done.inline == "**tidy the notes**: see [the notes](https://example.com/notes)."
            assert done.progress == {"phrase": "organizing result"}
            processing = [c for c in seen if c["status"] == "processing"]
            assert [c["stage"] for c in processing][:2] == ["queued", None]
            assert {c["stage"] for c in processing} >= {"delegated", "finalizing"}
            assert all(c["state"] in ("queued", "running") for c in processing)

    asyncio.run(scenario())


def test_a_large_message_is_read_and_the_answer_bounded(settings: Settings) -> None:
    async def scenario() -> TaskRecord:
        async with running(settings) as manager:
            return await run_one(manager, "alice", "big answer")

    done = asyncio.run(scenario())
    assert done.state == "completed", done
    assert done.result == "A" * (settings.max_task_result_chars - 1) + "…"
    assert done.progress == {"phrase": "organizing result"}


def test_the_card_shows_phrases_and_the_agent_s_words_go_to_the_log_redacted(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[TaskRecord, list[dict[str, Any]]]:
        async with running(settings) as manager:
            cards: list[dict[str, Any]] = []
            manager.subscribe("alice", lambda r: cards.append(r.card().data()))
            return await run_one(manager, "alice", "leak secrets please"), cards

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_progress"):
        done, cards = asyncio.run(scenario())
    assert done.state == "completed", done
    shown = [c["progress"] for c in cards if c["progress"] is not None]
    # The card: phrases of the vocabulary only, never the agent's words.
    assert {p["phrase"] for p in shown} <= VOCABULARY and all(len(p) == 1 for p in shown)
    assert shown[0] == {"phrase": "starting"}
    assert {"phrase": "running commands"} in shown  # its tool call, of kind execute
    assert not any("OPENAI" in json.dumps(c) or "hunter2" in json.dumps(c) for c in cards)
    # The log: the agent's words, redacted.
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"agent execute: export OPENAI_API_KEY={REDACTED}" in logged
    assert FAKE_KEY not in logged and "hunter2" not in logged
    # The answer is the agent's own words: redacted too, the speech and the
    # inline part.
    assert done.result == f"Using Authorization: Bearer {REDACTED} Done."  # "." in a token
    assert done.inline == f"```\nexport OPENAI_API_KEY={REDACTED}\n```"


def test_each_kind_of_activity_is_a_phrase_shown_coalesced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from acp import (
        plan_entry,
        start_tool_call,
        update_agent_message_text,
        update_agent_thought_text,
        update_plan,
        update_tool_call,
    )

    async def scenario() -> list[tuple[dict[str, str], str | None]]:
        shown: list[tuple[dict[str, str], str | None]] = []

        async def progress(card: dict[str, str], stage: str | None) -> None:
            shown.append((card, stage))

        client = AcpClient(AgentFiles(Path("."), False), PermissionDesk(1.0, None))  # type: ignore[arg-type]
        run = client.runs["s"] = PromptRun("alice", "task_1", progress)
        kinds = ["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
        updates: list[Any] = [
            start_tool_call(f"k{n}", f"{kind} {FAKE_KEY}", kind=kind)  # type: ignore[arg-type]
            for n, kind in enumerate(kinds)
        ]
        updates += [
            start_tool_call("bare", "a tool call without a kind"),
            update_tool_call("k0", status="completed"),  # its kind is its start's
            update_plan([plan_entry("clone https://bob:hunter2@git.example.com/r")]),
            update_agent_thought_text("hmm, the user's files"),
            update_agent_message_text(f"Using Authorization: Bearer {FAKE_KEY}. "),
        ]
        for update in updates:
            run.shown_at = float("-inf")  # as if the last was shown long ago
            await client.session_update("s", update)
        # A burst: the first shown at once, the latest when its time is up.
        run.shown_at = float("-inf")
        for n in range(1000):
            await client.session_update("s", start_tool_call(f"c{n}", f"step {n}", kind="read"))
        await client.session_update("s", start_tool_call("last", "grep it", kind="search"))
        later = run._later
        assert later is not None
        await later
        await run.close()
        await client.session_update("s", start_tool_call("late", "after the end"))
        return shown

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_progress"):
        shown = asyncio.run(scenario())
    phrases = [card["phrase"] for card, stage in shown]
    assert all(stage == "delegated" and len(card) == 1 for card, stage in shown)
    assert phrases == [
        "reading files",
        "editing files",
        "deleting files",
        "moving files",
        "searching",
        "running commands",
        "thinking",
        "fetching",
        "working",  # other
        "working",  # no kind
        "reading files",  # an update of the read
        "planning",
        "thinking",
        "organizing result",
        "reading files",  # the burst's first
        "searching",  # and its latest
    ]
    logged = [r.getMessage() for r in caplog.records]
    assert f"task task_1: agent read: read {REDACTED}" in logged
    assert (
        f"task task_1: agent plan: clone https://bob:{REDACTED}@git.example.com/r (pending)"
        in logged
    )
    assert f"task task_1: agent message: Using Authorization: Bearer {REDACTED}" in logged
    assert not any(FAKE_KEY in m or "hunter2" in m for m in logged)


def test_a_task_s_inline_part_goes_with_the_answer_telling_it_once_per_connection(
    settings: Settings,
) -> None:
    from audiocore_server.live.outcomes import TaskDelivery
    from audiocore_server.wire import chunks

    async def scenario() -> tuple[list[str], list[list[chunks.Chunk]], TaskRecord]:
        async with running(settings) as manager:
            done = await run_one(manager, "alice", "tidy the notes")
            handed: list[str] = []
            attached: list[list[chunks.Chunk]] = []
            told = asyncio.Event()

            def hand(prompt: str) -> None:
                handed.append(prompt)
                told.set()

            delivery = TaskDelivery(
                manager,
                "alice",
                "conn-1",
                line_free_at=lambda: 0.0,
                playback_ends_at=lambda: 0.0,
                hand_to_model=hand,
                attach=attached.append,
            )
            delivered = asyncio.Event()
            manager.subscribe(
                "alice", lambda r: delivered.set() if r.delivery == "delivered" else None
            )
            runner = asyncio.create_task(delivery.run())
            try:
                await told.wait()
                told.clear()
                delivery.interrupted()  # a barge-in: told again later…
                await told.wait()
                delivery.turn_ended()  # …and heard this time
                await delivered.wait()
            finally:
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
            return handed, attached, done

    handed, attached, done = asyncio.run(scenario())
    assert len(handed) == 2
    # Told twice, shown once: the part is already on this connection's timeline.
    assert [[c.to_json() for c in parts] for parts in attached] == [
        [c.to_json() for c in chunks.markdown_part(done.id, done.inline or "")]
    ]
    assert "More is shown on the user's screen" in handed[0]
    assert "**" not in handed[0]  # the model is given the speech, not the Markdown


def test_a_second_task_continues_the_owner_s_session_and_owners_are_apart(
    settings: Settings,
) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            first = await asyncio.gather(
                run_one(manager, "alice", "paint the fence"),
                run_one(manager, "bob", "wash the car"),
            )
            assert [r.state for r in first] == ["completed", "completed"]
            alice, bob = await asyncio.gather(
                run_one(manager, "alice", "what did I ask before"),
                run_one(manager, "bob", "what did I ask before"),
            )
            assert alice.result == "Earlier in this session: paint the fence."
            assert bob.result == "Earlier in this session: wash the car."
            ids = {await stored_session(manager, o) for o in ("alice", "bob")}
            assert len(ids) == 2 and None not in ids

    asyncio.run(scenario())


def test_after_a_restart_the_session_is_resumed_else_loaded_else_its_results_recalled(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()

    async def twice(settings: Settings) -> tuple[TaskRecord, TaskRecord, str | None, str | None]:
        async with running(settings) as manager:
            first = await run_one(manager, "alice", "paint the fence")
            before = await stored_session(manager, "alice")
        async with running(settings) as manager:  # a new server, a new agent process
            second = await run_one(manager, "alice", "what did I ask before")
            after = await stored_session(manager, "alice")
        return first, second, before, after

    def asked() -> list[str]:
        """What the agent was asked to take back, as its stderr says."""
        lines = [r.getMessage() for r in caplog.records]
        return [
            m.split()[2] for m in lines if m.startswith(("ACP agent: resume", "ACP agent: load"))
        ]

    for how in ("resume", "load"):
        caplog.clear()
        (state / "sessions.json").unlink(missing_ok=True)
        agent = ("--resume", "--load") if how == "resume" else ("--load",)
        continuing = dataclasses.replace(
            settings, acp_command=agent_command(*agent, "--state", str(state))
        )
        with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_backend"):
            first, second, before, after = asyncio.run(twice(continuing))
        assert first.state == "completed"
        assert second.result == "Earlier in this session: paint the fence."
        assert before == after  # the same session, taken back…
        # …with session/resume where the agent has it (else session/load).
        assert asked() == [f"{how}_session"], asked()

    fresh = dataclasses.replace(settings, data_dir=tmp_path / "other")
    first, second, before, after = asyncio.run(twice(fresh))
    # No loadSession: a new session, whose prompt recalls the earlier result.
    assert before != after
    assert second.result == (
        "Earlier in this session: nothing. Recalled: paint the fence -> Done: paint the fence.."
    )
    assert second.state == "completed"


def test_switching_the_agent_never_reuses_another_agent_s_session(
    settings: Settings, tmp_path: Path
) -> None:
    # Two agents (two command lines) that could load each other's sessions:
    # the same program over the same state.
    state = tmp_path / "agent-state"
    state.mkdir()
    first, second = (
        dataclasses.replace(
            settings, acp_command=agent_command("--load", "--state", str(state), "--name", name)
        )
        for name in ("a", "b")
    )

    async def once(settings: Settings, objective: str) -> TaskRecord:
        async with running(settings) as manager:
            return await run_one(manager, "alice", objective)

    async def scenario() -> list[str | None]:
        return [
            (await once(first, "paint the fence")).result,
            (await once(second, "what did I ask before")).result,
            (await once(first, "what did I ask before")).result,
        ]

    painted, on_second, back_on_first = asyncio.run(scenario())
    assert painted == "Done: paint the fence."
    # The second agent gets a session of its own, the earlier result recalled…
    assert on_second == (
        "Earlier in this session: nothing. Recalled: paint the fence -> Done: paint the fence.."
    )
    # …and the first one's session is still the first one's.
    assert back_on_first == "Earlier in this session: paint the fence."


def test_cancel_mid_prompt_waits_for_the_agent_s_cancelled(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> str:
        async with running(settings) as manager:
            record = await manager.submit("alice", "wait for cancel")
            await until(
                manager,
                "alice",
                agent_at_work(record.id),
            )
            cancelled = await manager.cancel("alice", record.id)
            assert cancelled is not None and cancelled.state == "cancelled"
            # The agent is free again: the next task is answered.
            assert (await run_one(manager, "alice", "next")).result == "Done: next."
            return record.id

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_backend"):
        task_id = asyncio.run(scenario())
    # The agent got session/cancel and stopped its prompt with "cancelled".
    logged = [r.getMessage() for r in caplog.records]
    assert f"task {task_id}: the ACP prompt stopped (cancelled)" in logged
    assert not any("did not confirm the cancel" in m for m in logged)


def test_a_cancel_is_told_to_the_agent_once_also_across_a_restart(settings: Settings) -> None:
    async def cancel_one(manager: TaskManager) -> str:
        record = await manager.submit("alice", "wait for cancel")
        await until(manager, "alice", agent_at_work(record.id))
        cancelled = await manager.cancel("alice", record.id)
        assert cancelled is not None and cancelled.state == "cancelled"
        return record.id

    async def told(manager: TaskManager, owner: str = "alice") -> str | None:
        return (await run_one(manager, owner, "what was cancelled")).result

    async def scenario() -> None:
        async with running(settings) as manager:
            # Cancelled while queued: the agent never saw it, nothing to tell.
            blocker = await manager.submit("alice", "wait for cancel")
            queued = await manager.submit("alice", "paint the fence")
            assert (await manager.cancel("alice", queued.id)).state == "cancelled"  # type: ignore[union-attr]
            await until(manager, "alice", agent_at_work(blocker.id))
            await manager.cancel("alice", blocker.id)
            assert await told(manager) == f"Told cancelled: {blocker.id}."
            assert await told(manager) == "Told cancelled: none."
            assert await told(manager, "bob") == "Told cancelled: none."
            await cancel_one(manager)  # told in the next prompt: the next task's
            last = await cancel_one(manager)
        async with running(settings) as manager:  # a new server, a new agent process
            assert await told(manager) == f"Told cancelled: {last}."
        async with running(settings) as manager:
            assert await told(manager) == "Told cancelled: none."

    asyncio.run(scenario())


def test_a_running_task_s_status_is_asked_of_the_agent_unseen_redacted_and_bounded(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], int, str | None]:
        async with running(settings) as manager:
            status = tool(manager, "get_task_status")
            record = await manager.submit("alice", "report steps")
            await until(manager, "alice", agent_at_work(record.id))
            cards: list[TaskRecord] = []
            manager.subscribe("alice", cards.append)
            asked = await status(object(), record.id)
            changed = len(cards)  # while it was asked
            await manager.cancel("alice", record.id)
            after = await status(object(), record.id)
            history = (await run_one(manager, "alice", "what did I ask before")).result
            return asked, after, changed, history

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_backend"):
        asked, after, changed, history = asyncio.run(scenario())
    assert asked["state"] == "running" and asked["progress"] == {"phrase": "running commands"}
    assert asked["agent"]["progress"] == "read 2 of 3 files."
    interim = asked["agent"]["interim"]
    assert interim.startswith(f"the notes mention {REDACTED} and xxx") and FAKE_KEY not in interim
    assert len(interim) == 300 and interim.endswith("…")
    # Asked in a fork of the session, closed after: never on the card, and
    # not in the owner's session (the next prompt there sees the task alone).
    assert changed == 0
    assert history == "Earlier in this session: report steps."
    logged = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("ACP agent: fork_session sess_") for m in logged)
    assert any(m.startswith("ACP agent: close_session fork_") for m in logged)
    # A task not running: our record alone.
    assert after["state"] == "cancelled" and "agent" not in after


def test_a_status_the_agent_does_not_give_in_time_or_cannot_falls_back_to_the_record(
    settings: Settings,
) -> None:
    async def asked(settings: Settings, objective: str) -> dict[str, Any]:
        async with running(settings) as manager:
            record = await manager.submit("alice", objective)
            await until(manager, "alice", agent_at_work(record.id))
            found = await tool(manager, "get_task_status")(object(), record.id)
            await manager.cancel("alice", record.id)
            return found

    slow = dataclasses.replace(settings, acp_status_timeout_s=0.5)
    late = asyncio.run(asked(slow, "report steps, slow status"))
    assert late["state"] == "running" and late["progress"] == {"phrase": "running commands"}
    assert late["agent"] == {
        "unavailable": "the agent did not answer within 0.5 s; the record above is ours"
    }
    unforking = dataclasses.replace(settings, acp_command=agent_command("--no-fork"))
    plain = asyncio.run(asked(unforking, "report steps"))
    assert plain["agent"] == {
        "unavailable": "the agent cannot be asked (it does not offer session/fork); "
        "the record above is ours"
    }


def test_an_agent_that_dies_fails_its_task_and_the_next_gets_a_fresh_one(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            crashed = await run_one(manager, "alice", "crash now")
            assert crashed.state == "failed"
            assert crashed.error == "the ACP agent exited with code 3 while working on the task"
            after = await run_one(manager, "alice", "what did I ask before")
            # A fresh process: a new session, the earlier (failed) task not in it.
            assert (
                after.state == "completed" and after.result == "Earlier in this session: nothing."
            )

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_backend"):
        asyncio.run(scenario())
    stderr = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ACP agent:")]
    # Its stderr reached our log, and it was never offered fs or a terminal.
    assert "ACP agent: client capabilities: fs read False, terminal False" in stderr
    assert "ACP agent: " + "x" * 499 + "…" in stderr  # a long line cut at 500


def test_the_agent_s_stderr_reaches_our_log_redacted_and_cut(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        stream = asyncio.StreamReader()
        stream.feed_data(f"export OPENAI_API_KEY={FAKE_KEY}\n".encode())
        stream.feed_data(b"\xff plain line\n" + b"y" * 600 + b"\n")
        # A key across the cut: hidden whole, not left as a short prefix.
        stream.feed_data(b"x" * 480 + f" {FAKE_KEY}\n".encode())
        stream.feed_eof()
        await StderrLog().follow(stream)

    with caplog.at_level(logging.INFO, logger="audiocore_server.tasks.acp_backend"):
        asyncio.run(scenario())
    logged = [r.getMessage() for r in caplog.records]
    assert logged == [
        f"ACP agent: export OPENAI_API_KEY={REDACTED}",
        "ACP agent: \ufffd plain line",
        "ACP agent: " + "y" * 499 + "…",
        "ACP agent: " + "x" * 480 + f" {REDACTED}",
    ]


def test_an_agent_that_cannot_start_or_initialise_fails_the_task_saying_so(
    settings: Settings,
) -> None:
    missing = dataclasses.replace(settings, acp_command="/nonexistent/agent --acp")
    silent = dataclasses.replace(
        settings, acp_command=shlex.join([sys.executable, "-c", "import sys; sys.exit(5)"])
    )

    async def scenario(settings: Settings) -> str | None:
        async with running(settings) as manager:
            done = await run_one(manager, "alice", "tidy the notes")
            assert done.state == "failed"
            return done.error

    assert asyncio.run(scenario(missing)) == (
        "the ACP agent '/nonexistent/agent' could not be started (No such file or directory)"
    )
    assert asyncio.run(scenario(silent)) == ("the ACP agent did not initialise (Connection closed)")


def test_an_agent_s_error_fails_the_task_redacted_and_bounded(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            done = await run_one(manager, "alice", f"fail saying bad key {FAKE_KEY}")
            assert done.state == "failed"
            assert done.error == f"the ACP agent refused (bad key {REDACTED})"
            long = await run_one(manager, "alice", "fail saying " + "e" * 1500)
            assert long.error is not None and long.error.endswith("e…")
            assert len(long.error) == MAX_FAILURE_CHARS

    asyncio.run(scenario())


def test_an_agent_s_unusable_session_id_fails_the_task_and_is_not_kept(
    settings: Settings,
) -> None:
    huge = dataclasses.replace(settings, acp_command=agent_command("--session-id-chars", "100000"))

    async def scenario() -> None:
        async with running(huge) as manager:
            done = await run_one(manager, "alice", "tidy the notes")
            assert done.state == "failed"
            assert done.error == (
                "the ACP agent gave a session id of 100000 characters (expected 1 to 256)"
            )
            assert await stored_session(manager, "alice") is None

    asyncio.run(scenario())


def test_an_agent_s_answers_of_the_wrong_type_fail_the_task_saying_so(
    settings: Settings,
) -> None:
    raw = Path(__file__).resolve().parent / "acp_raw_agent.py"
    expected = {
        "initialize": "the ACP agent did not initialise (answered out of protocol "
        "(protocolVersion: Input should be a valid integer, unable to parse string as an "
        "integer))",
        "session/new": "the ACP agent answered out of protocol "
        "(sessionId: Input should be a valid string)",
        "session/prompt": "the ACP agent answered out of protocol (stopReason: Input should "
        "be 'end_turn', 'max_tokens', 'max_turn_requests', 'refusal' or 'cancelled')",
    }

    async def scenario(broken: str) -> None:
        command = shlex.join([sys.executable, str(raw), broken])
        async with running(dataclasses.replace(settings, acp_command=command)) as manager:
            for _ in range(2):  # the next task meets the agent as the first did
                done = await run_one(manager, "alice", "tidy the notes")
                assert (done.state, done.error) == ("failed", expected[broken]), broken

    for broken in expected:
        asyncio.run(scenario(broken))

    async def good() -> None:  # the agent's bad update is skipped, its answer taken
        command = shlex.join([sys.executable, str(raw), "none"])
        async with running(dataclasses.replace(settings, acp_command=command)) as manager:
            done = await run_one(manager, "alice", "tidy the notes")
            assert (done.state, done.result) == ("completed", "Done.")

    asyncio.run(good())


def test_an_agent_that_never_answers_fails_the_task_in_time(settings: Settings) -> None:
    quick = dataclasses.replace(settings, acp_prompt_timeout_s=1.0)

    async def scenario() -> None:
        async with running(quick) as manager:
            done = await run_one(manager, "alice", "never answer")
            assert done.state == "failed"
            assert done.error == "the ACP agent did not answer within 1 seconds"

    asyncio.run(scenario())


def test_files_through_the_agent_inside_and_outside(settings: Settings, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("hello from the notes\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    (work / "link.txt").symlink_to(tmp_path / "secret.txt")
    enabled = dataclasses.replace(settings, acp_cwd=work, acp_fs=True)

    async def scenario(settings: Settings) -> list[TaskRecord]:
        async with running(settings) as manager:
            return [
                await run_one(manager, "alice", objective)
                for objective in (
                    "read file notes.txt",
                    "read file ../secret.txt",
                    "read file link.txt",
                    "write file out.txt",
                    "write file ../out.txt",
                )
            ]

    inside, parent, link, wrote, escaped = asyncio.run(scenario(enabled))
    assert inside.result == "notes.txt says: hello from the notes"
    for refused in (parent, link, escaped):
        assert refused.result is not None and refused.result.startswith("Refused:"), refused
        assert "top secret" not in refused.result
    assert wrote.result == "Wrote out.txt."
    assert (work / "out.txt").read_text() == "written by the agent\n"
    assert not (tmp_path / "out.txt").exists()

    # Not enabled: the agent was not offered fs, and asking anyway is refused.
    disabled = dataclasses.replace(settings, acp_cwd=work)
    (off, *_) = asyncio.run(scenario(disabled))
    assert off.result is not None and off.result.startswith("Refused:")
    assert "hello from the notes" not in off.result


# ---------------------------------------------------------------- by voice


def ask(ws: Any, text: str) -> list[dict[str, Any]]:
    ws.send_text(json.dumps({"type": "text", "text": text}))
    return receive_until(ws, "finish")


def said(turn: list[dict[str, Any]]) -> str:
    """The model's words of a turn (not a task's inline part)."""
    return "".join(
        m["delta"] for m in turn if m["type"] == "text-delta" and not m["id"].startswith("inline_")
    )


def next_turn_saying(ws: Any, words: str) -> list[dict[str, Any]]:
    """The server's next turn whose words contain ``words`` (cards between)."""
    for _ in range(10):
        turn = receive_until(ws, "finish")
        if words in said(turn):
            return turn
    raise AssertionError(f"no turn saying {words!r}")


def tool_output(turn: list[dict[str, Any]], name: str) -> tuple[dict[str, Any], Any]:
    call = next(m for m in turn if m["type"] == "tool-input-available")
    assert call["toolName"] == name, call
    output = next(m for m in turn if m["type"] == "tool-output-available")
    return call["input"], output["output"]


class Socket:
    """A real client socket (websockets) with the TestClient calls the
    helpers use; every message it read is kept in ``seen``."""

    def __init__(self, url: str) -> None:
        self.ws = connect(url, max_size=None)
        self.seen: list[dict[str, Any]] = []

    def send_text(self, text: str) -> None:
        self.ws.send(text)

    def receive_json(self) -> Any:
        while True:
            frame = self.ws.recv(timeout=60)
            if isinstance(frame, str):  # binary frames: audio
                self.seen.append(json.loads(frame))
                return self.seen[-1]

    def cards(self, task_id: str) -> list[dict[str, Any]]:
        return [m["data"] for m in self.seen if m["type"] == "data-task" and m["id"] == task_id]


def test_by_voice_an_answer_and_a_permission_allowed_always(settings: Settings) -> None:
    """The whole path on a live /ws conversation (real uvicorn, a real
    socket), driven by the offline model's cues: a task handed to the agent,
    its answer told; a permission question on the card and told, "yes,
    always" typed, the agent's allow_always chosen."""
    with serve_ws(settings) as url:
        ws = Socket(url)
        session = start(ws, userKey="k" * 24, turnDetection="manual", timeZone="Europe/Paris")
        assert "respond_agent_permission" in [t["name"] for t in session["data"]["tools"]]

        # The envelope carries the conversation's last turns and the time zone.
        ask(ws, "hello there")
        _, shown = tool_output(ask(ws, "start a task to show context"), "start_task")
        told_context = said(next_turn_saying(ws, f"task {shown['taskId']} completed"))
        assert (
            "Context: - user: hello there | - assistant: You said: hello there "
            "| - user: start a task to show context." in told_context
        )
        assert "Preferences: time zone Europe/Paris." in told_context

        _, started = tool_output(ask(ws, "start a task to tidy the notes"), "start_task")
        told_answer = next_turn_saying(ws, f"Your background task {started['taskId']} completed")
        assert "Done: tidy the notes." in said(told_answer)
        # The inline part: a text part of that answer, marked as Markdown, last.
        part = f"inline_{started['taskId']}"
        inline = [m for m in told_answer if m.get("id") == part]
        assert inline == [
            {
                "type": "text-start",
                "id": part,
                "providerMetadata": {
                    "audiocore": {"format": "markdown", "taskId": started["taskId"]}
                },
            },
            {
                "type": "text-delta",
                "id": part,
                "delta": "**tidy the notes**: see [the notes](https://example.com/notes).",
            },
            {"type": "text-end", "id": part},
        ]
        assert told_answer.index(inline[-1]) == len(told_answer) - 2  # then "finish"
        assert "**" not in said(told_answer)  # shown, not said
        cards = ws.cards(started["taskId"])
        assert [c["status"] for c in cards][0] == "processing"
        assert "delegated" in [c["stage"] for c in cards]

        _, refused = tool_output(ask(ws, "yes, always"), "respond_agent_permission")
        assert refused == {"error": "no permission request is waiting for an answer"}

        _, asked = tool_output(ask(ws, "start a task to ask permission"), "start_task")
        question = next_turn_saying(ws, "asks permission to run the tests")
        assert asked["taskId"] in said(question)
        shown_permissions = [c["permission"] for c in ws.cards(asked["taskId"]) if c["permission"]]
        assert shown_permissions and shown_permissions[-1]["title"] == "run the tests"

        args, answered = tool_output(ask(ws, "yes, always"), "respond_agent_permission")
        assert args == {"decision": "always"}
        assert answered["decision"] == "always" and answered["taskId"] == asked["taskId"]
        outcome = next_turn_saying(ws, f"Your background task {asked['taskId']} completed")
        assert "Permission: allow_always." in said(outcome)
        last = ws.cards(asked["taskId"])[-1]
        assert last["state"] == "completed" and last["permission"] is None

        # Allowed always, in the owner's one ACP session: not asked again.
        _, again = tool_output(ask(ws, "start a task to ask permission"), "start_task")
        outcome = next_turn_saying(ws, f"Your background task {again['taskId']} completed")
        assert "allowed always earlier in this session" in said(outcome)
        ws.ws.close()


def test_the_adk_backend_has_no_permission_tool(tmp_path: Path) -> None:
    default = Settings(data_dir=tmp_path, model="offline", allowed_hosts=("testserver",))
    with TestClient(create_app(default)) as client, client.websocket_connect("/ws") as ws:
        tools = [t["name"] for t in start(ws, turnDetection="manual")["data"]["tools"]]
        assert "start_task" in tools and "respond_agent_permission" not in tools


def test_by_voice_a_permission_rejected_and_one_left_to_time_out(settings: Settings) -> None:
    quick = dataclasses.replace(settings, acp_permission_timeout_s=3.0)
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        tasks: TaskManager = client.app.state.runtime.tasks  # type: ignore[attr-defined]
        start(ws, userKey="r" * 24, turnDetection="manual")
        _, asked = tool_output(ask(ws, "start a task to ask permission"), "start_task")
        next_turn_saying(ws, "asks permission to run the tests")
        args, answered = tool_output(ask(ws, "no"), "respond_agent_permission")
        assert args == {"decision": "reject"} and answered["decision"] == "reject"
        outcome = next_turn_saying(ws, f"Your background task {asked['taskId']} completed")
        assert "Permission: reject_once." in said(outcome)
        assert tasks.permissions.pending("key:" + "r" * 24) == []

    with TestClient(create_app(quick)) as client, client.websocket_connect("/ws") as ws:
        start(ws, userKey="t" * 24, turnDetection="manual")
        _, asked = tool_output(ask(ws, "start a task to ask permission"), "start_task")
        # Nobody answers (the question told or not yet): rejected when its
        # time is up, and the outcome told.
        outcome = next_turn_saying(ws, f"Your background task {asked['taskId']} completed")
        assert "Permission: reject_once." in said(outcome)


def test_a_permission_is_answered_only_after_the_user_was_asked(settings: Settings) -> None:
    """The model calling the tool on its own (no user words after the
    question) is refused, and so is another owner; a question is told by
    one connection at a time, and again when its telling was cut short."""
    with TestClient(create_app(settings)) as client:
        tasks: TaskManager = client.app.state.runtime.tasks  # type: ignore[attr-defined]
        portal = client.portal
        assert portal is not None
        record = portal.call(tasks.submit, "key:" + "o" * 24, "ask permission")
        portal.call(until, tasks, "key:" + "o" * 24, lambda r: r[record.id].permission)
        (request,) = tasks.permissions.pending("key:" + "o" * 24)
        assert not request.told
        # Not told yet: nothing to answer, whatever the user said.
        refusal = tasks.permissions.respond("key:" + "o" * 24, "always", lambda _: True)
        assert refusal == {"error": "no permission request is waiting for an answer"}
        # Told by a connection (as the delivery does), then cut short: told
        # again later, and meanwhile it may be answered (it was asked).
        assert tasks.permissions.next_untold("key:" + "o" * 24) is request
        assert tasks.permissions.next_untold("key:" + "o" * 24) is None  # not twice
        tasks.permissions.retell(request)
        assert tasks.permissions.next_untold("key:" + "o" * 24) is request
        unheard = tasks.permissions.respond("key:" + "o" * 24, "always", lambda _: False)
        assert unheard["error"].startswith("the user has not answered this request yet")
        other = tasks.permissions.respond("key:" + "x" * 24, "always", lambda _: True)
        assert other == {"error": "no permission request is waiting for an answer"}
        bad = tasks.permissions.respond("key:" + "o" * 24, "sometimes", lambda _: True)
        assert bad == {"error": "decision: expected 'always' or 'reject', got 'sometimes'"}
        # Cancelling the task answers its request "cancelled".
        cancelled = portal.call(tasks.cancel, "key:" + "o" * 24, record.id)
        assert cancelled is not None and cancelled.state == "cancelled"
        assert cancelled.permission is None
        assert tasks.permissions.pending("key:" + "o" * 24) == []


class Flipper:
    """A thread swapping, as fast as it can, the paths an agent asks for
    between what they are (a file, a directory inside the working directory)
    and symbolic links to the secret and the victim outside it."""

    def __init__(self, work: Path, outside: Path) -> None:
        self.work, self.outside = work, outside
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.flips = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Flipper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(10)

    def _swap_in_link(self, name: str, target: Path) -> None:
        os.symlink(target, self.work / f".{name}.link")
        os.rename(self.work / f".{name}.link", self.work / name)

    def _swap_in_file(self, name: str, text: str) -> None:
        (self.work / f".{name}.file").write_text(text)
        os.rename(self.work / f".{name}.file", self.work / name)

    def _run(self) -> None:
        work = self.work
        try:
            while not self.stop.is_set():
                self._swap_in_link("flip.txt", self.outside / "secret.txt")
                self._swap_in_link("wflip.txt", self.outside / "victim.txt")
                os.rename(work / "d", work / ".d.real")
                self._swap_in_link("d", self.outside)
                self._swap_in_file("flip.txt", "inside\n")
                self._swap_in_file("wflip.txt", "inside\n")
                os.rename(work / "d", work / ".d.link")
                os.rename(work / ".d.real", work / "d")
                os.unlink(work / ".d.link")
                self.flips += 1
        except BaseException as exc:  # the test fails on it, not this thread
            self.errors.append(exc)


def test_files_race_a_swap_for_a_symbolic_link_and_never_leave_the_directory(
    settings: Settings, tmp_path: Path
) -> None:
    """An agent reads and writes, thousands of times through the real ACP
    path, names a thread swaps between a file (or a directory) inside the
    working directory and a symbolic link to a secret (or a directory)
    outside it: no read ever returns the secret, nothing is written outside.
    (A check of the resolved path, then an open by name, lost this race
    about once in ten.)"""
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "d").mkdir(parents=True)
    outside.mkdir()
    (work / "flip.txt").write_text("inside\n")
    (work / "wflip.txt").write_text("inside\n")
    (work / "d" / "f.txt").write_text("inside d\n")
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (outside / "f.txt").write_text("SECRET of the directory\n")
    (outside / "victim.txt").write_text("untouched\n")
    enabled = dataclasses.replace(settings, acp_cwd=work, acp_fs=True, acp_prompt_timeout_s=300)
    rounds = 1000

    async def scenario() -> TaskRecord:
        async with running(enabled) as manager:
            record = await manager.submit("alice", f"race files {rounds}")
            # Thousands of round trips: more than the usual bound on a loaded machine.
            return (await until(manager, "alice", finished(record.id), timeout=180))[record.id]

    with Flipper(work, outside) as flipper:
        done = asyncio.run(scenario())
    assert flipper.errors == [] and flipper.flips > 0
    assert done.state == "completed" and done.result is not None, done
    secrets = int(done.result.split("Race: ", 1)[1].split(" ", 1)[0])
    written_outside = sorted(
        {p.name for p in outside.iterdir()} - {"f.txt", "secret.txt", "victim.txt"}
    )
    escapes = {
        "secrets read": secrets,
        "files written outside": written_outside,
        "victim overwritten": (outside / "victim.txt").read_text() != "untouched\n",
        "secret overwritten": (outside / "secret.txt").read_text() != "TOP SECRET\n",
    }
    assert escapes == {
        "secrets read": 0,
        "files written outside": [],
        "victim overwritten": False,
        "secret overwritten": False,
    }, f"{done.result} {escapes}"
    print(done.result, "with", flipper.flips, "flips")
