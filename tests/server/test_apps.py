"""The user's agents behind every surface (audiocore_server/agent/apps.py):
loaded as ADK loads them, selected by name on /ws, /live, /run_live, the
session REST and the HTTP chat, refused by name when unknown, and refused
at start when broken. The agents are tests/server/agent_apps' (not the
demo's), served by real uvicorn on the offline model."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets
from google.adk.agents import Agent
from google.adk.models.google_llm import Gemini

from audiocore_server import Settings, create_app
from audiocore_server.agent.apps import AppLoadError
from audiocore_server.models.gemini import LiveGemini
from audiocore_server.offline.model import OfflineLiveModel
from audiocore_server.runtime import Runtime
from tests.server.server_helpers import REPO, Collector, uvicorn_thread

AGENTS = Path(__file__).resolve().parent / "agent_apps"
SEED_VERSION = {"version": "1.0", "timestamp": 1764547200000}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("apps"), agents_dir=AGENTS, model="offline"
    )
    with uvicorn_thread(create_app(settings), log_level="warning") as (host, port):
        yield f"http://{host}:{port}"


@pytest.fixture(scope="module")
def one_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("one"),
        agent="tests.server.agent_apps.helpdesk_app.agent:root_agent",
        model="offline",
    )
    with uvicorn_thread(create_app(settings), log_level="warning") as (host, port):
        yield f"http://{host}:{port}"


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def post(url: str, body: object) -> tuple[int, str]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def opened(base: str, path: str, **start: object) -> tuple[Collector, dict[str, Any]]:
    ws = await websockets.connect(base.replace("http://", "ws://") + path, max_size=None)
    await ws.send(json.dumps({"type": "start", **start}))
    collector = Collector(ws)
    return collector, await collector.wait_for("data-session")


async def refused(base: str, path: str, **start: object) -> tuple[list[dict[str, Any]], int]:
    """The messages a socket got before the server closed it, and the code."""
    async with websockets.connect(base.replace("http://", "ws://") + path) as ws:
        await ws.send(json.dumps({"type": "start", **start}))
        got = []
        with contextlib.suppress(websockets.ConnectionClosed):
            async for frame in ws:
                got.append(json.loads(frame))
        assert ws.close_code is not None
        return got, ws.close_code


def test_list_apps_names_every_app_of_the_folder(base: str) -> None:
    assert get(f"{base}/list-apps") == (200, ["helpdesk_app", "travel_app"])
    status, detailed = get(f"{base}/list-apps?detailed=true")
    assert status == 200
    assert [(a["name"], a["rootAgentName"], a["description"]) for a in detailed["apps"]] == [
        ("helpdesk_app", "helpdesk", "A help desk for orders."),
        ("travel_app", "travel_agent", "Books travel."),
    ]


def test_ws_talks_to_the_app_its_start_names(base: str) -> None:
    async def run() -> None:
        col, session = await opened(base, "/ws", app="helpdesk_app")
        # The app's own tools that the server completes (a browser tool),
        # beside those ADK runs.
        tools = {t["name"]: t for t in session["data"]["tools"]}
        assert tools["show_order_page"]["runsIn"] == "browser"
        assert "lookup_order" in tools and "start_task" not in tools  # not the demo's
        await col.ws.send(json.dumps({"type": "text", "text": "hello desk"}))
        await col.wait_for("finish")
        text = "".join(m["delta"] for _, m in col.messages if m["type"] == "text-delta")
        assert "hello desk" in text
        await col.ws.close()

    asyncio.run(run())


def test_live_talks_to_the_app_its_start_names(base: str) -> None:
    """The seed dialect: a ``start`` naming the app, then the seed's chat."""

    async def run() -> list[dict[str, Any]]:
        async with websockets.connect(base.replace("http://", "ws://") + "/live") as ws:
            await ws.send(json.dumps({"type": "start", "app": "travel_app"}))
            message = {"parts": [{"type": "text", "text": "hi seed"}], "id": "u1", "role": "user"}
            await ws.send(
                json.dumps(
                    {"type": "message", "id": "chat-1", "messages": [message], **SEED_VERSION}
                )
            )
            got = []
            async with asyncio.timeout(30):
                async for frame in ws:
                    body = str(frame).removeprefix("data: ").strip()
                    if body == "[DONE]":
                        return got
                    got.append(json.loads(body))
        raise AssertionError("no end of stream")

    chunks = asyncio.run(run())
    assert "hi seed" in "".join(c.get("delta", "") for c in chunks)


@pytest.mark.parametrize("path", ["/ws", "/live"])
@pytest.mark.parametrize("app", [None, "no_such_app"])
def test_an_unknown_or_missing_app_is_refused_by_name(
    base: str, path: str, app: str | None
) -> None:
    start = {} if app is None else {"app": app}
    got, code = asyncio.run(refused(base, path, **start))
    assert code == 1008
    errors = [m["errorText"] for m in got if m["type"] == "error"]
    assert len(errors) == 1
    assert "App not found" in errors[0]
    assert "helpdesk_app" in errors[0] and "travel_app" in errors[0]


