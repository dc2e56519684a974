"""Tools in the live conversation: approval, browser tools, and who may answer.

Real app, real ADK runner, real SQLite session store, the offline model (which
calls the demo tools on textual cues). The ledger that ``process_payment``
keeps in the session state shows whether a payment ran exactly once or never.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

import pytest
from server_helpers import receive_until, start
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from audiocore_server import Settings, create_app
from audiocore_server.storage.users import USER_ID
from audiocore_server.wire.chunks import client_executes

PAY = "pay 5 EUR to Alice"


def ledger(client: TestClient, session_id: str) -> list[dict[str, Any]]:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]

    async def read() -> list[dict[str, Any]]:
        session = await runtime.sessions.service.get_session(
            app_name=runtime.settings.app_name, user_id=USER_ID, session_id=session_id
        )
        return list(session.state.get("ledger", []))

    return client.portal.call(read)  # type: ignore[union-attr]


def ask(ws: Any, text: str) -> list[dict[str, Any]]:
    """A typed turn up to the end of the step that asks the client."""
    ws.send_text(json.dumps({"type": "text", "text": text}))
    return receive_until(ws, "finish-step")


def approval_of(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in chunks if m["type"] == "tool-approval-request")


def approve(ws: Any, approval_id: str, approved: bool = True, **extra: Any) -> None:
    ws.send_text(
        json.dumps(
            {"type": "tool_approval", "approvalId": approval_id, "approved": approved, **extra}
        )
    )


def test_approved_payment_runs_once_and_the_model_answers(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws)["data"]["sessionId"]
        asked = ask(ws, PAY)
        kinds = [m["type"] for m in asked]
        assert kinds == [
            "start",
            "start-step",
            "tool-input-start",
            "tool-input-available",
            "tool-approval-request",
            "finish-step",
        ]
        call = asked[3]
        assert call["toolName"] == "process_payment" and not client_executes(call)
        assert call["input"] == {"amount": 5.0, "currency": "EUR", "recipient": "Alice"}
        request = asked[4]
        assert request["toolCallId"] == call["toolCallId"]
        assert ledger(client, session_id) == []  # nothing before the approval
        approve(ws, request["approvalId"], reason="fine")
        rest = receive_until(ws, "finish")
        output = next(m for m in rest if m["type"] == "tool-output-available")
        assert output["toolCallId"] == call["toolCallId"] and output["output"]["success"] is True
        answer = next(m for m in rest if m["type"] == "text-delta")["delta"]
        assert answer.startswith("process_payment returned") and '"success": true' in answer
        assert [m["type"] for m in rest].count("start") == 0  # the same message goes on
        (entry,) = ledger(client, session_id)
        assert (
            entry["amount"] == 5.0 and entry["currency"] == "EUR" and entry["recipient"] == "Alice"
        )
        assert entry["transactionId"] == output["output"]["transactionId"]
        # A second answer to the same approval finds nothing, and nothing runs again.
        approve(ws, request["approvalId"])
        error = receive_until(ws, "error")[-1]
        assert "no pending approval" in error["errorText"]
    assert len(ledger(client, session_id)) == 1


def test_denied_payment_never_runs_and_the_model_is_told(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws)["data"]["sessionId"]
        request = approval_of(ask(ws, PAY))
        approve(ws, request["approvalId"], approved=False, reason="not today")
        rest = receive_until(ws, "finish")
        denied = next(m for m in rest if m["type"].startswith("tool-output"))
        assert denied == {"type": "tool-output-denied", "toolCallId": request["toolCallId"]}
        answer = next(m for m in rest if m["type"] == "text-delta")["delta"]
        assert '"status": "denied"' in answer and "not today" in answer
    assert ledger(client, session_id) == []


def test_every_decision_is_logged(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="audiocore_server.tools.calls")
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws)["data"]["sessionId"]
        request = approval_of(ask(ws, PAY))
        approve(ws, request["approvalId"], approved=False)
        receive_until(ws, "finish")
    (record,) = [r for r in caplog.records if r.getMessage().startswith("tool approval")]
    line = record.getMessage()
    assert f"session={session_id}" in line and "tool=process_payment" in line
    assert '"recipient": "Alice"' in line and "verdict=denied" in line


def test_unanswered_approval_times_out(settings: Settings) -> None:
    quick = replace(settings, tool_timeout_s=0.2)
    with TestClient(create_app(quick)) as client, client.websocket_connect("/ws") as ws:
        session_id = start(ws)["data"]["sessionId"]
        request = approval_of(ask(ws, PAY))
        rest = receive_until(ws, "finish")
        error = next(m for m in rest if m["type"] == "tool-output-error")
        assert error["toolCallId"] == request["toolCallId"]
        assert error["errorText"] == "no answer within 0.2 s"
        assert (
            '"status": "timed_out"' in next(m for m in rest if m["type"] == "text-delta")["delta"]
        )
        approve(ws, request["approvalId"])  # too late
        assert "no pending approval" in receive_until(ws, "error")[-1]["errorText"]
        assert ledger(client, session_id) == []


def test_barge_in_while_pending_cancels_the_call(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws)["data"]["sessionId"]
        request = approval_of(ask(ws, PAY))
        ws.send_text(json.dumps({"type": "interrupt"}))
        rest = receive_until(ws, "finish")
        kinds = [m["type"] for m in rest]
        assert kinds.index("data-interrupted") < kinds.index("tool-output-error")
        error = next(m for m in rest if m["type"] == "tool-output-error")
        assert error["errorText"] == "interrupted by the user"
        approve(ws, request["approvalId"])
        assert "no pending approval" in receive_until(ws, "error")[-1]["errorText"]
    assert ledger(client, session_id) == []


def test_disconnect_while_pending_resolves_the_call(settings: Settings) -> None:
    no_grace = replace(settings, tool_grace_s=0)
    with TestClient(create_app(no_grace)) as client:
        with client.websocket_connect("/ws") as ws:
            session_id = start(ws)["data"]["sessionId"]
            request = approval_of(ask(ws, PAY))
        with client.websocket_connect("/ws") as ws:
            start(ws, sessionId=session_id)
            approve(ws, request["approvalId"])
            assert "no pending approval" in receive_until(ws, "error")[-1]["errorText"]
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        assert runtime.delegations.pending == 0
        assert ledger(client, session_id) == []


def test_reconnecting_client_is_asked_again_and_its_answer_counts(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws)["data"]["sessionId"]
        first = ask(ws, PAY)
    request = approval_of(first)
    with client.websocket_connect("/ws") as ws:
        start(ws, sessionId=session_id)
        replay = receive_until(ws, "finish-step")
        assert [m["type"] for m in replay] == [
            "start",
            "start-step",
            "tool-input-start",
            "tool-input-available",
            "tool-approval-request",
            "finish-step",
        ]
        assert approval_of(replay) == request
        # The same assistant message goes on: a client shows the call once.
        assert replay[0]["messageId"] == first[0]["messageId"]
        approve(ws, request["approvalId"])
        rest = receive_until(ws, "finish")
        assert next(m for m in rest if m["type"] == "tool-output-available")["output"]["success"]
    assert len(ledger(client, session_id)) == 1


def test_answers_only_reach_the_connection_that_owns_the_call(client: TestClient) -> None:
    with client.websocket_connect("/ws") as one, client.websocket_connect("/ws") as two:
        first = start(one)["data"]["sessionId"]
        second = start(two)["data"]["sessionId"]
        request_one = approval_of(ask(one, PAY))
        request_two = approval_of(ask(two, "pay 7 USD to Bob"))
        # Each client tries the other's ids: refused, nothing runs.
        approve(two, request_one["approvalId"])
        assert "no pending approval" in receive_until(two, "error")[-1]["errorText"]
        two.send_text(
            json.dumps(
                {"type": "tool_result", "toolCallId": request_one["toolCallId"], "output": {}}
            )
        )
        assert "no pending tool call" in receive_until(two, "error")[-1]["errorText"]
        assert ledger(client, first) == [] and ledger(client, second) == []
        # Each approves its own.
        approve(one, request_one["approvalId"])
        approve(two, request_two["approvalId"])
        out_one = next(
            m for m in receive_until(one, "finish") if m["type"] == "tool-output-available"
        )
        out_two = next(
            m for m in receive_until(two, "finish") if m["type"] == "tool-output-available"
        )
    assert [e["recipient"] for e in ledger(client, first)] == ["Alice"]
    assert [e["recipient"] for e in ledger(client, second)] == ["Bob"]
    assert out_one["output"]["recipient"] == "Alice" and out_two["output"]["recipient"] == "Bob"


def _browser_tool_approved(ws: Any, text: str) -> dict[str, Any]:
    """Ask for a browser tool, approve it; returns the 'run it now' chunk."""
    request = approval_of(ask(ws, text))
    first_input = None
    approve(ws, request["approvalId"])
    run = receive_until(ws, "finish-step")
    assert [m["type"] for m in run] == ["tool-input-available", "finish-step"]
    first_input = run[0]
    assert client_executes(first_input)
    assert first_input["toolCallId"] == request["toolCallId"]
    return first_input


def _browser_tool_run_now(ws: Any, text: str) -> dict[str, Any]:
    """Ask for a browser tool that needs no approval; returns the 'run it
    now' chunk, which comes at once."""
    asked = ask(ws, text)
    assert "tool-approval-request" not in [m["type"] for m in asked]
    run = next(m for m in asked if m["type"] == "tool-input-available")
    assert client_executes(run)
    return run


