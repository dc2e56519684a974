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


# ---------------------------------------------------------------- /api/chat


def sse_chunks(body: str) -> list[dict[str, Any]]:
    assert body.endswith("data: [DONE]\n\n"), body[-200:]
    return [json.loads(e[len("data: ") :]) for e in body.split("\n\n")[:-2]]


def chat_post(client: TestClient, chat_id: str, messages: list[Any], **extra: Any) -> list[Any]:
    body = {"id": chat_id, "messages": messages, "trigger": "submit-message", **extra}
    response = client.post("/api/chat", json=body)
    assert response.status_code == 200, response.text
    return sse_chunks(response.text)


def chat_round(
    client: TestClient, chat_id: str, tool: str, args: dict[str, Any], approval: dict[str, Any]
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Ask, answer as AI SDK's client does (the approval in the resubmitted
    tool part); returns both streams and the resubmitted history."""
    text = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": call_text(tool, args)}]}
    first = chat_post(client, chat_id, [text])
    kinds = [c["type"] for c in first]
    at = kinds.index("tool-input-available")
    assert kinds[at : at + 3] == ["tool-input-available", "tool-approval-request", "finish-step"]
    # A body that asked returned something: ADK lets the model tell it
    # (as adk api_server does), in a step of its own.
    assert kinds[-1] == "finish" and first[-1]["finishReason"] == "tool-calls"
    assert "tool-output-available" not in kinds  # ADK's placeholder response is hidden
    call = next(c for c in first if c["type"] == "tool-input-available")
    request = next(c for c in first if c["type"] == "tool-approval-request")
    assert call["toolName"] == tool and request["toolCallId"] == call["toolCallId"]
    assert tool in request["hint"] or tool == "book_room"
    assert desk.RUNS[tool] == 0
    part = {
        "type": f"tool-{tool}",
        "toolCallId": call["toolCallId"],
        "state": "approval-responded",
        "input": call["input"],
        "approval": {"id": request["approvalId"], **approval},
    }
    assistant = {"id": first[0]["messageId"], "role": "assistant", "parts": [part]}
    history = [text, assistant]
    second = chat_post(client, chat_id, history, messageId=assistant["id"])
    return first, second, {"history": history, "request": request, "call": call}


@pytest.mark.parametrize("case", sorted(CASES))
def test_chat_approved_runs_once_and_the_model_answers(client: TestClient, case: str) -> None:
    tool, args, key = CASES[case]
    _, second, seen = chat_round(client, f"chat-{case}", tool, args, {"approved": True})
    output = next(c for c in second if c["type"] == "tool-output-available")
    assert output["toolCallId"] == seen["call"]["toolCallId"] and key in output["output"]
    answer = "".join(c["delta"] for c in second if c["type"] == "text-delta")
    assert tool in answer and key in answer
    assert second[-1]["finishReason"] == "stop"
    assert desk.RUNS[tool] == 1
    # The same history again (AI SDK resends it): nothing runs twice.
    again = chat_post(client, f"chat-{case}", seen["history"], messageId="x")
    assert not any(c["type"] == "tool-output-available" for c in again)
    assert desk.RUNS[tool] == 1


@pytest.mark.parametrize("case", sorted(CASES))
def test_chat_denied_never_runs(client: TestClient, case: str) -> None:
    tool, args, _ = CASES[case]
    _, second, seen = chat_round(client, f"deny-{case}", tool, args, {"approved": False})
    denied = next(c for c in second if c["type"] == "tool-output-denied")
    assert denied["toolCallId"] == seen["call"]["toolCallId"]
    assert not any(c["type"] == "tool-output-available" for c in second)
    assert desk.RUNS[tool] == 0


def test_chat_approved_with_a_payload_reaches_the_tool(client: TestClient) -> None:
    first, second, seen = chat_round(
        client,
        "chat-payload",
        "book_room",
        {"room": "Red"},
        {"approved": True, "payload": {"nights": 4}},
    )
    assert seen["request"]["hint"] == "Book Red? Say how many nights."
    assert seen["request"]["payload"] == {"nights": 1}
    output = next(c for c in second if c["type"] == "tool-output-available")
    assert output["output"] == {"booked": "Red", "nights": 4}
    assert desk.PAYLOADS == [{"nights": 4}]