@pytest.mark.parametrize("bad", [7, "", "1abc", "a/b", "x" * 200, ["helpdesk_app"]])
def test_a_malformed_app_field_is_an_input_error(one_app: str, bad: object) -> None:
    async def run() -> None:
        ws = await websockets.connect(one_app.replace("http://", "ws://") + "/ws")
        await ws.send(json.dumps({"type": "start", "app": bad}))
        async with asyncio.timeout(30):  # the bad start is reported as it is handled
            while (message := json.loads(await ws.recv()))["type"] != "error":
                pass
        assert message["errorText"].startswith("app: "), message
        await ws.close()

    asyncio.run(run())


def test_sessions_belong_to_their_app_on_the_rest(base: str) -> None:
    status, created = (lambda r: (r[0], json.loads(r[1])))(
        post(f"{base}/apps/travel_app/users/u1/sessions", {})
    )
    assert status == 200 and created["appName"] == "travel_app"
    assert [s["id"] for s in get(f"{base}/apps/travel_app/users/u1/sessions")[1]] == [created["id"]]
    assert get(f"{base}/apps/helpdesk_app/users/u1/sessions") == (200, [])
    status, body = get(f"{base}/apps/nope/users/u1/sessions")
    assert status == 404
    assert "App not found: 'nope'" in body["detail"] and "travel_app" in body["detail"]


def test_run_live_selects_the_app_named_in_its_query(base: str) -> None:
    status, body = post(f"{base}/apps/travel_app/users/u2/sessions", {})
    session_id = json.loads(body)["id"]
    ws_base = base.replace("http://", "ws://")

    async def run() -> None:
        url = f"{ws_base}/run_live?app_name=travel_app&user_id=u2&session_id={session_id}"
        async with websockets.connect(url) as ws:
            await ws.send(
                json.dumps({"content": {"role": "user", "parts": [{"text": "to Lisbon"}]}})
            )
            async with asyncio.timeout(30):
                while True:
                    event = json.loads(await ws.recv())
                    if event.get("turnComplete"):
                        break
            assert event["author"] == "travel_agent"
        # The same session id under another app is not there.
        wrong = f"{ws_base}/run_live?app_name=helpdesk_app&user_id=u2&session_id={session_id}"
        async with websockets.connect(wrong) as ws:
            with contextlib.suppress(websockets.ConnectionClosed):
                await ws.recv()
            assert (ws.close_code, ws.close_reason) == (1002, "Session not found")
        unknown = f"{ws_base}/run_live?app_name=nope&user_id=u2&session_id={session_id}"
        async with websockets.connect(unknown) as ws:
            with contextlib.suppress(websockets.ConnectionClosed):
                await ws.recv()
            assert (ws.close_code, ws.close_reason) == (1008, "App not found")

    asyncio.run(run())


def test_the_http_chat_runs_the_app_its_body_names(base: str) -> None:
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi travel"}]}
    status, body = post(
        f"{base}/api/chat", {"id": "chat-travel-1", "messages": [message], "app": "travel_app"}
    )
    assert status == 200 and "hi travel" in body, body
    status, sessions = get(f"{base}/apps/travel_app/users/u1/sessions")
    assert status == 200
    status, body = post(f"{base}/api/chat", {"id": "chat-x", "messages": [message]})
    assert status == 404 and "helpdesk_app" in body and "travel_app" in body
    status, body = post(f"{base}/api/chat", {"id": "chat-y", "messages": [message], "app": "nope"})
    assert status == 404 and "App not found: 'nope'" in body
    status, body = post(f"{base}/api/chat", {"id": "chat-z", "messages": [message], "app": 3})
    assert status == 400 and body.startswith("app: ")


def test_one_agent_by_reference_is_the_default_app(one_app: str) -> None:
    assert get(f"{one_app}/list-apps") == (200, ["helpdesk"])

    async def run() -> None:
        col, session = await opened(one_app, "/ws")  # no app named: the only one
        assert "show_order_page" in {t["name"] for t in session["data"]["tools"]}
        await col.ws.close()

    asyncio.run(run())


# ---------------------------------------------------------------- models


def test_the_live_model_runs_every_agent_and_the_chat_runs_their_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    runtime = Runtime(Settings(data_dir=tmp_path, agents_dir=AGENTS))
    desk = runtime.agents.select("helpdesk_app")
    live_stock = desk.agent.sub_agents[0]
    assert isinstance(desk.agent.model, LiveGemini) and isinstance(live_stock.model, LiveGemini)
    chat_stock = desk.chat_agent.sub_agents[0]
    assert type(desk.chat_agent.model) is Gemini and type(chat_stock.model) is Gemini
    assert desk.chat_agent.model.model == "gemini-2.5-flash"
    # The user's objects are not changed.
    from tests.server.agent_apps.helpdesk_app.agent import root_agent

    assert (
        root_agent.model == "gemini-2.5-flash"
        and root_agent.sub_agents[0].parent_agent is root_agent
    )

    overridden = Runtime(Settings(data_dir=tmp_path, agents_dir=AGENTS, chat_model="gemini-x"))
    assert overridden.agents.select("travel_app").chat_agent.model.model == "gemini-x"


