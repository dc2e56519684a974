"""Several delegated tool calls in one model step, end to end (the seed's
scenario "two approvals pending at once"; one follow-up answer however many
tools ran).

Real app, real ADK runner, real SQLite, the offline model, which calls two
tools in one response when every clause of a request is a tool's cue: "pay 5
EUR to Alice and where am I" → ``process_payment`` (approval, runs on the
server) and ``get_location`` (approval, runs in the browser). The payment
ledger in the session state shows how often the payment ran; the session's
events show how often the model answered.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from server_helpers import receive_until, start
from starlette.testclient import TestClient
from test_http_chat import chunks, post, user
from test_seed_dialect import SeedStream
from test_seed_dialect import submit as seed_submit
from test_seed_dialect import user as seed_user

from audiocore_server.offline.model import _cued_calls
from audiocore_server.storage.users import CHAT_USER_ID, USER_ID
from audiocore_server.wire.chunks import client_executes

BOTH = "pay 5 EUR to Alice and where am I"
POSITION = {"latitude": 48.8584, "longitude": 2.2945, "accuracy": 10}
BOTH_TOOLS = {"process_payment", "get_location", "get_weather", "change_bgm"}


def _session(client: TestClient, user_id: str, session_id: str) -> Any:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]

    async def read() -> Any:
        return await runtime.sessions.service.get_session(
            app_name=runtime.settings.app_name, user_id=user_id, session_id=session_id
        )

    return client.portal.call(read)  # type: ignore[union-attr]


def payments(client: TestClient, user_id: str, session_id: str) -> list[dict[str, Any]]:
    return list(_session(client, user_id, session_id).state.get("ledger", []))


def model_answers(client: TestClient, user_id: str, session_id: str) -> list[str]:
    """The model's text answers stored in the session, one per response."""
    return [
        " ".join(p.text for p in event.content.parts if p.text)
        for event in _session(client, user_id, session_id).events
        if event.author != "user" and event.content and any(p.text for p in event.content.parts)
    ]


# ---------------------------------------------------------------- the cue


def test_every_clause_a_cue_makes_several_calls_in_one_response() -> None:
    assert _cued_calls(BOTH, BOTH_TOOLS) == [
        ("process_payment", {"amount": 5.0, "currency": "EUR", "recipient": "Alice"}),
        ("get_location", {}),
    ]
    assert [name for name, _ in _cued_calls("where am i, weather in Paris", BOTH_TOOLS)] == [
        "get_location",
        "get_weather",
    ]
    # A clause that is no cue: one call, as before (the name keeps its "and").
    assert _cued_calls("pay 5 EUR to Alice and Bob", BOTH_TOOLS) == [
        ("process_payment", {"amount": 5.0, "currency": "EUR", "recipient": "Alice and Bob"})
    ]
    # The same tool twice is one request, not two calls.
    assert len(_cued_calls("where am I and where am I", BOTH_TOOLS)) == 1
    # A tool that is not declared is not called.
    assert _cued_calls(BOTH, {"get_location"}) == [("get_location", {})]


# ---------------------------------------------------------------- /ws


def _send(ws: Any, **message: Any) -> None:
    ws.send_text(json.dumps(message))


