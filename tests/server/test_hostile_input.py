"""Hostile input on every surface (issue 28, items 3, 5, 7 and 8): state a
client may not write, bodies that never come, non-JSON numbers, and REST
bodies that used to get a 500.

Real app, real SQLite session store, the offline model; the body timeouts
on real uvicorn over raw sockets. Every frame and SSE event the server
sends is read with a strict JSON parser (a browser's ``JSON.parse``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import logging
import socket
import threading
import time
import types
from collections.abc import Iterator
from typing import Any

import pytest
from google.adk.events import Event
from server_helpers import start, uvicorn_thread
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from audiocore_server import Settings, create_app
from audiocore_server.http import session_ops as store_ops
from audiocore_server.live import run_live as adk_live
from audiocore_server.storage.session_access import build_session_service
from audiocore_server.storage.users import CHAT_USER_ID, USER_ID
from audiocore_server.wire import chunks, fields, large_json, protocol
from audiocore_server.wire.adk_json import encode_event
from audiocore_server.wire.http_body import HttpError

BASE = "/apps/audiocore/users/u1/sessions"


def _reject(token: str) -> Any:
    raise AssertionError(f"non-JSON constant {token} sent to a client")


def strict(text: str) -> Any:
    return json.loads(text, parse_constant=_reject)


def strict_until(ws: Any, kind: str, limit: int = 2000) -> list[dict[str, Any]]:
    """Frames up to and including the first of type ``kind``, parsed strictly."""
    seen = []
    for _ in range(limit):
        message = strict(ws.receive_text())
        seen.append(message)
        if message["type"] == kind:
            return seen
    raise AssertionError(f"no {kind!r} in {limit} messages")


def sse_events(body: str) -> list[dict[str, Any]]:
    assert body.endswith("data: [DONE]\n\n"), body[-200:]
    events = body.split("\n\n")[:-2]
    assert all(e.startswith("data: ") for e in events), events
    return [strict(e[len("data: ") :]) for e in events]


def session_state(client: TestClient, user: str, session_id: str) -> dict[str, Any]:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]

    async def read() -> dict[str, Any]:
        session = await runtime.sessions.service.get_session(
            app_name=runtime.settings.app_name, user_id=user, session_id=session_id
        )
        return dict(session.state)

    return client.portal.call(read)  # type: ignore[union-attr,no-any-return]


# ---------------------------------------------------------------- state a client cannot write


FORBIDDEN_KEYS = [
    ("app:theme", "'app:' state is shared by every user's sessions"),
    ("task_owner", "the server's own"),
    ("ledger", "the server's own"),
]


@pytest.mark.parametrize(("key", "why"), FORBIDDEN_KEYS)
def test_rest_create_refuses_state_a_client_may_not_write(
    client: TestClient, key: str, why: str
) -> None:
    created = client.post(BASE, json={"sessionId": "s1", "state": {"ok": 1, key: "x"}})
    assert created.status_code == 422
    assert created.json()["detail"] == f"state: key {key!r} not allowed: {why}"
    by_path = client.post(f"{BASE}/s2", json={key: "x"})
    assert by_path.status_code == 422 and repr(key) in by_path.json()["detail"]
    # Nothing was created: not the sessions, not the app's state.
    assert client.get(BASE).json() == []
    assert client.post(BASE, json={"sessionId": "s1"}).json()["state"] == {}


@pytest.mark.parametrize(("key", "why"), FORBIDDEN_KEYS)
def test_rest_patch_refuses_state_a_client_may_not_write(
    client: TestClient, key: str, why: str
) -> None:
    assert client.post(BASE, json={"sessionId": "s1"}).status_code == 200
    patched = client.patch(f"{BASE}/s1", json={"stateDelta": {key: "x"}})
    assert patched.status_code == 422
    assert patched.json()["detail"] == f"stateDelta: key {key!r} not allowed: {why}"
    assert key not in client.get(f"{BASE}/s1").json()["state"]
    other = client.post("/apps/audiocore/users/u2/sessions", json={"sessionId": "s9"})
    assert other.json()["state"] == {}  # no app: state reached another user


def test_user_and_temp_state_are_the_clients_own(client: TestClient) -> None:
    """``user:`` is shared by one user's sessions (the user the client names);
    ``temp:`` is never stored: both allowed, as ADK allows them."""
    created = client.post(BASE, json={"sessionId": "s1", "state": {"user:lang": "fr"}})
    assert created.status_code == 200, created.text
    assert client.patch(f"{BASE}/s1", json={"stateDelta": {"temp:x": 1}}).status_code == 200
    assert client.post(BASE, json={"sessionId": "s2"}).json()["state"] == {"user:lang": "fr"}
    elsewhere = client.post("/apps/audiocore/users/u2/sessions", json={"sessionId": "s3"})
    assert elsewhere.json()["state"] == {}


def _run_live(session_id: str, user: str = "u1") -> str:
    return f"/run_live?app_name=audiocore&user_id={user}&session_id={session_id}"


@pytest.mark.parametrize(("key", "why"), FORBIDDEN_KEYS)
@pytest.mark.parametrize("field", ["state_delta", "stateDelta"])
def test_run_live_refuses_state_a_client_may_not_write(
    client: TestClient, key: str, why: str, field: str
) -> None:
    assert client.post(BASE, json={"sessionId": "live-1"}).status_code == 200
    with client.websocket_connect(_run_live("live-1")) as ws:
        content = {"role": "user", "parts": [{"text": "hi"}]}
        ws.send_text(json.dumps({"content": content, field: {key: "someone-else"}}))
        error = strict(ws.receive_text())
        assert error["errorCode"] == "INVALID_REQUEST"
        assert error["errorMessage"] == f"state_delta: key {key!r} not allowed: {why}"
        # The reader goes on.
        ws.send_text(json.dumps({"content": {"role": "user", "parts": [{"text": "after"}]}}))
        events = [strict(ws.receive_text())]
        while not events[-1].get("turnComplete"):
            events.append(strict(ws.receive_text()))
    said = [p.get("text", "") for e in events for p in e.get("content", {}).get("parts", [])]
    assert any("You said: after" in text for text in said), said
    assert key not in session_state(client, "u1", "live-1")


@pytest.mark.parametrize("user", sorted({USER_ID, CHAT_USER_ID}))
def test_run_live_refuses_the_reserved_users(settings: Settings, user: str) -> None:
    with pytest.raises(ValueError, match=f"user_id: not allowed: '{user}'"):
        adk_live.parse_query({"user_id": [user], "session_id": ["s"]}, settings)


def test_run_live_refuses_the_chat_users_sessions(client: TestClient) -> None:
    """The HTTP chat's sessions (user ``chat``) are capabilities: /run_live
    may not open one, even knowing its id."""
    said = [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]
    body = {"id": "chat-x", "messages": said, "trigger": "submit-message"}
    sse_events(client.post("/api/chat", json=body).text)
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        client.websocket_connect(_run_live("chat-x", CHAT_USER_ID)) as ws,
    ):
        ws.send_text(json.dumps({"close": True}))  # were it open: end it
        while True:
            ws.receive_text()
    assert (refused.value.code, refused.value.reason) == (1008, "user_id: not allowed: 'chat'")


# ---------------------------------------------------------------- bodies that never come


@pytest.fixture
def body_timeout_settings(settings: Settings) -> Settings:
    return dataclasses.replace(settings, body_timeout_s=0.5, allowed_hosts=("127.0.0.1",))


@pytest.fixture
def http_server(body_timeout_settings: Settings) -> Iterator[tuple[str, int]]:
    """The app on real uvicorn, its body timeout 0.5 s."""
    app = create_app(body_timeout_settings)
    with uvicorn_thread(app, log_level="warning") as address:
        yield address


def _head(path: str, declared: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared}\r\n\r\n"
    ).encode()


@pytest.mark.parametrize("path", ["/api/chat", "/stream", BASE, f"{BASE}/s1"])
def test_a_body_that_never_comes_gets_408(http_server: tuple[str, int], path: str) -> None:
    with socket.create_connection(http_server) as conn:
        conn.settimeout(10)  # the response, not a sleep, ends the wait
        began = time.monotonic()
        conn.sendall(_head(path, 100) + b'{"id": ')  # then nothing
        answer = conn.recv(65536)
        answered = time.monotonic() - began
        while more := conn.recv(65536):  # then the server closes the socket
            answer += more
        closed = time.monotonic() - began
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"not received in full within 0.5 s" in answer
    # At once: not after uvicorn's keep-alive timeout (5 s) on top.
    assert answered < 4 and closed < 4, (answered, closed)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.aborted = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if "went away during its body" in record.getMessage():
            self.aborted.set()


@pytest.fixture
def server_log() -> Iterator[_Records]:
    handler = _Records()
    root = logging.getLogger()
    body_log = logging.getLogger("audiocore_server.wire.http_body")
    level = body_log.level
    body_log.setLevel(logging.INFO)
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        body_log.setLevel(level)


@pytest.mark.parametrize("path", ["/api/chat", BASE])
def test_an_aborted_body_is_one_line_not_a_traceback(
    http_server: tuple[str, int], server_log: _Records, path: str
) -> None:
    with socket.create_connection(http_server) as conn:
        conn.sendall(_head(path, 1000) + b'{"id": "abc", ')
    assert server_log.aborted.wait(10), [r.getMessage() for r in server_log.records]
    # A request after it is answered, and the aborted one left no traceback.
    with socket.create_connection(http_server) as conn:
        conn.settimeout(10)
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert conn.recv(65536).startswith(b"HTTP/1.1 200")
    assert [r for r in server_log.records if r.exc_info or r.levelno >= logging.ERROR] == []
    assert sum("went away" in r.getMessage() for r in server_log.records) == 1


def test_the_body_timeout_is_a_setting() -> None:
    assert Settings.from_env({"AUDIOCORE_BODY_TIMEOUT_S": "2.5"}).body_timeout_s == 2.5
    assert "body_timeout_s: expected more than 0, got 0" in Settings(body_timeout_s=0).problems()


# ---------------------------------------------------------------- strict JSON


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused_as_input(constant: str) -> None:
    with pytest.raises(fields.InputError, match=f"expected finite numbers, got {constant}") as e:
        protocol.load_json(f'{{"type": "ping", "timestamp": {constant}}}', fields.Limits())
    assert not isinstance(e.value, protocol.UnparsableJson)  # an error chunk, not a close


def _browser_tool_asked(ws: Any) -> dict[str, Any]:
    ws.send_text(json.dumps({"type": "text", "text": "where am I"}))
    request = next(
        m for m in strict_until(ws, "finish-step") if m["type"] == "tool-approval-request"
    )
    ws.send_text(
        json.dumps({"type": "tool_approval", "approvalId": request["approvalId"], "approved": True})
    )
    run = strict_until(ws, "finish-step")
    return next(m for m in run if m["type"] == "tool-input-available")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_browser_tool_result_with_nan_on_ws(client: TestClient, constant: str) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        run = _browser_tool_asked(ws)
        call_id = run["toolCallId"]
        ws.send_text(
            f'{{"type": "tool_result", "toolCallId": "{call_id}", '
            f'"output": {{"latitude": {constant}, "longitude": 2.5}}}}'
        )
        error = strict(ws.receive_text())
        assert error["type"] == "error"
        assert f"expected finite numbers, got {constant}" in error["errorText"]
        output = {"latitude": 1.5, "longitude": 2.5}
        ws.send_text(json.dumps({"type": "tool_result", "toolCallId": call_id, "output": output}))
        rest = strict_until(ws, "finish")
    assert next(m for m in rest if m["type"] == "tool-output-available")["output"] == output


def test_a_browser_tool_result_with_nan_over_http_chat(client: TestClient) -> None:
    def post(messages: list[dict[str, Any]], raw: str | None = None, **extra: Any) -> Any:
        body = {"id": "chat-nan", "messages": messages, "trigger": "submit-message", **extra}
        content = json.dumps(body) if raw is None else raw
        return client.post(
            "/api/chat", content=content, headers={"content-type": "application/json"}
        )

    asked_for = [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "where am I"}]}]
    first = sse_events(post(asked_for).text)
    call = next(c for c in first if c["type"] == "tool-input-available")
    request = next(c for c in first if c["type"] == "tool-approval-request")
    part: dict[str, Any] = {
        "type": f"tool-{call['toolName']}",
        "toolCallId": call["toolCallId"],
        "state": "approval-responded",
        "input": call["input"],
        "approval": {"id": request["approvalId"], "approved": True},
    }
    history = [*asked_for, {"id": first[0]["messageId"], "role": "assistant", "parts": [part]}]
    sse_events(post(history, messageId=first[0]["messageId"]).text)
    part["state"] = "output-available"
    part["output"] = {"latitude": 1.5, "longitude": 2.5}
    body = json.dumps({"id": "chat-nan", "messages": history, "trigger": "submit-message"}).replace(
        '"latitude": 1.5', '"latitude": NaN'
    )
    assert "NaN" in body
    refused = post([], raw=body)
    assert refused.status_code == 400
    assert "expected finite numbers, got NaN" in refused.text
    done = sse_events(post(history, messageId=first[0]["messageId"]).text)
    output = next(c for c in done if c["type"] == "tool-output-available")
    assert output["output"] == {"latitude": 1.5, "longitude": 2.5}


def test_non_finite_numbers_that_reach_the_wire_are_sent_as_null(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """From a server tool's own result or the model, not a client: sent as
    null (and logged), never as a bare NaN."""
    output = {"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": "NaN"}
    with caplog.at_level(logging.WARNING, logger="audiocore_server.wire.strict_json"):
        frame = strict(chunks.encode(chunks.ToolOutput("call_1", output)))
    assert frame["output"] == {"a": None, "b": [None, None, 1.5], "c": "NaN"}
    assert "sent as null" in caplog.text
    assert strict(encode_event({"x": float("nan"), "y": 2.0})) == {"x": None, "y": 2.0}


def test_a_non_finite_number_in_a_sessions_state_reads_as_null(client: TestClient) -> None:
    """Put there by the server itself, never by a client: the session still
    reads, the number as null (pydantic's JSON mode writes it so)."""
    runtime = client.app.state.runtime  # type: ignore[attr-defined]

    async def write() -> None:
        await runtime.sessions.service.create_session(
            app_name="audiocore", user_id="u1", session_id="s1", state={"x": float("nan")}
        )

    client.portal.call(write)  # type: ignore[union-attr]
    read = client.get(f"{BASE}/s1")
    assert read.status_code == 200 and strict(read.text)["state"]["x"] is None
    listed = client.get(BASE)
    assert listed.status_code == 200 and strict(listed.text)[0]["state"]["x"] is None


# ---------------------------------------------------------------- 4xx, never 500


def _event(event_id: str, **extra: Any) -> dict[str, Any]:
    content = {"role": "user", "parts": [{"text": "hi"}]}
    return {"id": event_id, "author": "user", "content": content, **extra}


@pytest.fixture
def lenient(settings: Settings) -> Iterator[TestClient]:
    """A client that sees the server's 500 as a response, as a real one would."""
    with TestClient(create_app(settings), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        (
            {"events": [_event("e1"), _event("e2"), _event("e1")]},
            422,
            "events[2].id: 'e1' is already events[0]'s",
        ),
        ({"events": [_event("x" * 129)]}, 422, "events[0].id: expected at most 128 characters"),
        ({"events": [_event(5)]}, 422, "events[0].id: Input should be a valid string"),
        ({"events": [5]}, 422, "events[0]: Input should be a valid dictionary"),
        ({"events": {"a": 1}}, 422, "events: expected an array"),
        (
            {"events": [_event("e1", invocationId="i" * 257)]},
            422,
            "events[0].invocationId: expected at most 256 characters",
        ),
        (
            {"events": [_event("e1", timestamp=1e300)]},
            422,
            "events[0].timestamp: expected seconds from 0 to 253402300799",
        ),
        (
            {"events": [_event("e1", timestamp=-5)]},
            422,
            "events[0].timestamp: expected seconds from 0 to",
        ),
        ({"state": [1]}, 422, "state: expected an object"),
        ({"sessionId": 7}, 422, "sessionId: expected a string"),
        ({"sessionId": "a b"}, 400, "Invalid session id 'a b'"),
    ],
)
def test_a_malformed_create_is_4xx_and_creates_nothing(
    lenient: TestClient, body: dict[str, Any], status: int, detail: str
) -> None:
    answer = lenient.post(BASE, json={"sessionId": "s1", **body})
    assert answer.status_code == status, answer.text
    assert answer.json()["detail"].startswith(detail), answer.json()
    assert lenient.get(BASE).json() == []
    retried = lenient.post(BASE, json={"sessionId": "s1", "events": [_event("e1")]})
    assert retried.status_code == 200 and len(retried.json()["events"]) == 1


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_in_state_or_state_delta_is_400(lenient: TestClient, constant: str) -> None:
    created = lenient.post(BASE, content=f'{{"sessionId": "s1", "state": {{"x": {constant}}}}}')
    assert created.status_code == 400
    assert f"expected finite numbers, got {constant}" in created.json()["detail"]
    assert lenient.post(BASE, json={"sessionId": "s1"}).status_code == 200
    patched = lenient.patch(f"{BASE}/s1", content=f'{{"stateDelta": {{"x": {constant}}}}}')
    assert patched.status_code == 400
    by_path = lenient.post(f"{BASE}/s2", content=f'{{"x": [{constant}]}}')
    assert by_path.status_code == 400
    # The session is untouched and later writes work.
    assert lenient.patch(f"{BASE}/s1", json={"stateDelta": {"x": 1}}).status_code == 200
    assert lenient.get(f"{BASE}/s1").json()["state"] == {"x": 1}