def test_an_agent_with_a_model_instance_runs_with_it(tmp_path: Path) -> None:
    own = OfflineLiveModel()
    module = tmp_path / "own_model_agent_mod.py"
    module.write_text("")
    agent = Agent(name="own", model=own, instruction="x")
    sys.modules["own_model_agent_mod"] = type(sys)("own_model_agent_mod")
    sys.modules["own_model_agent_mod"].root_agent = agent  # type: ignore[attr-defined]
    try:
        runtime = Runtime(Settings(data_dir=tmp_path, agent="own_model_agent_mod:root_agent"))
        app = runtime.agents.select(None)
        assert app.agent.model is own and app.chat_agent.model is own
    finally:
        del sys.modules["own_model_agent_mod"]


# ---------------------------------------------------------------- broken folders


def _app_folder(root: Path, name: str, agent_py: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("from . import agent\n")
    (folder / "agent.py").write_text(textwrap.dedent(agent_py))
    return folder


GOOD = """\
from google.adk.agents import Agent
root_agent = Agent(name="fine", model="gemini-2.5-flash")
"""


@pytest.mark.parametrize(
    ("agent_py", "expected"),
    [
        ("x = (\n", "agent.py:1: SyntaxError"),
        (
            "import os\nraise RuntimeError('boom at load')\n",
            "agent.py:2: RuntimeError: boom at load",
        ),
        ("import no_such_module_for_apps\n", "agent.py:1: ModuleNotFoundError"),
        ("x = 1\n", "No root_agent found"),
        ("root_agent = 42\n", "not a BaseAgent"),
    ],
    ids=["syntax", "raises", "import", "no-root-agent", "not-an-agent"],
)
def test_a_broken_agents_folder_stops_the_start_naming_file_and_line(
    tmp_path: Path, agent_py: str, expected: str
) -> None:
    name = f"broken_{abs(hash((agent_py, str(tmp_path)))) % 10**8}"
    folder = _app_folder(tmp_path / "agents", name, agent_py)
    with pytest.raises(AppLoadError) as caught:
        create_app(Settings(data_dir=tmp_path, agents_dir=folder.parent))
    message = str(caught.value)
    assert expected in message, message
    assert name in message


def test_the_command_line_refuses_a_broken_folder_in_one_line(tmp_path: Path) -> None:
    name = f"cli_broken_{os.getpid()}"
    folder = _app_folder(tmp_path / "agents", name, "a = 1\nb = undefined_name\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "server",
            "--data-dir",
            str(tmp_path),
            "--agents-dir",
            str(folder.parent),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AUDIOCORE_MODEL": "offline"},
    )
    assert done.returncode == 2
    assert f"{folder / 'agent.py'}:2: NameError" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_two_apps_of_one_name_and_bad_references_are_refused(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    name = f"twin_{os.getpid()}"
    _app_folder(agents, name, GOOD)
    module = f"{name}_ref"
    (tmp_path / f"{module}.py").write_text(
        "from google.adk.apps.app import App\n"
        "from google.adk.agents import Agent\n"
        f"app = App(name={name!r}, root_agent=Agent(name='other', model='m'))\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(AppLoadError, match=f"two apps are named '{name}'"):
            create_app(Settings(data_dir=tmp_path, agents_dir=agents, agent=f"{module}:app"))
        for reference, expected in [
            ("no_colon", "expected module:attribute"),
            (f"{module}:missing", "AttributeError"),
            ("json:dumps", "expected an ADK agent or App, got function"),
        ]:
            with pytest.raises(AppLoadError, match=expected):
                create_app(Settings(data_dir=tmp_path, agent=reference))
    finally:
        sys.path.remove(str(tmp_path))
    # An agent's own folder is one app, as `adk web` reads it.
    alone = create_app(Settings(data_dir=tmp_path, agents_dir=agents / name))
    assert alone.state.runtime.agents.names == [name]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(AppLoadError, match="holds no agent"):
        create_app(Settings(data_dir=tmp_path, agents_dir=empty))


def test_approval_names_must_name_a_tool_of_some_app(tmp_path: Path) -> None:
    with pytest.raises(AppLoadError, match="no tool named 'process_payment'"):
        create_app(
            Settings(
                data_dir=tmp_path, agents_dir=AGENTS, tools_requiring_approval=("process_payment",)
            )
        )
    app = create_app(
        Settings(data_dir=tmp_path, agents_dir=AGENTS, tools_requiring_approval=("lookup_order",))
    )
    desk = app.state.runtime.agents.select("helpdesk_app")
    assert desk.tools["lookup_order"].approval
