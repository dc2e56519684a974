"""ADK's confirmation is our approval (issue #36 item 4), on every surface.

The agent is ``confirm_agents/desk`` (real ADK tools: ``require_confirmation``
a bool and a callable, ``request_confirmation`` with a payload, a plain
``FunctionTool`` named in ``tools_requiring_approval``), run by the real
server with the offline model, which calls a tool on ``call NAME {json}``.
Each case counts the tool's effect: once after an approval, never after a
denial; and the model's answer names the tool's response.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
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
        tool_timeout_s=10,  # a lost answer fails in seconds, not a minute
    )


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    desk.RUNS.clear()
    desk.PAYLOADS.clear()
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def call_text(tool: str, args: dict[str, Any]) -> str:
    return f"call {tool} {json.dumps(args)}"


def confirmation_asked(stream: list[dict[str, Any]], request: dict[str, Any]) -> dict[str, Any]:
    """The ``data-confirmation`` data of an approval request, which is AI
    SDK's chunk exactly (every major's schema is strict there): the hint and
    payload are in the data part just before it."""
    assert set(request) == {"type", "approvalId", "toolCallId"}, request
    at = stream.index(request)
    part = stream[at - 1]
    assert part["type"] == "data-confirmation" and part["id"] == request["approvalId"], part
    data = part["data"]
    assert data["approvalId"] == request["approvalId"]
    assert data["toolCallId"] == request["toolCallId"]
    return data


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
    return call, {**request, **confirmation_asked(asked, request)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ws_approved_runs_once_and_the_model_answers(client: TestClient, case: str) -> None:
    tool, args, key = CASES[case]
    with client.websocket_connect("/ws") as ws:
        start(ws)
        call, request = ws_ask(ws, tool, args)
        assert desk.RUNS[tool] == 0  # nothing before the approval
        assert request["toolName"] == tool
        if tool == "book_room":
            assert request["hint"] == "Book Blue? Say how many nights."
            assert request["payload"] == {"nights": 1}
        else:
            assert tool in request["hint"] and "payload" not in request
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
    client: TestClient,
    chat_id: str,
    tool: str,
    args: dict[str, Any],
    approval: dict[str, Any],
    body: Callable[[str], dict[str, Any]] = lambda _: {},
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Ask, answer as AI SDK's client does (the approval in the resubmitted
    tool part, ``body(approval id)`` beside the messages); returns both
    streams and the resubmitted history."""
    text = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": call_text(tool, args)}]}
    first = chat_post(client, chat_id, [text])
    kinds = [c["type"] for c in first]
    at = kinds.index("tool-input-available")
    assert kinds[at : at + 3] == [
        "tool-input-available",
        "data-confirmation",
        "tool-approval-request",
    ]
    # A body that asked returned something: ADK lets the model tell it (as
    # adk api_server does), in the same step, so that the approval is in the
    # last step, where AI SDK's client looks before it sends the answer.
    assert "start-step" not in kinds[at:] and kinds[-2:] == ["finish-step", "finish"]
    assert first[-1]["finishReason"] == "tool-calls"
    said = "".join(c["delta"] for c in first if c["type"] == "text-delta")
    assert ("awaiting confirmation" in said) == (tool == "book_room"), said
    assert "tool-output-available" not in kinds  # ADK's placeholder response is hidden
    call = next(c for c in first if c["type"] == "tool-input-available")
    request = next(c for c in first if c["type"] == "tool-approval-request")
    asked = confirmation_asked(first, request)
    assert call["toolName"] == tool and request["toolCallId"] == call["toolCallId"]
    assert tool in asked["hint"] or tool == "book_room"
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
    extra = body(request["approvalId"])
    second = chat_post(client, chat_id, history, messageId=assistant["id"], **extra)
    return first, second, {"history": history, "request": {**request, **asked}, "call": call}


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


@pytest.mark.parametrize("mine", [True, False])
def test_chat_payload_in_the_body_reaches_the_tool(client: TestClient, mine: bool) -> None:
    """AI SDK's addToolApprovalResponse writes no payload into the part: the
    app sends it in the request's body, by approval id; an entry for another
    approval is not used (the tool gets the payload it offered)."""

    def body(approval_id: str) -> dict[str, Any]:
        payloads: dict[str, Any] = {"apr_other": {"nights": 7}}
        if mine:
            payloads[approval_id] = {"nights": 9}
        return {"approvalPayloads": payloads}

    _, second, _ = chat_round(
        client, f"chat-body-{mine}", "book_room", {"room": "Teal"}, {"approved": True}, body
    )
    output = next(c for c in second if c["type"] == "tool-output-available")
    nights = 9 if mine else 1
    assert output["output"] == {"booked": "Teal", "nights": nights}
    assert desk.PAYLOADS[0] == {"nights": nights} and len(desk.PAYLOADS) == 1
    assert desk.RUNS["book_room"] == 1