@pytest.mark.parametrize(
    "body",
    [[], "x", 5, {"stateDelta": []}, {"stateDelta": "x"}, {"state_delta": 1}, {}],
)
def test_a_malformed_patch_is_422(lenient: TestClient, body: Any) -> None:
    assert lenient.post(BASE, json={"sessionId": "s1"}).status_code == 200
    answer = lenient.patch(f"{BASE}/s1", json=body)
    assert answer.status_code == 422, answer.text


def test_a_create_whose_events_fail_to_store_leaves_no_session(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the store refuses: the session is deleted, so a retry works.
    (The operation the store worker runs, on a service that fails.)"""
    service = build_session_service(settings)
    original = service.append_event
    calls = 0

    async def failing_second(session: Any, event: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("the store refused it")
        return await original(session, event)

    body = json.dumps({"sessionId": "s1", "events": [_event("e1"), _event("e2")]}).encode()
    app = settings.app_name

    async def scenario() -> None:
        monkeypatch.setattr(service, "append_event", failing_second)
        with pytest.raises(RuntimeError, match="the store refused it"):
            await store_ops.create(service, 10, app, "alice", None, body)
        with pytest.raises(HttpError, match="Session not found"):
            await store_ops.get(service, app, "alice", "s1")
        monkeypatch.setattr(service, "append_event", original)
        retried = await store_ops.create(service, 10, app, "alice", None, body)
        assert retried.status == 200 and len(json.loads(retried.body)["events"]) == 2

    asyncio.run(scenario())


def test_an_api_user_holds_at_most_max_api_sessions_per_user(settings: Settings) -> None:
    """10,000 sessions at 600 a second once went through: a user now has a quota."""
    quota = dataclasses.replace(settings, max_api_sessions_per_user=3)
    with TestClient(create_app(quota)) as client:
        base = f"/apps/{settings.app_name}/users/alice/sessions"
        assert [client.post(base, json={}).status_code for _ in range(3)] == [200] * 3
        refused = client.post(base, json={})
        assert refused.status_code == 429 and "at most 3" in refused.json()["detail"]
        assert client.post(f"{base}/named", json={}).status_code == 429  # by path too
        assert (
            client.post(f"/apps/{settings.app_name}/users/bob/sessions", json={}).status_code == 200
        )
        first = client.get(base).json()[0]["id"]
        assert client.delete(f"{base}/{first}").status_code == 200
        assert client.post(base, json={}).status_code == 200  # room again


def test_a_large_body_is_read_in_pieces_and_checked_the_same(lenient: TestClient) -> None:
    """Past 64 kB a body is parsed in a thread, in pieces (large_json): the
    same session comes back, and bad JSON gets the same 400."""
    events = [_event(f"e{i}", timestamp=1.0 + i) for i in range(600)]
    for i, event in enumerate(events):
        event["content"]["parts"][0]["text"] = f"turn {i} " * 20
    body = json.dumps({"sessionId": "big", "events": events})
    assert len(body) > large_json.SMALL
    created = lenient.post(BASE, content=body, headers={"content-type": "application/json"})
    assert created.status_code == 200
    assert [e["id"] for e in created.json()["events"]] == [e["id"] for e in events]
    assert lenient.get(f"{BASE}/big").json() == created.json()
    for broken, detail in (
        (body[:-1], "request body: expected JSON"),
        (body.replace('"timestamp": 2.0', '"timestamp": NaN'), "request body: expected finite"),
        ('{"a": ' + "[" * 100 + "]" * 100 + ', "pad": "' + "x" * 70_000 + '"}', "request body"),
    ):
        refused = lenient.post(BASE, content=broken, headers={"content-type": "application/json"})
        assert refused.status_code == 400 and refused.json()["detail"].startswith(detail)
    invalid = b'{"pad": "' + b"\xff" * 70_000 + b'"}'
    refused = lenient.post(BASE, content=invalid, headers={"content-type": "application/json"})
    assert refused.status_code == 400


# ---------------------------------------------------------- JSON of any size


def test_a_frame_of_too_many_containers_is_refused_and_the_socket_goes_on(
    client: TestClient,
) -> None:
    """4 MB of tiny objects once held the loop for two seconds: past
    MAX_JSON_CONTAINERS a frame is refused before it is parsed; a large
    frame within the bound (parsed in a thread, in pieces) is answered."""
    many = ",".join(['{"a":[1]}'] * (protocol.MAX_JSON_CONTAINERS // 2 + 1))
    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        ws.send_text('{"type": "text", "text": "hi", "pad": [' + many + "]}")
        error = strict(ws.receive_text())
        assert error["type"] == "error"
        assert f"exceeds the limit of {protocol.MAX_JSON_CONTAINERS}" in error["errorText"]
        # 100 kB of whitespace in a text turn: a large frame, parsed off the
        # loop, answered as a small one is.
        pad = " " * 100_000
        assert len(pad) > large_json.SMALL
        ws.send_text('{"type": "text",' + pad + '"text": "still here"}')
        got = strict_until(ws, "finish")
    assert not [m for m in got if m["type"] == "error"]


def test_a_chat_message_of_too_many_parts_or_containers_is_refused(client: TestClient) -> None:
    """A chat message with 20,000 image parts once held the loop 650 ms."""
    image = {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,iVBORw0K"}
    parts = [{"type": "text", "text": "hi"}] + [image] * fields.Limits.max_message_parts
    body = {"id": "c-parts", "messages": [{"id": "m1", "role": "user", "parts": parts}]}
    refused = client.post("/api/chat", json=body)
    assert refused.status_code == 400
    assert f"parts exceeds the limit of {fields.Limits.max_message_parts}" in refused.text
    body["messages"][0]["parts"] = [{"type": "text", "text": "hi"}] + [image] * 20_000
    refused = client.post("/api/chat", json=body)
    assert refused.status_code == 413 and "JSON objects and arrays" in refused.text


def test_braces_inside_strings_count_as_containers(client: TestClient) -> None:
    """The bound counts ``{`` and ``[`` bytes without parsing (a deliberate,
    cheap over-count): a string of braces counts as that many objects, on a
    socket and in a chat body alike; one brace fewer is accepted. The REST
    counts nothing: its JSON is parsed in the store worker's process."""
    limit = protocol.MAX_JSON_CONTAINERS
    frame_own = 1  # the frame's object
    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        ws.send_text(
            json.dumps({"type": "text", "text": "hi", "pad": "{" * (limit - frame_own + 1)})
        )
        error = strict(ws.receive_text())
        assert error["type"] == "error"
        assert error["errorText"].startswith(f"message: about {limit + 1} JSON objects")
        ws.send_text(json.dumps({"type": "text", "text": "hi", "pad": "{" * (limit - frame_own)}))
        got = strict_until(ws, "finish")
    assert not [m for m in got if m["type"] == "error"]
    # The body, its messages, the message, its parts, the part.
    body_own = 5
    for braces, status in ((limit - body_own + 1, 413), (limit - body_own, 200)):
        message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
        body = {"id": f"c-braces-{status}", "messages": [message], "pad": "{" * braces}
        answer = client.post("/api/chat", json=body)
        assert answer.status_code == status, answer.text
        if status == 413:
            assert f"about {limit + 1} JSON objects and arrays" in answer.text
        else:
            assert not [e for e in sse_events(answer.text) if e["type"] == "error"]
    state = {"pad": "{" * (2 * limit)}
    created = client.post(BASE, json={"sessionId": "braces", "state": state})
    assert created.status_code == 200 and created.json()["state"] == state


def test_idle_api_sessions_expire_and_the_servers_own_are_left(settings: Settings) -> None:
    """10,000 API sessions once stayed for ever: a REST user's session idle
    past ``api_session_ttl_s`` is deleted (the operation the store worker
    runs every hour); the server's own users' sessions are not its to judge."""
    service = build_session_service(settings)
    app = settings.app_name

    async def scenario() -> None:
        old = await service.create_session(app_name=app, user_id="alice", session_id="old")
        await service.create_session(app_name=app, user_id=USER_ID, session_id="page")
        fresh = await service.create_session(app_name=app, user_id="bob", session_id="fresh")
        later = old.last_update_time + 1000.0  # bob spoke 1000 s after alice's last word
        await service.append_event(fresh, Event(author="user", timestamp=later))
        done = await store_ops.expire(service, app, 500.0, later + 10.0)
        assert json.loads(done.body) == {"deleted": 1}
        kept = await service.list_sessions(app_name=app, user_id=None)
        assert sorted((s.user_id, s.id) for s in kept.sessions) == [
            ("bob", "fresh"),
            (USER_ID, "page"),
        ]
        again = await store_ops.expire(service, app, 500.0, later + 10.0)
        assert json.loads(again.body) == {"deleted": 0}

    asyncio.run(scenario())


def test_the_api_session_ttl_is_a_setting() -> None:
    assert Settings(api_session_ttl_s=0).problems() == []
    assert Settings(api_session_ttl_s=-1).problems() == [
        "api_session_ttl_s: expected 0 (never) or more, got -1"
    ]


def test_a_refused_large_frame_is_freed_at_once(client: TestClient) -> None:
    """A mistake found in a thread once came back as an exception through a
    future, in a reference cycle with the frame that held the message: a
    flood of 4 MB frames held 900 MB until the collector ran. With the
    collector off, no refused frame may stay alive."""
    many = ",".join(['{"a":[1]}'] * (protocol.MAX_JSON_CONTAINERS // 2 + 1))
    frame = '{"type": "text", "text": "hi", "pad": [' + many + "]}"
    assert len(frame) > large_json.SMALL

    def alive() -> int:
        """Frames (of functions that ran) still holding a large text."""
        return sum(
            1
            for o in gc.get_objects()
            if isinstance(o, types.FrameType)
            and any(isinstance(v, str) and len(v) > 100_000 for v in o.f_locals.values())
        )

    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        gc.collect()
        gc.disable()
        try:
            for _ in range(3):
                ws.send_text(frame)
                assert strict(ws.receive_text())["type"] == "error"
            assert alive() == 0
        finally:
            gc.enable()
