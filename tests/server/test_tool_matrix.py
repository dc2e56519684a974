"""Each kind of a user's tool, on each live model and each live surface.

The agent is examples/support_desk, served from its folder as a user serves
theirs (``agents_dir``): a plain function, ADK's own confirmation
(``FunctionTool(require_confirmation=True)`` and ``request_confirmation``
with a payload) and an MCP toolset (its stdio server, ``faq_server.py``,
launched by ADK's ``McpToolset``). On ``/ws`` it runs on every model the
provider contract knows (the offline model, the local Gemini Live and
OpenAI Realtime endpoints); on ``/live`` and ``/run_live`` on the offline
model. The model is driven by typed ``call <tool> <JSON>`` lines, which the
local endpoints mimic; on an endpoint the tool's response must reach the
model on its wire (``tool_answered``).

The helpdesk agent's other kinds (``LongRunningFunctionTool``,
``AgentTool``, sub-agent transfer, browser tools, callbacks and plugins) are
in test_user_tools.py; confirmation on every surface in test_confirmation.py.
"""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import websockets
from live_helpers import errors, say
from provider_helpers import PROVIDERS, running
from server_helpers import Collector, serve_ws
from test_examples import faq_servers

from audiocore_server import Settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
APP = "support_desk"

# kind -> (the typed line, the tool, what its output must hold, its approval's payload)
KINDS: dict[str, tuple[str, str, dict[str, Any] | str, Any]] = {
    "function": (
        'call lookup_order {"order_id": "A-1001"}',
        "lookup_order",
        {"order_id": "A-1001", "status": "shipped", "items": ["headphones"], "total_eur": 89.0},
        None,
    ),
    "mcp": ('call faq {"topic": "returns"}', "faq", "within 30 days of delivery", None),
    "require_confirmation": (
        'call issue_refund {"order_id": "A-1001", "amount_eur": 10, "reason": "late"}',
        "issue_refund",
        {"refunded_eur": 10, "order_id": "A-1001", "reason": "late"},
        None,
    ),
    "request_confirmation": (
        'call schedule_callback {"phone": "+331234", "when": "today"}',
        "schedule_callback",
        {"status": "scheduled", "phone": "+331234", "when": "today"},
        {"phone": "+331234", "when": "today"},  # the payload it offered, sent back
    ),
}


def fresh_examples() -> None:
    """Forget the examples' modules, so that the server's loader imports
    them anew: another test (test_examples.py) may have put its own load in
    sys.modules, its agents moved to the offline model and its MCP toolset
    closed."""
    for name in [m for m in sys.modules if m.split(".")[0] in ("support_desk", "travel_team")]:
        del sys.modules[name]


def check_output(kind: str, output: Any) -> None:
    expected = KINDS[kind][2]
    if isinstance(expected, str):
        # An MCP tool's result: its content blocks, the server's text in them.
        assert expected in json.dumps(output), output
    else:
        assert output == expected


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_tool_kind_on_each_model_over_ws(
    kind: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line, tool, _, payload = KINDS[kind]
    with running(name, tmp_path, monkeypatch) as provider:
        settings = provider.settings(tmp_path / "data", agents_dir=EXAMPLES)
        fresh_examples()

        async def scenario(url: str) -> Collector:
            ws, col = await provider.open_session(url, app=APP)
            await say(ws, line)
            if "confirmation" in kind:
                request = await col.wait_for("tool-approval-request")
                answer = {"type": "tool_approval", "approvalId": request["approvalId"]}
                answer |= {"approved": True} | ({"payload": payload} if payload else {})
                await ws.send(json.dumps(answer))
            await col.wait_for("tool-output-available")
            await provider.tool_answered()
            await col.wait_for("finish", count=provider.finishes_per_tool_call)
            await col.close()
            return col

        with serve_ws(settings) as url:
            col = asyncio.run(scenario(url))
    calls = [m for _, m in col.messages if m["type"] == "tool-input-available"]
    outputs = [m for _, m in col.messages if m["type"] == "tool-output-available"]
    assert [c["toolName"] for c in calls] == [tool]
    assert [o["toolCallId"] for o in outputs] == [calls[0]["toolCallId"]]  # run once
    check_output(kind, outputs[0]["output"])
    said = "".join(m["delta"] for _, m in col.messages if m["type"] == "text-delta")
    assert f"{tool} returned" in said, said  # the model got the response
    assert not errors(col)
    assert faq_servers() == []  # the MCP server ended with the server


@pytest.fixture(scope="module")
def offline_desk(tmp_path_factory: pytest.TempPathFactory) -> Any:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("desk"), agents_dir=EXAMPLES, model="offline"
    )
    fresh_examples()
    with serve_ws(settings) as url:
        yield url.removesuffix("/ws")


async def seed_turn(base: str, text: str) -> list[dict[str, Any]]:
    """One typed turn on /live, read as the seed's client reads it."""
    async with websockets.connect(f"{base}/live") as ws:
        message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}
        await ws.send(json.dumps({"type": "start", "app": APP}))  # two apps: name one
        frame = {"type": "message", "id": "c", "messages": [message], "version": "1.0"}
        await ws.send(json.dumps({**frame, "timestamp": 1}))
        got = []
        async with asyncio.timeout(30):
            async for raw in ws:
                body = str(raw).removeprefix("data: ").strip()
                if body == "[DONE]":
                    return got
                got.append(json.loads(body))
    raise AssertionError("no end of stream")


async def adk_turn(base: str, text: str) -> list[dict[str, Any]]:
    """One typed turn on /run_live, up to the tool's function response."""
    http = base.replace("ws://", "http://")
    request = urllib.request.Request(
        f"{http}/apps/{APP}/users/u9/sessions", b"{}", {"Content-Type": "application/json"}
    )
    session_id = json.loads(urllib.request.urlopen(request, timeout=30).read())["id"]
    url = f"{base}/run_live?app_name={APP}&user_id=u9&session_id={session_id}"
    events = []
    async with websockets.connect(url) as ws:
        await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": text}]}}))
        async with asyncio.timeout(30):
            while not any("functionResponse" in p for p in parts_of(events)):
                events.append(json.loads(await ws.recv()))
        await ws.send(json.dumps({"close": True}))
    return events


def parts_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for e in events for p in (e.get("content") or {}).get("parts") or []]


@pytest.mark.parametrize("kind", ["function", "mcp"])
def test_the_users_tools_on_live_and_run_live(offline_desk: str, kind: str) -> None:
    line, tool, _, _ = KINDS[kind]
    chunks = asyncio.run(seed_turn(offline_desk, line))
    (output,) = [c for c in chunks if c["type"] == "tool-output-available"]
    check_output(kind, output["output"])
    assert chunks[-1]["type"] == "finish"

    events = asyncio.run(adk_turn(offline_desk, line))
    (response,) = [p["functionResponse"] for p in parts_of(events) if "functionResponse" in p]
    assert response["name"] == tool
    check_output(kind, response["response"])