def test_change_bgm_runs_in_the_browser_at_once_as_in_the_seed(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        asked = ask(ws, "play lofi")
        kinds = [m["type"] for m in asked]
        assert kinds[-3:] == ["tool-input-start", "tool-input-available", "finish-step"]
        run = asked[-2]
        assert run["toolName"] == "change_bgm" and run["input"] == {"track": "lofi"}
        assert client_executes(run)
        ws.send_text(
            json.dumps(
                {
                    "type": "tool_result",
                    "toolCallId": run["toolCallId"],
                    "output": {"track": "lofi"},
                }
            )
        )
        rest = receive_until(ws, "finish")
    output = next(m for m in rest if m["type"] == "tool-output-available")
    assert output == {
        "type": "tool-output-available",
        "toolCallId": run["toolCallId"],
        "output": {"track": "lofi"},
    }
    assert "error" not in [m["type"] for m in rest]
    assert next(m for m in rest if m["type"] == "text-delta")["delta"].startswith(
        "change_bgm returned"
    )


def test_the_tools_requiring_approval_are_a_setting(settings: Settings) -> None:
    """Approval for the music, none for payments: the deployment's choice
    replaces the seed's."""
    chosen = replace(settings, tools_requiring_approval=("change_bgm",))
    with TestClient(create_app(chosen)) as client, client.websocket_connect("/ws") as ws:
        session = start(ws)
        tools = {t["name"]: t for t in session["data"]["tools"]}
        assert tools["change_bgm"]["approval"] and not tools["process_payment"]["approval"]
        assert approval_of(ask(ws, "play jazz"))["toolCallId"]
        ws.send_text(json.dumps({"type": "interrupt"}))
        receive_until(ws, "finish")
        ws.send_text(json.dumps({"type": "text", "text": PAY}))
        paid = receive_until(ws, "finish")
        assert "tool-approval-request" not in [m["type"] for m in paid]
        assert next(m for m in paid if m["type"] == "tool-output-available")["output"]["success"]
        assert len(ledger(client, session["data"]["sessionId"])) == 1


def test_an_unknown_tool_requiring_approval_stops_the_start(settings: Settings) -> None:
    with pytest.raises(ValueError) as error:
        create_app(replace(settings, tools_requiring_approval=("process_payment", "launch")))
    assert str(error.value).startswith("tools_requiring_approval: no tool named 'launch' (")
    assert "get_location" in str(error.value)


def test_an_unknown_tool_requiring_approval_ends_the_command(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from audiocore_server.__main__ import main

    monkeypatch.setenv("AUDIOCORE_TOOLS_REQUIRING_APPROVAL", "get_location, launch")
    monkeypatch.setenv("AUDIOCORE_MODEL", "offline")
    with pytest.raises(SystemExit) as exited:
        main(["--data-dir", str(tmp_path)])
    assert exited.value.code == 2
    # After the command's name, which is how pytest was started here.
    assert ": error: tools_requiring_approval: no tool named 'launch' (" in capsys.readouterr().err


def test_the_setting_reads_from_the_environment_and_may_be_empty() -> None:
    env = {"AUDIOCORE_TOOLS_REQUIRING_APPROVAL": " process_payment ,change_bgm"}
    assert Settings.from_env(env).tools_requiring_approval == ("process_payment", "change_bgm")
    assert (
        Settings.from_env({"AUDIOCORE_TOOLS_REQUIRING_APPROVAL": ""}).tools_requiring_approval == ()
    )
    # Unset: the demo's own (DEMO_APPROVALS), none for a user's agents.
    assert Settings.from_env({}).tools_requiring_approval is None


def test_browser_tool_runs_after_approval_and_its_result_reaches_the_model(
    client: TestClient,
) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        run = _browser_tool_approved(ws, "where am I")
        assert run["toolName"] == "get_location" and run["input"] == {}
        position = {"latitude": 48.8584, "longitude": 2.2945, "accuracy": 10}
        ws.send_text(
            json.dumps({"type": "tool_result", "toolCallId": run["toolCallId"], "output": position})
        )
        rest = receive_until(ws, "finish")
        output = next(m for m in rest if m["type"] == "tool-output-available")
        assert output == {
            "type": "tool-output-available",
            "toolCallId": run["toolCallId"],
            "output": position,
        }
        answer = next(m for m in rest if m["type"] == "text-delta")["delta"]
        assert answer.startswith("get_location returned") and "48.8584" in answer


def test_browser_tool_error_and_the_result_before_approval(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        request = approval_of(ask(ws, "where am I"))
        call_id = request["toolCallId"]
        ws.send_text(json.dumps({"type": "tool_result", "toolCallId": call_id, "output": {}}))
        assert "waiting for its approval" in receive_until(ws, "error")[-1]["errorText"]
        approve(ws, request["approvalId"])
        receive_until(ws, "finish-step")
        ws.send_text(
            json.dumps({"type": "tool_result", "toolCallId": call_id, "errorText": "denied"})
        )
        rest = receive_until(ws, "finish")
        error = next(m for m in rest if m["type"] == "tool-output-error")
        assert error == {
            "type": "tool-output-error",
            "toolCallId": call_id,
            "errorText": "denied",
        }


@pytest.mark.parametrize(
    "shape",
    [
        lambda call_id: {"type": "tool_result", "toolCallId": call_id, "result": {"track": "jazz"}},
        lambda call_id: {
            "type": "tool_result",
            "data": {"toolCallId": call_id, "result": {"track": "jazz"}, "status": "approved"},
        },
    ],
    ids=["flat-result", "nested-data"],
)
def test_the_seed_projects_tool_result_shapes(client: TestClient, shape: Any) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        run = _browser_tool_run_now(ws, "play jazz")
        ws.send_text(json.dumps(shape(run["toolCallId"])))
        rest = receive_until(ws, "finish")
        output = next(m for m in rest if m["type"] == "tool-output-available")
        assert output["output"] == {"track": "jazz"}


def test_seed_rejected_status_is_a_tool_error(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        run = _browser_tool_run_now(ws, "play jazz")
        ws.send_text(
            json.dumps(
                {
                    "type": "tool_result",
                    "data": {"toolCallId": run["toolCallId"], "result": None, "status": "rejected"},
                }
            )
        )
        rest = receive_until(ws, "finish")
        assert next(m for m in rest if m["type"] == "tool-output-error")["errorText"] == (
            "the user rejected running the tool"
        )


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"type": "tool_approval", "approvalId": "x"}, 'boolean "approved"'),
        ({"type": "tool_approval", "approvalId": 5, "approved": True}, "approvalId: expected a"),
        ({"type": "tool_approval", "approvalId": "", "approved": True}, "non-empty string"),
        ({"type": "tool_approval", "approvalId": "x" * 201, "approved": True}, "exceeds the limit"),
        ({"type": "tool_approval", "approvalId": "x", "approved": "yes"}, 'boolean "approved"'),
        ({"type": "tool_approval", "approvalId": "x", "approved": True, "reason": 3}, "reason"),
        ({"type": "tool_result", "output": {}}, "toolCallId: expected a"),
        ({"type": "tool_result", "toolCallId": ["x"], "output": {}}, "toolCallId: expected a"),
        ({"type": "tool_result", "toolCallId": "x"}, 'expected "output"'),
        ({"type": "tool_result", "toolCallId": "x", "errorText": {}}, "errorText"),
        ({"type": "tool_result", "data": {"toolCallId": "x", "status": "maybe"}}, "data.status"),
        ({"type": "tool_result", "data": {"toolCallId": "x"}}, 'a "result"'),
        ({"type": "tool_result", "toolCallId": "nope", "output": 1}, "no pending tool call"),
        ({"type": "tool_approval", "approvalId": "apr_nope", "approved": True}, "no pending"),
    ],
)
def test_malformed_tool_answers_get_an_error_and_the_socket_lives(
    client: TestClient, message: dict[str, Any], expected: str
) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(json.dumps(message))
        error = receive_until(ws, "error")[-1]
        assert expected in error["errorText"]
        ws.send_text(json.dumps({"type": "text", "text": "still here"}))
        assert receive_until(ws, "finish")