@pytest.mark.parametrize(
    ("payloads", "error"),
    [
        ([1], "approvalPayloads"),
        ({"": 1}, "approvalPayloads key"),
        ({"apr_x": float("nan")}, "NaN"),  # refused with the whole body
        ({"apr_x": "x" * 20_000}, "exceeds the limit"),
    ],
)
def test_chat_bad_approval_payloads_are_refused(
    client: TestClient, payloads: Any, error: str
) -> None:
    part = {
        "type": "tool-book_room",
        "toolCallId": "c1",
        "state": "approval-responded",
        "input": {},
        "approval": {"id": "apr_x", "approved": True},
    }
    body = {
        "id": "chat-bad",
        "trigger": "submit-message",
        "messages": [{"id": "a1", "role": "assistant", "parts": [part]}],
        "approvalPayloads": payloads,
    }
    response = client.post(
        "/api/chat",
        content=json.dumps(body, allow_nan=True),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400, response.text
    assert error in response.text
    assert desk.RUNS["book_room"] == 0


# ---------------------------------------------------------------- /live (the seed's dialect)

SEED_VERSION = {"version": "1.0", "timestamp": 1764547200000}


def seed_read(ws: Any) -> list[dict[str, Any]]:
    """One seed stream: up to ``[DONE]``, or the finish-step that closes an
    approval request (its client closes the stream there itself)."""
    out: list[dict[str, Any]] = []
    armed = False
    for _ in range(500):
        frame = ws.receive_text()
        if not frame.startswith("data: "):
            continue  # a pong
        body = frame[len("data: ") :].strip()
        if body == "[DONE]":
            return out
        chunk = json.loads(body)
        out.append(chunk)
        armed = armed or chunk["type"] == "tool-approval-request"
        if armed and chunk["type"] == "finish-step":
            return out
    raise AssertionError([c["type"] for c in out])


def seed_submit(ws: Any, messages: list[Any], message_id: str | None = None) -> None:
    body: dict[str, Any] = {
        "type": "message",
        "id": "chat-live",
        "messages": messages,
        "trigger": "submit-message",
        **SEED_VERSION,
    }
    if message_id is not None:
        body["messageId"] = message_id
    ws.send_text(json.dumps(body))


@pytest.mark.parametrize(
    ("case", "approval"),
    [
        ("require_bool", {"approved": True}),
        ("require_callable", {"approved": False}),
        ("request_in_body", {"approved": True, "payload": {"nights": 2}}),
        ("named_by_deployment", {"approved": False}),
        ("named_by_deployment", {"approved": True}),
    ],
)
def test_live_dialect(client: TestClient, case: str, approval: dict[str, Any]) -> None:
    tool, args, key = CASES[case]
    with client.websocket_connect("/live") as ws:
        said = call_text(tool, args)
        text = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": said}]}
        seed_submit(ws, [text])
        first = seed_read(ws)
        call = next(c for c in first if c["type"] == "tool-input-available")
        request = next(c for c in first if c["type"] == "tool-approval-request")
        assert request["toolCallId"] == call["toolCallId"] and first[-1]["type"] == "finish-step"
        assert desk.RUNS[tool] == 0
        part = {
            "type": f"tool-{tool}",
            "toolCallId": call["toolCallId"],
            "state": "approval-responded",
            "input": call["input"],
            "approval": {"id": request["approvalId"], **approval},
        }
        assistant = {"id": first[0]["messageId"], "role": "assistant", "parts": [part]}
        seed_submit(ws, [text, assistant], message_id=assistant["id"])
        second = seed_read(ws)
    kinds = [c["type"] for c in second]
    assert kinds[-1] == "finish"
    answer = "".join(c["delta"] for c in second if c["type"] == "text-delta")
    if approval["approved"]:
        output = next(c for c in second if c["type"] == "tool-output-available")
        assert key in output["output"] and tool in answer
        assert desk.RUNS[tool] == 1
        if "payload" in approval:
            assert [approval["payload"]] == desk.PAYLOADS
    else:
        assert "tool-output-denied" in kinds and "denied" in answer
        assert desk.RUNS[tool] == 0


# ---------------------------------------------------------------- /run_live (ADK's own protocol)


def run_live_events(ws: Any, until: Any, limit: int = 500) -> list[dict[str, Any]]:
    events = []
    for _ in range(limit):
        event = json.loads(ws.receive_text())
        events.append(event)
        if until(event):
            return events
    raise AssertionError(events[-5:])


def calls_of(event: dict[str, Any]) -> list[dict[str, Any]]:
    parts = event.get("content", {}).get("parts", [])
    return [p["functionCall"] for p in parts if "functionCall" in p]


def texts_of(events: list[dict[str, Any]]) -> str:
    out = []
    for event in events:
        out += [p.get("text", "") for p in event.get("content", {}).get("parts", [])]
        out.append(event.get("outputTranscription", {}).get("text", ""))
    return " ".join(out)


def adk_own_request(original: dict[str, Any], hint: str, payload: Any, author: str) -> Any:
    """What ADK's run_async emits for the same request
    (``generate_request_confirmation_event``), as its JSON."""
    from types import SimpleNamespace

    from google.adk.events import Event, EventActions
    from google.adk.flows.llm_flows.functions import generate_request_confirmation_event
    from google.adk.tools.tool_confirmation import ToolConfirmation
    from google.genai import types

    from audiocore_server.wire.adk_json import event_json

    call = types.FunctionCall.model_validate(original)
    context = SimpleNamespace(invocation_id="inv", branch=None, agent=SimpleNamespace(name=author))
    calls = Event(author=author, content=types.Content(parts=[types.Part(function_call=call)]))
    asked = ToolConfirmation(hint=hint, payload=payload)
    responses = Event(
        author=author, actions=EventActions(requested_tool_confirmations={call.id: asked})
    )
    event = generate_request_confirmation_event(context, calls, responses)  # type: ignore[arg-type]
    return event_json(event)


@pytest.mark.parametrize(
    ("case", "answer"),
    [
        ("require_bool", {"confirmed": True}),
        ("require_callable", {"confirmed": False}),
        ("request_in_body", {"confirmed": True, "payload": {"nights": 5}}),
        ("request_in_body", {"confirmed": False}),
        ("named_by_deployment", {"confirmed": True}),
    ],
)
def test_run_live_speaks_adks_confirmation(
    client: TestClient, case: str, answer: dict[str, Any]
) -> None:
    tool, args, key = CASES[case]
    session = f"s-{case}-{answer['confirmed']}"
    created = client.post(f"/apps/{APP}/users/u1/sessions", json={"sessionId": session})
    assert created.status_code == 200, created.text
    url = f"/run_live?app_name={APP}&user_id=u1&session_id={session}"
    with client.websocket_connect(url) as ws:
        text = {"content": {"role": "user", "parts": [{"text": call_text(tool, args)}]}}
        ws.send_text(json.dumps(text))
        events = run_live_events(
            ws, lambda e: any(c["name"] == "adk_request_confirmation" for c in calls_of(e))
        )
        (original,) = next(calls_of(e) for e in events if calls_of(e) and e is not events[-1])
        request_event = events[-1]
        (request,) = calls_of(request_event)
        assert original["name"] == tool and original["args"] == args
        assert request_event["longRunningToolIds"] == [request["id"]]
        confirmation = request["args"]["toolConfirmation"]
        # Byte for byte what ADK emits, but for its fresh ids and time.
        theirs = adk_own_request(
            original, confirmation["hint"], confirmation.get("payload"), request_event["author"]
        )
        ours = copy.deepcopy(request_event)
        for event in (ours, theirs):
            for volatile in ("id", "timestamp", "invocationId"):
                event.pop(volatile)
            event["longRunningToolIds"] = ["request"]
            (part,) = event["content"]["parts"]
            part["functionCall"]["id"] = "request"
        assert ours == theirs
        if tool == "book_room":
            assert confirmation == {
                "hint": "Book Blue? Say how many nights.",
                "confirmed": False,
                "payload": {"nights": 1},
            }
        assert desk.RUNS[tool] == 0
        reply = {"id": request["id"], "name": "adk_request_confirmation", "response": answer}
        ws.send_text(
            json.dumps({"content": {"role": "user", "parts": [{"functionResponse": reply}]}})
        )
        turn = run_live_events(ws, lambda e: e.get("turnComplete"))
    said = texts_of(turn)
    if answer["confirmed"]:
        assert tool in said and key in said, said
        assert desk.RUNS[tool] == 1
        if "payload" in answer:
            assert [answer["payload"]] == desk.PAYLOADS
    else:
        assert "denied" in said, said
        assert desk.RUNS[tool] == 0


# ---------------------------------------------------------------- no leak


def kept_calls(client: TestClient) -> int:
    """The calls the wrapped tools of the live agent hold, all of them."""
    from audiocore_server.tools.confirmation import ConfirmedTool

    agent = client.app.state.runtime.agents.select(APP).agent  # type: ignore[attr-defined]
    return sum(t.kept for t in agent.tools if isinstance(t, ConfirmedTool))


def test_kept_calls_are_dropped_on_answer_denial_and_barge_in(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        for verdict in (True, False):
            _, request = ws_ask(ws, "delete_file", {"path": "x"})
            assert kept_calls(client) == 1
            approval = {"type": "tool_approval", "approvalId": request["approvalId"]}
            ws.send_text(json.dumps({**approval, "approved": verdict}))
            receive_until(ws, "finish")
            assert kept_calls(client) == 0
        _, request = ws_ask(ws, "delete_file", {"path": "y"})
        assert kept_calls(client) == 1
        ws.send_text(json.dumps({"type": "interrupt"}))
        receive_until(ws, "tool-output-error")
        assert kept_calls(client) == 0
    assert desk.RUNS["delete_file"] == 1
