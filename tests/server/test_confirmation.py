"""ADK's confirmation is our approval (issue #36 item 4), on every surface.

The agent is ``confirm_agents/desk`` (real ADK tools: ``require_confirmation``
a bool and a callable, ``request_confirmation`` with a payload, a plain
``FunctionTool`` named in ``tools_requiring_approval``), run by the real
server with the offline model, which calls a tool on ``call NAME {json}``.
Each case counts the tool's effect: once after an approval, never after a
denial; and the model's answer names the tool's response.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confirm_agents.desk import agent as desk
from server_helpers import receive_until, start
from starlette.testclient import TestClient

from audiocore_server import Settings, create_app

APP = "desk"

# (tool, args, expected response key): one case per way of asking.
CASES = {
    "require_bool": ("delete_file", {"path": "notes.txt"}, "deleted"),
    "require_callable": ("transfer", {"amount": 500}, "transferred"),
    "request_in_body": ("book_room", {"room": "Blue"}, "booked"),
    "named_by_deployment": ("ring_bell", {"times": 2}, "rang"),
}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        model="offline",
        hello_timeout_s=0.5,
        allowed_hosts=("testserver",),
        agent="confirm_agents.desk.agent:root_agent",
        tools_requiring_approval=("ring_bell",),
    )


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    desk.RUNS.clear()
    desk.PAYLOADS.clear()
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def call_text(tool: str, args: dict[str, Any]) -> str:
    return f"call {tool} {json.dumps(args)}"


# ---------------------------------------------------------------- /ws


def ws_ask(ws: Any, tool: str, args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The call and its approval request, up to the end of the step."""
    ws.send_text(json.dumps({"type": "text", "text": call_text(tool, args)}))
    asked = receive_until(ws, "tool-approval-request")
    asked += receive_until(ws, "finish-step")
    call = next(m for m in asked if m["type"] == "tool-input-available")
    request = next(m for m in asked if m["type"] == "tool-approval-request")
    assert call["toolName"] == tool and call["input"] == args
    assert request["toolCallId"] == call["toolCallId"]
    return call, request


@pytest.mark.parametrize("case", sorted(CASES))
def test_ws_approved_runs_once_and_the_model_answers(client: TestClient, case: str) -> None:
    tool, args, key = CASES[case]
    with client.websocket_connect("/ws") as ws:
        start(ws)
        call, request = ws_ask(ws, tool, args)
        assert desk.RUNS[tool] == 0  # nothing before the approval
        if tool == "book_room":
            assert request["hint"] == "Book Blue? Say how many nights."
            assert request["payload"] == {"nights": 1}
        else:
            assert "hint" in request and tool in request["hint"]
        ws.send_text(
            json.dumps(
                {"type": "tool_approval", "approvalId": request["approvalId"], "approved": True}
            )
        )
        rest = receive_until(ws, "finish")
    output = next(m for m in rest if m["type"] == "tool-output-available")
    assert output["toolCallId"] == call["toolCallId"] and key in output["output"]
    answer = "".join(m["delta"] for m in rest if m["type"] == "text-delta")
    assert tool in answer and key in answer  # the model got the function response
    assert desk.RUNS[tool] == 1
    if tool == "book_room":
        assert desk.PAYLOADS == [{"nights": 1}]  # none sent: the one offered


@pytest.mark.parametrize("case", sorted(CASES))
def test_ws_denied_never_runs(client: TestClient, case: str) -> None:
    tool, args, _ = CASES[case]
    with client.websocket_connect("/ws") as ws:
        start(ws)
        call, request = ws_ask(ws, tool, args)
        ws.send_text(
            json.dumps(
                {"type": "tool_approval", "approvalId": request["approvalId"], "approved": False}
            )
        )
        rest = receive_until(ws, "finish")
        # A second answer finds nothing pending.
        ws.send_text(
            json.dumps(
                {"type": "tool_approval", "approvalId": request["approvalId"], "approved": True}
            )
        )
        error = receive_until(ws, "error")[-1]
    assert "no pending approval" in error["errorText"]
    assert any(m["type"] == "tool-output-denied" for m in rest)
    answer = "".join(m["delta"] for m in rest if m["type"] == "text-delta")
    assert "denied" in answer
    assert desk.RUNS[tool] == 0


def test_ws_approved_with_a_payload_reaches_the_tool(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        _, request = ws_ask(ws, "book_room", {"room": "Green"})
        ws.send_text(
            json.dumps(
                {
                    "type": "tool_approval",
                    "approvalId": request["approvalId"],
                    "approved": True,
                    "payload": {"nights": 3},
                }
            )
        )
        rest = receive_until(ws, "finish")
    output = next(m for m in rest if m["type"] == "tool-output-available")
    assert output["output"] == {"booked": "Green", "nights": 3}
    assert desk.PAYLOADS == [{"nights": 3}] and desk.RUNS["book_room"] == 1


def test_ws_callable_that_says_no_runs_at_once(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(json.dumps({"type": "text", "text": call_text("transfer", {"amount": 5})}))
        turn = receive_until(ws, "finish")
    assert not any(m["type"] == "tool-approval-request" for m in turn)
    output = next(m for m in turn if m["type"] == "tool-output-available")
    assert output["output"] == {"transferred": 5}
    assert desk.RUNS["transfer"] == 1