def test_tool_answer_for_a_server_tool_is_refused(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws)["data"]["sessionId"]
        request = approval_of(ask(ws, PAY))
        ws.send_text(
            json.dumps({"type": "tool_result", "toolCallId": request["toolCallId"], "output": {}})
        )
        assert "runs on the server" in receive_until(ws, "error")[-1]["errorText"]
        assert ledger(client, session_id) == []


def test_weather_runs_on_the_server_without_approval(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(json.dumps({"type": "text", "text": "what is the weather in Tokyo?"}))
        turn = receive_until(ws, "finish")
    kinds = [m["type"] for m in turn]
    assert "tool-approval-request" not in kinds
    output = next(m for m in turn if m["type"] == "tool-output-available")["output"]
    assert output == {
        "location": "Tokyo",
        "temperatureC": 18,
        "condition": "partly cloudy",
        "humidity": 62,
    }


def test_session_lists_the_tools_and_where_they_run(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        tools = {t["name"]: t for t in start(ws)["data"]["tools"]}
    assert tools["process_payment"] == {
        "name": "process_payment",
        "approval": True,
        "runsIn": "server",
    }
    assert tools["change_bgm"] == {"name": "change_bgm", "approval": False, "runsIn": "browser"}
    assert tools["get_location"] == {"name": "get_location", "approval": True, "runsIn": "browser"}
    assert tools["get_weather"] == {"name": "get_weather", "approval": False, "runsIn": "server"}


# ---------------------------------------------------------------- AI SDK `message`


def _chat(ws: Any, messages: list[dict[str, Any]], **extra: Any) -> None:
    ws.send_text(json.dumps({"type": "message", "messages": messages, **extra}))


def test_ai_sdk_message_turns_and_approvals_from_the_resubmitted_history(
    client: TestClient,
) -> None:
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": PAY}]}
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws)["data"]["sessionId"]
        _chat(ws, [user], trigger="submit-message")
        asked = receive_until(ws, "finish-step")
        call = next(m for m in asked if m["type"] == "tool-input-available")
        request = approval_of(asked)
        part = {
            "type": "tool-process_payment",
            "toolCallId": call["toolCallId"],
            "state": "approval-responded",
            "input": call["input"],
            "approval": {"id": request["approvalId"], "approved": True, "reason": "ok"},
        }
        assistant = {"id": asked[0]["messageId"], "role": "assistant", "parts": [part]}
        _chat(ws, [user, assistant], trigger="submit-message", messageId=assistant["id"])
        rest = receive_until(ws, "finish")
        assert next(m for m in rest if m["type"] == "tool-output-available")["output"]["success"]
        # The whole history again, with a new user turn: the old approval is
        # not applied twice and only the new text reaches the model.
        done = {**part, "state": "output-available", "output": {"success": True}}
        assistant["parts"] = [done]
        again = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "thanks"}]}
        _chat(ws, [user, assistant, again], trigger="submit-message")
        turn = receive_until(ws, "finish")
        assert next(m for m in turn if m["type"] == "text-delta")["delta"].startswith(
            "You said: thanks"
        )
    assert len(ledger(client, session_id)) == 1


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"type": "message"}, '"messages" array'),
        ({"type": "message", "messages": []}, '"messages" array'),
        ({"type": "message", "messages": ["hi"]}, "each message to be an object"),
        ({"type": "message", "messages": [{"role": "user"}]}, '"parts" array'),
        ({"type": "message", "messages": [{"role": "system", "parts": []}]}, "role must be"),
        ({"type": "message", "messages": [{"role": "user", "parts": []}]}, "no text and no image"),
        (
            {"type": "message", "messages": [{"role": "user", "parts": [{"type": "text"}]}]},
            'string "text"',
        ),
        (
            {
                "type": "message",
                "messages": [
                    {
                        "role": "user",
                        "parts": [{"type": "file", "mediaType": "text/plain", "url": ""}],
                    }
                ],
            },
            "mediaType must be one of",
        ),
        (
            {
                "type": "message",
                "messages": [
                    {
                        "role": "user",
                        "parts": [{"type": "file", "mediaType": "image/png", "url": "http://x"}],
                    }
                ],
            },
            "data URL",
        ),
        (
            {"type": "message", "messages": [{"role": "user", "parts": [{}]} for _ in range(2001)]},
            "exceeds the limit",
        ),
    ],
)
def test_malformed_ai_sdk_messages(
    client: TestClient, message: dict[str, Any], expected: str
) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(json.dumps(message))
        assert expected in receive_until(ws, "error")[-1]["errorText"]


def test_unknown_ids_in_a_resubmitted_history_are_ignored(client: TestClient) -> None:
    stale = {
        "type": "tool-process_payment",
        "toolCallId": "adk-gone",
        "state": "approval-responded",
        "input": {},
        "approval": {"id": "apr_gone", "approved": True},
    }
    with client.websocket_connect("/ws") as ws:
        start(ws)
        _chat(ws, [{"id": "a", "role": "assistant", "parts": [stale]}])
        ws.send_text(json.dumps({"type": "text", "text": "next"}))
        turn = receive_until(ws, "finish")
        assert "error" not in [m["type"] for m in turn]


def test_closing_the_socket_while_an_approval_is_open_is_clean(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ask(ws, PAY)
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(json.dumps({"type": "text", "text": "hello"}))
        assert receive_until(ws, "finish")
    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/ws") as ws:
        ws.send_text("not json")
        ws.receive_json()