def _ask_both(ws: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both calls in one step, both approvals asked; returns the two
    approval requests (payment, location)."""
    _send(ws, type="text", text=BOTH)
    asked = receive_until(ws, "finish-step")
    assert [m["type"] for m in asked] == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-available",
        "tool-input-start",
        "tool-input-available",
        "tool-approval-request",
        "tool-approval-request",
        "finish-step",
    ]
    pay_call, where_call = asked[3], asked[5]
    assert pay_call["toolName"] == "process_payment" and where_call["toolName"] == "get_location"
    pay, where = asked[6], asked[7]
    assert pay["toolCallId"] == pay_call["toolCallId"]
    assert where["toolCallId"] == where_call["toolCallId"]
    return pay, where


def _approve(ws: Any, request: dict[str, Any], approved: bool = True) -> None:
    _send(ws, type="tool_approval", approvalId=request["approvalId"], approved=approved)


def _run_location(ws: Any, where: dict[str, Any]) -> list[dict[str, Any]]:
    """Approve the location; the browser is asked to run it and answers."""
    _approve(ws, where)
    run = receive_until(ws, "finish-step")
    # Only the cue to run it: no outcome of the step comes before all of it.
    assert [m["type"] for m in run] == ["tool-input-available", "finish-step"]
    assert client_executes(run[0]) and run[0]["toolCallId"] == where["toolCallId"]
    _send(ws, type="tool_result", toolCallId=where["toolCallId"], output=POSITION)
    return run


def _nothing_told(ws: Any) -> None:
    """A barrier: a stray approval's error is the next thing the client
    hears — messages are handled in order, and an outcome is told as it is
    handled — so nothing about the step was told before it."""
    _send(ws, type="tool_approval", approvalId="apr_none", approved=True)
    heard = receive_until(ws, "error")
    assert [m["type"] for m in heard] == ["error"], heard


def _rest_of_turn(ws: Any) -> list[dict[str, Any]]:
    """Up to the turn's finish; then a typed turn, whose answer must be the
    next thing said: nothing the model says after its one answer can hide
    behind the finish."""
    rest = receive_until(ws, "finish")
    _send(ws, type="text", text="next")
    after = receive_until(ws, "text-delta")
    assert [m["type"] for m in after] == ["start", "text-start", "text-delta"], after
    assert after[-1]["delta"].startswith("You said: next")
    receive_until(ws, "finish")
    return rest


def _outputs(rest: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["toolCallId"]: m for m in rest if m["type"].startswith("tool-output")}


@pytest.mark.parametrize("order", ["payment first", "location first"])
def test_ws_two_approvals_in_either_order_one_answer(client: TestClient, order: str) -> None:
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws, turnDetection="manual")["data"]["sessionId"]
        pay, where = _ask_both(ws)
        if order == "payment first":
            _approve(ws, pay)
            _nothing_told(ws)  # the payment's outcome waits for the step
            _run_location(ws, where)
        else:
            _run_location(ws, where)
            _nothing_told(ws)  # the location's too
            _approve(ws, pay)
        rest = _rest_of_turn(ws)
    kinds = [m["type"] for m in rest]
    # Both outcomes, then the one answer, in the same message.
    outputs = _outputs(rest)
    assert outputs[pay["toolCallId"]]["output"]["success"] is True
    assert outputs[where["toolCallId"]]["output"] == POSITION
    assert kinds[:2] == ["tool-output-available", "tool-output-available"]
    assert kinds.count("text-start") == 1 and kinds.count("finish") == 1
    assert kinds.count("start") == 0  # the same message goes on
    answer = next(m for m in rest if m["type"] == "text-delta")["delta"]
    assert "process_payment returned" in answer and '"success": true' in answer
    assert "get_location returned" in answer and "48.8584" in answer
    (entry,) = payments(client, USER_ID, session_id)
    assert entry["recipient"] == "Alice" and entry["amount"] == 5.0
    assert entry["transactionId"] == outputs[pay["toolCallId"]]["output"]["transactionId"]
    assert model_answers(client, USER_ID, session_id)[:-1] == [answer]


def test_ws_one_denied_one_approved_one_answer(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws, turnDetection="manual")["data"]["sessionId"]
        pay, where = _ask_both(ws)
        _approve(ws, pay, approved=False)
        _nothing_told(ws)
        _run_location(ws, where)
        rest = _rest_of_turn(ws)
        # Every call is spent: a second answer to either is refused.
        _approve(ws, pay)
        assert "no pending approval" in receive_until(ws, "error")[-1]["errorText"]
        _send(ws, type="tool_result", toolCallId=where["toolCallId"], output=POSITION)
        assert "no pending tool call" in receive_until(ws, "error")[-1]["errorText"]
    assert _outputs(rest)[pay["toolCallId"]] == {
        "type": "tool-output-denied",
        "toolCallId": pay["toolCallId"],
    }
    answer = next(m for m in rest if m["type"] == "text-delta")["delta"]
    assert '"status": "denied"' in answer and "48.8584" in answer
    assert payments(client, USER_ID, session_id) == []
    assert model_answers(client, USER_ID, session_id)[:-1] == [answer]


def test_ws_barge_in_settles_both_calls_with_one_answer(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws, turnDetection="manual")["data"]["sessionId"]
        pay, where = _ask_both(ws)
        _send(ws, type="interrupt")
        errors = receive_until(ws, "finish")
        cancelled = [m["toolCallId"] for m in errors if m["type"] == "tool-output-error"]
        assert sorted(cancelled) == sorted([pay["toolCallId"], where["toolCallId"]])
    assert payments(client, USER_ID, session_id) == []
    (answer,) = model_answers(client, USER_ID, session_id)
    assert answer.count('"status": "cancelled"') == 2


# ---------------------------------------------------------------- HTTP chat


def _http_ask_both(client: TestClient, chat_id: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """The first request: both calls, both approvals, one step; returns the
    history to resubmit and the two tool parts in it (payment, location)."""
    first = chunks(post(client, chat_id, [user(BOTH)]))
    assert [c["type"] for c in first][-4:] == [
        "tool-approval-request",
        "tool-approval-request",
        "finish-step",
        "finish",
    ]
    assert first[-1]["finishReason"] == "tool-calls"
    calls = [c for c in first if c["type"] == "tool-input-available"]
    requests = [c for c in first if c["type"] == "tool-approval-request"]
    assert [c["toolName"] for c in calls] == ["process_payment", "get_location"]
    parts = [
        {
            "type": f"tool-{call['toolName']}",
            "toolCallId": call["toolCallId"],
            "state": "approval-requested",
            "input": call["input"],
            "approval": {"id": request["approvalId"]},
        }
        for call, request in zip(calls, requests, strict=True)
    ]
    assistant = {"id": first[0]["messageId"], "role": "assistant", "parts": parts}
    return [user(BOTH), assistant], parts


def _answer(part: dict[str, Any], approved: bool) -> None:
    part["state"] = "approval-responded"
    part["approval"] = {**part["approval"], "approved": approved}


def _located(part: dict[str, Any]) -> None:
    part["state"] = "output-available"
    part["output"] = POSITION


def _again(client: TestClient, chat_id: str, history: list[dict[str, Any]]) -> list[Any]:
    return chunks(post(client, chat_id, history, messageId=history[-1]["id"]))


def test_http_both_approved_at_once_as_ai_sdk_sends_them(client: TestClient) -> None:
    history, (pay, where) = _http_ask_both(client, "par-1")
    _answer(pay, True)
    _answer(where, True)
    second = _again(client, "par-1", history)
    # The payment ran and is shown; the browser is asked to run its tool;
    # the model is not answered yet: no text.
    kinds = [c["type"] for c in second]
    assert kinds == [
        "start",
        "tool-output-available",
        "tool-input-available",
        "finish-step",
        "finish",
    ]
    assert second[1]["toolCallId"] == pay["toolCallId"] and second[1]["output"]["success"]
    assert client_executes(second[2]) and second[2]["toolCallId"] == where["toolCallId"]
    assert second[-1]["finishReason"] == "tool-calls"
    assert len(payments(client, CHAT_USER_ID, "par-1")) == 1
    assert model_answers(client, CHAT_USER_ID, "par-1") == []
    pay["state"] = "output-available"
    pay["output"] = second[1]["output"]
    _located(where)
    third = _again(client, "par-1", history)
    texts = [c["delta"] for c in third if c["type"] == "text-delta"]
    assert len(texts) == 1 and third[-1]["finishReason"] == "stop"
    assert "process_payment returned" in texts[0] and "48.8584" in texts[0]
    assert len(payments(client, CHAT_USER_ID, "par-1")) == 1  # not run again
    assert model_answers(client, CHAT_USER_ID, "par-1") == texts


def test_http_answered_one_by_one_location_first(client: TestClient) -> None:
    history, (pay, where) = _http_ask_both(client, "par-2")
    _answer(where, True)
    run = _again(client, "par-2", history)
    assert [c["type"] for c in run] == ["start", "tool-input-available", "finish-step", "finish"]
    _located(where)
    held = _again(client, "par-2", history)
    # The location's output is shown; the payment still waits: no answer.
    assert [c["type"] for c in held] == ["start", "tool-output-available", "finish"]
    assert held[-1]["finishReason"] == "tool-calls"
    assert model_answers(client, CHAT_USER_ID, "par-2") == []
    _answer(pay, True)
    last = _again(client, "par-2", history)
    texts = [c["delta"] for c in last if c["type"] == "text-delta"]
    assert len(texts) == 1 and '"success": true' in texts[0] and "48.8584" in texts[0]
    assert len(payments(client, CHAT_USER_ID, "par-2")) == 1
    assert model_answers(client, CHAT_USER_ID, "par-2") == texts


def test_http_payment_denied_location_approved(client: TestClient) -> None:
    history, (pay, where) = _http_ask_both(client, "par-3")
    _answer(pay, False)
    first = _again(client, "par-3", history)
    assert [c["type"] for c in first] == [
        "start",
        "tool-output-denied",
        "finish",
    ]
    assert model_answers(client, CHAT_USER_ID, "par-3") == []
    _answer(where, True)
    _again(client, "par-3", history)
    _located(where)
    last = _again(client, "par-3", history)
    texts = [c["delta"] for c in last if c["type"] == "text-delta"]
    assert len(texts) == 1 and '"status": "denied"' in texts[0] and "48.8584" in texts[0]
    assert payments(client, CHAT_USER_ID, "par-3") == []
    assert model_answers(client, CHAT_USER_ID, "par-3") == texts


# ---------------------------------------------------------------- /live (the seed's client)


def test_live_seed_client_answers_both_in_one_message(client: TestClient) -> None:
    """The seed's client approves both and, having run the browser tool,
    sends the approval and the location in one message."""
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        history = [seed_user(BOTH)]
        seed_submit(ws, history)
        first = stream.read()
        calls = [c for c in first if c["type"] == "tool-input-available"]
        requests = [c for c in first if c["type"] == "tool-approval-request"]
        assert [c["toolName"] for c in calls] == ["process_payment", "get_location"]
        pay, where = calls
        assistant = {
            "id": first[0]["messageId"],
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {
                    "type": "tool-process_payment",
                    "toolCallId": pay["toolCallId"],
                    "state": "approval-responded",
                    "input": pay["input"],
                    "approval": {"id": requests[0]["approvalId"], "approved": True},
                },
                {
                    "type": "tool-get_location",
                    "toolCallId": where["toolCallId"],
                    "state": "output-available",
                    "input": {},
                    "output": POSITION,
                    "approval": {"id": requests[1]["approvalId"], "approved": True},
                },
            ],
        }
        history.append(assistant)
        seed_submit(ws, history, message_id=assistant["id"])
        second = stream.read()
        # The next turn's answer is the next thing said: no second answer.
        seed_submit(ws, [*history, seed_user("next", "u2")])
        third = stream.read()
    outputs = [c["toolCallId"] for c in second if c["type"] == "tool-output-available"]
    assert sorted(outputs) == sorted([pay["toolCallId"], where["toolCallId"]])
    texts = [c["delta"] for c in second if c["type"] == "text-delta"]
    assert len(texts) == 1 and '"success": true' in texts[0] and "48.8584" in texts[0]
    assert next(c for c in third if c["type"] == "text-delta")["delta"].startswith("You said: next")


def test_http_a_call_left_unanswered_in_an_earlier_turn_holds_nothing_back(
    client: TestClient,
) -> None:
    first = chunks(post(client, "par-4", [user("pay 5 EUR to Alice")]))
    assert first[-1]["finishReason"] == "tool-calls"  # never answered
    history: list[dict[str, Any]] = [
        user("pay 5 EUR to Alice"),
        {"id": first[0]["messageId"], "role": "assistant", "parts": []},
        user("where am I", "u2"),
    ]
    second = chunks(post(client, "par-4", history))
    call = next(c for c in second if c["type"] == "tool-input-available")
    request = next(c for c in second if c["type"] == "tool-approval-request")
    part = {
        "type": "tool-get_location",
        "toolCallId": call["toolCallId"],
        "state": "approval-responded",
        "input": {},
        "approval": {"id": request["approvalId"], "approved": True},
    }
    history.append({"id": second[0]["messageId"], "role": "assistant", "parts": [part]})
    _again(client, "par-4", history)
    _located(part)
    last = _again(client, "par-4", history)
    texts = [c["delta"] for c in last if c["type"] == "text-delta"]
    assert len(texts) == 1 and "48.8584" in texts[0], last
    assert payments(client, CHAT_USER_ID, "par-4") == []
