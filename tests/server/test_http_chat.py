"""``POST /api/chat`` and ``/stream``: AI SDK's HTTP UI message stream on the
real runner, the real session store and the offline model's text path.

The SSE framing is checked byte for byte; tools go through AI SDK's HTTP
round trip (the answers arrive in the next request's messages). The real
``ai`` package's ``DefaultChatTransport`` drives the same endpoint in
tests/web/js (run from pytest).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from dataclasses import replace
from typing import Any

import pytest
from starlette.testclient import TestClient

from audiocore_server import Settings, create_app
from audiocore_server.http import chat as http_chat
from audiocore_server.storage.users import CHAT_USER_ID
from audiocore_server.wire.chunks import client_executes

HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}


def user(text: str, msg_id: str = "u1") -> dict[str, Any]:
    return {"id": msg_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def post(client: TestClient, chat_id: str, messages: list[dict[str, Any]], **extra: Any) -> str:
    body = {"id": chat_id, "messages": messages, "trigger": "submit-message", **extra}
    response = client.post("/api/chat", json=body)
    assert response.status_code == 200, response.text
    for key, value in HEADERS.items():
        assert response.headers[key].startswith(value), key
    return response.text


def chunks(body: str) -> list[dict[str, Any]]:
    """Parse SSE exactly: ``data: <json>\\n\\n`` events, ``data: [DONE]`` last."""
    assert body.endswith("data: [DONE]\n\n"), body[-200:]
    events = body.split("\n\n")
    assert events[-1] == ""
    out = []
    for event in events[:-2]:
        assert event.startswith("data: ") and "\n" not in event, event
        out.append(json.loads(event[len("data: ") :]))
    assert events[-2] == "data: [DONE]"
    return out


def ledger(client: TestClient, chat_id: str) -> list[dict[str, Any]]:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]

    async def read() -> list[dict[str, Any]]:
        session = await runtime.sessions.service.get_session(
            app_name=runtime.settings.app_name, user_id=CHAT_USER_ID, session_id=chat_id
        )
        return list(session.state.get("ledger", []))

    return client.portal.call(read)  # type: ignore[union-attr]


def test_text_turn_framing_and_chunks(client: TestClient) -> None:
    body = post(client, "chat-1", [user("hello")])
    got = chunks(body)
    assert [c["type"] for c in got] == ["start", "text-start", "text-delta", "text-end", "finish"]
    assert got[2]["delta"] == "You said: hello"
    assert got[-1] == {
        "type": "finish",
        "finishReason": "stop",
        # Usage as the offline model counts it: a word a token ("hello";
        # "You said: hello"); no audio over HTTP.
        "messageMetadata": {
            "model": "offline",
            "usage": {"promptTokens": 1, "completionTokens": 3, "totalTokens": 4},
            "modelVersion": "offline-1",
        },
    }
    # Compact JSON, one event per blank-line-separated block.
    assert body.startswith('data: {"type":"start","messageId":"msg_')


def test_the_chat_id_resumes_the_session(client: TestClient) -> None:
    post(client, "chat-2", [user("first")])
    later = chunks(post(client, "chat-2", [user("first"), user("second", "u2")]))
    delta = next(c for c in later if c["type"] == "text-delta")["delta"]
    assert delta == "You said: second (1 earlier turns in this session)"


def _approval_round(
    client: TestClient, chat_id: str, text: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    first = chunks(post(client, chat_id, [user(text)]))
    kinds = [c["type"] for c in first]
    assert kinds[-4:] == ["tool-input-available", "tool-approval-request", "finish-step", "finish"]
    assert first[-1]["finishReason"] == "tool-calls"
    call = next(c for c in first if c["type"] == "tool-input-available")
    request = next(c for c in first if c["type"] == "tool-approval-request")
    assert request["approvalId"] == "apr_" + call["toolCallId"]
    part = {
        "type": f"tool-{call['toolName']}",
        "toolCallId": call["toolCallId"],
        "state": "approval-requested",
        "input": call["input"],
        "approval": {"id": request["approvalId"]},
    }
    assistant = {"id": first[0]["messageId"], "role": "assistant", "parts": [part]}
    return [user(text), assistant], part


def test_approved_payment_over_http_runs_once(client: TestClient) -> None:
    history, part = _approval_round(client, "chat-3", "pay 5 EUR to Alice")
    part["state"] = "approval-responded"
    part["approval"] = {**part["approval"], "approved": True, "reason": "ok"}
    second = chunks(post(client, "chat-3", history, messageId=history[-1]["id"]))
    assert second[0] == {"type": "start", "messageId": history[-1]["id"]}  # the same message
    output = next(c for c in second if c["type"] == "tool-output-available")
    assert output["output"]["success"] is True and second[-1]["finishReason"] == "stop"
    assert (
        "process_payment returned" in next(c for c in second if c["type"] == "text-delta")["delta"]
    )
    assert len(ledger(client, "chat-3")) == 1
    # The same history again: the call is answered already; nothing runs twice.
    part["state"] = "output-available"
    part["output"] = output["output"]
    again = chunks(post(client, "chat-3", [*history, user("thanks", "u2")]))
    assert not any(c["type"] == "tool-output-available" for c in again)
    assert len(ledger(client, "chat-3")) == 1


def test_the_answer_after_a_tool_is_a_step_of_its_own(client: TestClient) -> None:
    """Regression: the continuation's answer came without ``start-step``, so
    AI SDK saw the answered call still in the last step and
    ``lastAssistantMessageIsCompleteWithToolCalls`` sent the chat again, for
    ever. Now it reads as on /ws (and as AI SDK's own server writes it)."""
    history, part = _approval_round(client, "chat-3s", "where am I")
    part["state"] = "approval-responded"
    part["approval"] = {**part["approval"], "approved": True}
    post(client, "chat-3s", history, messageId=history[-1]["id"])
    part["state"] = "output-available"
    part["output"] = {"latitude": 1.5, "longitude": 2.5}
    done = chunks(post(client, "chat-3s", history, messageId=history[-1]["id"]))
    assert [c["type"] for c in done] == [
        "start",
        "tool-output-available",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    # A new user turn without tools has no steps, as before.
    plain = chunks(post(client, "chat-3s", [*history, user("thanks", "u2")]))
    assert [c["type"] for c in plain] == ["start", "text-start", "text-delta", "text-end", "finish"]


def test_denied_payment_over_http(client: TestClient) -> None:
    history, part = _approval_round(client, "chat-4", "pay 9 USD to Bob")
    part["state"] = "approval-responded"
    part["approval"] = {**part["approval"], "approved": False}
    second = chunks(post(client, "chat-4", history, messageId=history[-1]["id"]))
    assert {"type": "tool-output-denied", "toolCallId": part["toolCallId"]} in second
    assert ledger(client, "chat-4") == []


def test_browser_tool_over_http_approval_then_output(client: TestClient) -> None:
    history, part = _approval_round(client, "chat-5", "where am I")
    part["state"] = "approval-responded"
    part["approval"] = {**part["approval"], "approved": True}
    run = chunks(post(client, "chat-5", history, messageId=history[-1]["id"]))
    assert [c["type"] for c in run] == ["start", "tool-input-available", "finish-step", "finish"]
    assert client_executes(run[1]) and run[-1]["finishReason"] == "tool-calls"
    part["state"] = "output-available"
    part["output"] = {"latitude": 1.5, "longitude": 2.5}
    done = chunks(post(client, "chat-5", history, messageId=history[-1]["id"]))
    output = next(c for c in done if c["type"] == "tool-output-available")
    assert output["output"] == {"latitude": 1.5, "longitude": 2.5}
    assert "1.5" in next(c for c in done if c["type"] == "text-delta")["delta"]


def test_weather_tool_in_one_response(client: TestClient) -> None:
    got = chunks(post(client, "chat-6", [user("weather in Berlin")]))
    kinds = [c["type"] for c in got]
    assert "tool-output-available" in kinds and kinds[-1] == "finish"
    assert got[-1]["finishReason"] == "stop"


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        ("{not json", 400, "expected JSON"),
        ("[]", 400, "JSON object"),
        ('{"messages": []}', 400, "id: expected"),
        ('{"id": "../x", "messages": []}', 400, "id: expected"),
        ('{"id": "c", "messages": []}', 400, '"messages" array'),
        ('{"id": "c", "messages": [{"role": "user", "parts": []}]}', 400, "no text"),
        ('{"id": "c", "messages": [' + "[" * 3000 + "]" * 3000 + "]}", 400, "expected JSON"),
    ],
)
def test_malformed_requests(client: TestClient, body: str, status: int, text: str) -> None:
    response = client.post("/api/chat", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status and text in response.text


def test_oversized_request_is_413(settings: Settings) -> None:
    small = replace(settings, max_http_body_bytes=2000)
    with TestClient(create_app(small)) as client:
        response = client.post("/api/chat", json={"id": "c", "messages": [user("x" * 5000)]})
        assert response.status_code == 413


def test_seed_stream_route_and_its_api_key_header(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:  # no key configured: accepted, ignored
        response = client.post(
            "/stream",
            json={"id": "seed-1", "messages": [user("hi")], "trigger": "submit-message"},
            headers={"x-api-key": "anything"},
        )
        assert response.status_code == 200 and chunks(response.text)[-1]["type"] == "finish"
    keyed = replace(settings, api_key="k1")
    with TestClient(create_app(keyed)) as client:
        body = {"id": "seed-2", "messages": [user("hi")]}
        assert client.post("/stream", json=body).status_code == 401
        ok = client.post("/stream", json=body, headers={"x-api-key": "k1"})
        assert ok.status_code == 200


def test_resume_mid_run_replays_it_from_the_first_chunk(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GET /api/chat/{id}/stream`` while a run is in progress: the same
    bytes as the run's own response, from its first chunk (AI SDK's
    ``resumeStreamIsReplay``), then 204 once it is over. The run is held
    after its first event until the resume has attached."""
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    run_async = runtime.agents.select(None).chat_runner.run_async
    holding = threading.Event()  # the run is held, registered for resuming
    attached = asyncio.Event()  # the resume follows the run

    async def held_run(**kwargs: Any) -> Any:
        first = True
        async for event in run_async(**kwargs):
            yield event
            if first:
                first = False
                holding.set()
                await attached.wait()

    follow = http_chat._Replay.follow

    def following(replay: http_chat._Replay) -> Any:
        attached.set()
        return follow(replay)

    monkeypatch.setattr(runtime.agents.select(None).chat_runner, "run_async", held_run)
    monkeypatch.setattr(http_chat._Replay, "follow", following)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        posted = pool.submit(post, client, "chat-r", [user("hello")])
        assert holding.wait(30), "the run never started"
        resumed = client.get("/api/chat/chat-r/stream")
        body = posted.result(30)
    assert resumed.status_code == 200
    for key, value in HEADERS.items():
        assert resumed.headers[key].startswith(value), key
    assert resumed.text == body
    assert [c["type"] for c in chunks(body)] == [
        "start",
        "text-start",
        "text-delta",
        "text-end",
        "finish",
    ]
    assert client.get("/api/chat/chat-r/stream").status_code == 204


def test_resume_with_no_run_in_progress_is_204(client: TestClient) -> None:
    assert client.get("/api/chat/chat-7/stream").status_code == 204
