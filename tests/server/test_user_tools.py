"""A user's tools in voice, as in ADK's ``run_async``: every tool kind of a
user's agent (tests/server/agent_apps/helpdesk_app, not the demo's) called
on the live surfaces — /ws on the offline model and the local Gemini and
OpenAI endpoints, /live and /run_live on the offline model — with the
agent's callbacks, the app's plugins and ``--plugin`` running as ADK runs
them. The model is driven by typed ``call <tool> <JSON>`` lines (the
offline model's, which the local endpoints mimic)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import websockets
from live_helpers import errors, said, say
from provider_helpers import PROVIDERS, running
from server_helpers import Collector, serve_ws, uvicorn_thread

from audiocore_server import Settings, create_app
from tests.server.agent_apps.helpdesk_app import agent as desk
from tests.server.user_agents import ToolCounter

DESK = "tests.server.agent_apps.helpdesk_app.agent:root_agent"


@pytest.fixture(autouse=True)
def fresh_records() -> None:
    desk.CALLS.clear()
    desk.CALLBACKS.clear()
    ToolCounter.seen.clear()


def first(col: Collector, kind: str) -> dict[str, Any]:
    return next(m for _, m in col.messages if m["type"] == kind)


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_users_function_tool_runs_once_with_its_callbacks_and_plugins(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running(name, tmp_path, monkeypatch) as provider:
        settings = provider.settings(
            tmp_path / "data", agent=DESK, plugins=("tests.server.user_agents:ToolCounter",)
        )

        async def scenario(url: str) -> Collector:
            ws, col = await provider.open_session(url)
            await say(ws, 'call lookup_order {"order_id": "A-1001"}')
            await col.wait_for("tool-output-available")
            await provider.tool_answered()
            await col.wait_for("finish", count=provider.finishes_per_tool_call)
            await col.close()
            return col

        with serve_ws(settings) as url:
            col = asyncio.run(scenario(url))
    call, output = first(col, "tool-input-available"), first(col, "tool-output-available")
    assert (call["toolName"], call["input"]) == ("lookup_order", {"order_id": "A-1001"})
    assert output["output"] == {"order_id": "A-1001", "status": "shipped"}
    assert desk.CALLS == [("lookup_order", {"order_id": "A-1001"})]
    # The agent's own callbacks and --plugin, as ADK's run_async runs them.
    assert desk.CALLBACKS == ["before_tool:lookup_order", "after_tool:lookup_order"]
    assert ToolCounter.seen == ["lookup_order"]
    assert not errors(col)


@pytest.fixture(scope="module")
def offline_desk(tmp_path_factory: pytest.TempPathFactory) -> Any:
    settings = Settings(data_dir=tmp_path_factory.mktemp("desk"), agent=DESK, model="offline")
    with uvicorn_thread(create_app(settings), log_level="warning") as (host, port):
        yield f"ws://{host}:{port}"


async def _open(base: str) -> tuple[Any, Collector]:
    ws = await websockets.connect(f"{base}/ws", max_size=None)
    await ws.send(json.dumps({"type": "start"}))
    col = Collector(ws)
    await col.wait_for("data-session")
    return ws, col


async def _turn(ws: Any, col: Collector, text: str, finishes: int) -> None:
    await say(ws, text)
    await col.wait_for("finish", count=finishes)


def test_every_tool_kind_on_ws(offline_desk: str) -> None:
    async def scenario() -> Collector:
        ws, col = await _open(offline_desk)
        # FunctionTool with the tool context: its state write is kept.
        await _turn(ws, col, 'call add_note {"note": "called twice"}', 1)
        # LongRunningFunctionTool: its first answer goes back at once.
        await _turn(ws, col, 'call open_ticket {"subject": "broken"}', 2)
        # AgentTool: the inner agent's own (text) run answers.
        await _turn(ws, col, 'call summarizer {"request": "long story"}', 3)
        # Two calls in one step.
        await _turn(
            ws,
            col,
            'call lookup_order {"order_id": "A-1"}\ncall lookup_order {"order_id": "B-2"}',
            4,
        )
        await col.close()
        return col

    col = asyncio.run(scenario())
    outputs = {
        m["toolCallId"]: m["output"]
        for _, m in col.messages
        if m["type"] == "tool-output-available"
    }
    inputs = [
        (m["toolName"], m["input"]) for _, m in col.messages if m["type"] == "tool-input-available"
    ]
    assert inputs == [
        ("add_note", {"note": "called twice"}),
        ("open_ticket", {"subject": "broken"}),
        ("summarizer", {"request": "long story"}),
        ("lookup_order", {"order_id": "A-1"}),
        ("lookup_order", {"order_id": "B-2"}),
    ]
    assert desk.CALLS == [
        ("add_note", {"note": "called twice"}),
        ("open_ticket", {"subject": "broken"}),
        ("lookup_order", {"order_id": "A-1"}),
        ("lookup_order", {"order_id": "B-2"}),
    ]
    assert {"notes": 1} in outputs.values()
    assert {"status": "pending", "ticket": "T-1"} in outputs.values()
    summary = next(o for o in outputs.values() if "result" in o or isinstance(o, str))
    assert "long story" in json.dumps(summary)
    assert not errors(col)


def test_transfer_then_the_sub_agents_tool(offline_desk: str) -> None:
    async def scenario() -> Collector:
        ws, col = await _open(offline_desk)
        await say(ws, "transfer stock_agent")
        await col.wait_for("tool-output-available")
        # At once: what the user says while ADK swaps the agents reaches
        # the new one (request_queue.hold_for_transfer).
        await _turn(ws, col, 'call check_stock {"item": "kettle"}', 2)
        await col.close()
        return col

    col = asyncio.run(scenario())
    inputs = [
        (m["toolName"], m["input"]) for _, m in col.messages if m["type"] == "tool-input-available"
    ]
    assert inputs == [
        ("transfer_to_agent", {"agent_name": "stock_agent"}),
        ("check_stock", {"item": "kettle"}),
    ]
    assert desk.CALLS == [("check_stock", {"item": "kettle"})]
    assert "check_stock returned" in said(col)


def test_a_browser_tool_of_the_users_agent_runs_in_the_client(offline_desk: str) -> None:
    async def scenario() -> Collector:
        ws, col = await _open(offline_desk)
        await say(ws, 'call show_order_page {"order_id": "A-1001"}')
        call = await col.wait_for("tool-input-available")
        assert call["providerMetadata"] == {"audiocore": {"clientExecutes": True}}
        await ws.send(
            json.dumps(
                {"type": "tool_result", "toolCallId": call["toolCallId"], "output": {"shown": True}}
            )
        )
        await col.wait_for("tool-output-available")
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    assert first(col, "tool-output-available")["output"] == {"shown": True}
    assert said(col) == 'show_order_page returned {"shown": true}.'
    assert desk.CALLS == []  # the body never runs on the server


def test_live_and_run_live_call_the_users_tools(offline_desk: str) -> None:
    base = offline_desk

    async def seed() -> list[dict[str, Any]]:
        async with websockets.connect(f"{base}/live") as ws:
            message = {
                "parts": [{"type": "text", "text": 'call lookup_order {"order_id": "S-1"}'}],
                "id": "u1",
                "role": "user",
            }
            await ws.send(
                json.dumps(
                    {
                        "type": "message",
                        "id": "c",
                        "messages": [message],
                        "version": "1.0",
                        "timestamp": 1,
                    }
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

    chunks = asyncio.run(seed())
    assert any(
        c["type"] == "tool-output-available" and c["output"]["order_id"] == "S-1" for c in chunks
    )

    async def adk() -> list[dict[str, Any]]:
        import urllib.request

        http = base.replace("ws://", "http://")
        request = urllib.request.Request(
            f"{http}/apps/helpdesk/users/u9/sessions", b"{}", {"Content-Type": "application/json"}
        )
        session_id = json.loads(urllib.request.urlopen(request, timeout=30).read())["id"]
        url = f"{base}/run_live?app_name=helpdesk&user_id=u9&session_id={session_id}"
        events = []
        async with websockets.connect(url) as ws:
            text = 'call lookup_order {"order_id": "R-1"}'
            await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": text}]}}))
            async with asyncio.timeout(30):
                while True:
                    event = json.loads(await ws.recv())
                    events.append(event)
                    parts = (event.get("content") or {}).get("parts") or []
                    if any("functionResponse" in p for p in parts):
                        break
        return events

    events = asyncio.run(adk())
    response = next(
        p["functionResponse"]
        for e in events
        for p in (e.get("content") or {}).get("parts") or []
        if "functionResponse" in p
    )
    assert response["name"] == "lookup_order" and response["response"]["order_id"] == "R-1"
    assert desk.CALLS == [
        ("lookup_order", {"order_id": "S-1"}),
        ("lookup_order", {"order_id": "R-1"}),
    ]


def test_the_apps_own_plugin_runs_in_live_mode(tmp_path: Path) -> None:
    from tests.server.agent_apps.travel_app import agent as travel

    travel.SEEN.clear()
    settings = Settings(
        data_dir=tmp_path, agent="tests.server.agent_apps.travel_app.agent:app", model="offline"
    )

    async def scenario(url: str) -> Collector:
        ws, col = await _open(url.removesuffix("/ws"))
        await _turn(ws, col, 'call search_flights {"destination": "Lisbon"}', 1)
        await col.close()
        return col

    with serve_ws(settings) as url:
        col = asyncio.run(scenario(url))
    assert travel.SEEN == ["travel_counter:search_flights"]
    assert first(col, "tool-output-available")["output"]["flights"] == ["XY123"]


def test_a_transfer_hands_what_the_user_sends_to_the_new_agent_in_order() -> None:
    """The queue's side of a transfer: the old reader (ADK's task, cancelled
    a second later) takes only function responses; the new one gets the
    rest, in the order it was sent, nothing dropped or duplicated."""
    from google.adk.agents.live_request_queue import LiveRequest
    from google.genai import types

    from audiocore_server.live.request_queue import BoundedLiveRequestQueue

    def text(value: str) -> LiveRequest:
        return LiveRequest(content=types.Content(role="user", parts=[types.Part(text=value)]))

    answer = LiveRequest(
        content=types.Content(
            role="user",
            parts=[types.Part(function_response=types.FunctionResponse(name="t", response={}))],
        )
    )

    async def scenario() -> tuple[list[LiveRequest], list[LiveRequest]]:
        queue = BoundedLiveRequestQueue(10)
        old_got: list[LiveRequest] = []

        async def old_reader() -> None:
            while True:
                old_got.append(await queue.get())

        old = asyncio.create_task(old_reader())
        queue.offer_content(text("before"))
        while not old_got:
            await asyncio.sleep(0)
        queue.hold_for_transfer()  # the old reader is waiting in get()
        queue.offer_content(text("one"))
        queue.send(answer)
        queue.offer_realtime(types.Blob(mime_type="audio/pcm;rate=16000", data=b"\0\0"))
        queue.offer_content(text("two"))
        while len(old_got) < 2:
            await asyncio.sleep(0)
        old.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await old
        queue.offer_content(text("three"))
        new_got = [await queue.get() for _ in range(4)]
        assert queue.pending == 0 and queue.has_room()
        return old_got, new_got

    old_got, new_got = asyncio.run(scenario())
    assert [r.content.parts[0].text if r.content else None for r in old_got] == ["before", None]
    assert old_got[1] is answer
    assert [
        r.content.parts[0].text if r.content else ("audio" if r.blob else None) for r in new_got
    ] == ["one", "audio", "two", "three"]
