"""Regression tests for the classes of hole found by trying the server as an
attacker and as an operator would (hosts and headers, parser limits, bursts,
connection caps, hung runs)."""

from __future__ import annotations

import json
import logging
import os
import pathlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from server_helpers import receive_until, start, uvicorn_thread
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from audiocore_server import Settings, create_app
from audiocore_server.gate.guard import SECURITY_HEADERS, host_allowed
from audiocore_server.settings import redact_url

ROOT = pathlib.Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------- hosts and headers


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost:8000", True),
        ("127.0.0.1:8000", True),
        ("[::1]:8000", True),
        ("LOCALHOST", True),
        ("rebound.attacker.example:8000", False),
        ("127.0.0.1.nip.io", False),
        ("", False),
        (None, False),
        ("app.example", True),  # the host of an allowed origin
        ("voice.internal", True),  # an allowed host
    ],
)
def test_host_allowlist(host: str | None, allowed: bool) -> None:
    settings = Settings(allowed_origins=("https://app.example",), allowed_hosts=("voice.internal",))
    assert host_allowed(host, settings) is allowed


def test_dns_rebinding_is_refused_on_http_and_websocket(settings: Settings) -> None:
    """A page whose own name was rebound to 127.0.0.1: its Origin and the Host
    agree, so the same-origin check alone lets it in."""
    evil = "http://rebound.attacker.example:8000"
    with TestClient(create_app(settings), base_url=evil) as client:
        response = client.get("/healthz", headers={"origin": evil})
        assert response.status_code == 400 and "host not allowed" in response.text
        for path in ("/ws", "/live", "/run_live?user_id=u&session_id=s"):
            with (
                pytest.raises(WebSocketDisconnect) as closed,
                client.websocket_connect(path, headers={"origin": evil}),
            ):
                pass
            assert closed.value.code == 1008


def test_the_bind_address_and_any_host_when_asked(settings: Settings) -> None:
    bound = replace(settings, host="10.1.2.3", allowed_hosts=())
    assert host_allowed("10.1.2.3:8000", bound)
    assert not host_allowed("10.1.2.4:8000", bound)
    assert host_allowed("anything", replace(settings, allowed_hosts=("*",)))


def test_the_page_has_its_security_headers(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    for name, value in SECURITY_HEADERS.items():
        assert page.headers[name] == value
    policy = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


# ---------------------------------------------------------------- connection caps


def test_connections_are_capped_per_client_with_a_clear_refusal(settings: Settings) -> None:
    capped = replace(settings, max_connections_per_client=2)
    with TestClient(create_app(capped)) as client:
        with client.websocket_connect("/ws") as one, client.websocket_connect("/ws") as two:
            start(one)
            start(two)
            with client.websocket_connect("/ws") as three:
                error = three.receive_json()
                assert error == {
                    "type": "error",
                    "errorText": "too many connections from this address; try again later",
                }
                with pytest.raises(WebSocketDisconnect) as closed:
                    three.receive_json()
                assert closed.value.code == 1013
        with client.websocket_connect("/ws") as again:  # places are given back
            start(again)


def test_connections_are_capped_in_all(settings: Settings) -> None:
    capped = replace(settings, max_connections=1)
    with TestClient(create_app(capped)) as client, client.websocket_connect("/ws") as one:
        start(one)
        with client.websocket_connect("/ws") as two:
            assert "server is full" in two.receive_json()["errorText"]


# ---------------------------------------------------------------- parser limits


@pytest.mark.parametrize("first", [True, False], ids=["before-start", "after-start"])
def test_deeply_nested_json_is_invalid_payload_not_an_internal_error(
    client: TestClient, first: bool
) -> None:
    nested = '{"type": "text", "text": "x", "a": ' + "[" * 10_000 + "]" * 10_000 + "}"
    with client.websocket_connect("/ws") as ws:
        if not first:
            start(ws)
        ws.send_text(nested)
        with pytest.raises(WebSocketDisconnect) as closed:
            while True:
                message = ws.receive_json()
                assert message["type"] in ("data-session", "error"), message
        assert closed.value.code == 1007


def test_moderately_nested_json_within_the_limit_is_fine(client: TestClient) -> None:
    nested = {"type": "tool_result", "toolCallId": "x", "output": json.loads("[" * 60 + "]" * 60)}
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(json.dumps(nested))
        assert "no pending tool call" in receive_until(ws, "error")[-1]["errorText"]


# ---------------------------------------------------------------- request heads


@pytest.fixture
def bounded_server(settings: Settings) -> Iterator[tuple[str, int]]:
    """The app on real uvicorn with the server's own options, a short header timeout."""
    from audiocore_server.__main__ import uvicorn_options

    quick = replace(settings, header_timeout_s=0.5, max_header_bytes=8192)
    options = uvicorn_options(quick, log_level="warning")
    for key in ("host", "port"):
        options.pop(key)
    with uvicorn_thread(create_app(quick), **options) as address:
        yield address


def _read_all(conn: socket.socket, timeout: float = 10.0) -> bytes:
    conn.settimeout(timeout)
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


def test_huge_header_lines_are_refused(bounded_server: tuple[str, int]) -> None:
    with socket.create_connection(bounded_server) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 20_000)
        try:
            answer = _read_all(conn)
        except ConnectionResetError:  # closed while the rest was on its way
            answer = b"HTTP/1.1 400 (reset)"
    assert answer.startswith(b"HTTP/1.1 400"), answer[:80]


def test_a_slow_request_head_is_closed(bounded_server: tuple[str, int]) -> None:
    with socket.create_connection(bounded_server) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: loc")  # and nothing more
        assert _read_all(conn) == b""  # closed by the server, no answer


def test_a_slow_head_on_a_kept_alive_connection_is_closed_too(
    bounded_server: tuple[str, int],
) -> None:
    with socket.create_connection(bounded_server) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        conn.settimeout(10)
        first = conn.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHo")
        assert _read_all(conn) == b""


def test_normal_requests_and_sockets_still_work(bounded_server: tuple[str, int]) -> None:
    with socket.create_connection(bounded_server) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        assert b'"status":"ok"' in _read_all(conn)


# ---------------------------------------------------------------- operations


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (["--port", "abc"], {}, "--port: expected an integer, got 'abc'"),
        ([], {"AUDIOCORE_PORT": "x"}, "AUDIOCORE_PORT: expected an integer, got 'x'"),
        (["--port", "70000"], {}, "port: expected 0 to 65535, got 70000"),
        (["--workers", "0"], {}, "workers: expected at least 1, got 0"),
        (["--log-level", "loud"], {}, "argument --log-level: invalid choice"),
        (["--data-dir", "/proc/no/such"], {}, "data_dir: /proc/no/such is not a writable"),
        (["--allowed-origins", "example.com"], {}, "expected http(s)://host[:port]"),
        ([], {"AUDIOCORE_API_KEY": "short"}, "api_key: expected at least 16 characters"),
    ],
)
def test_bad_settings_end_with_one_clear_line(
    tmp_path: pathlib.Path, args: list[str], env: dict[str, str], line: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "server", "--data-dir", str(tmp_path), *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert line in result.stderr.strip().splitlines()[-1], result.stderr


def test_the_database_password_never_reaches_the_log(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("sqlalchemy")
    url = "postgresql+asyncpg://voice:hunter2secret@127.0.0.1:9/voice"
    caplog.set_level(logging.DEBUG)
    failure = ""
    try:
        with TestClient(create_app(replace(settings, database_url=url))) as client:
            client.get("/healthz")
    except Exception as exc:  # no driver, or no database there: the text counts
        failure = f"{exc!r} {exc}"
    assert "voice:***@127.0.0.1:9/voice" in caplog.text
    assert "hunter2secret" not in caplog.text + failure


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+asyncpg://app:s%40cret@db:5432/v", "postgresql+asyncpg://app:***@db:5432/v"),
        ("postgresql://:pw@h/d", "postgresql://:***@h/d"),
        ("postgresql://u@h/d", "postgresql://u@h/d"),
        ("sqlite+aiosqlite:////x.db", "sqlite+aiosqlite:////x.db"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_settings_never_show_the_api_key_or_the_database_password() -> None:
    """A Settings in a log line or a failing test's report (pytest prints
    the fixtures' values) carries neither secret."""
    settings = Settings(
        database_url="postgresql+asyncpg://app:hunter2secret@db:5432/v", api_key="k3y" * 8
    )
    for shown in (repr(settings), str(settings), f"{settings}"):
        assert "hunter2secret" not in shown and "k3y" not in shown
        assert "database_url='postgresql+asyncpg://app:***@db:5432/v'" in shown
        assert "api_key='***'" in shown
    assert settings.api_key == "k3y" * 8  # the values themselves are untouched


# ---------------------------------------------------------------- bursts


def test_a_burst_of_typed_turns_is_answered_not_a_buffer_error(client: TestClient) -> None:
    """Tens of typed turns at once: every one is answered, or refused
    with one polite error while the model does not keep up; the socket lives."""
    with client.websocket_connect("/ws") as ws:
        start(ws)
        for k in range(80):  # more turns than the jitter buffer holds ends of (64)
            ws.send_text(json.dumps({"type": "text", "text": f"turn {k}"}))
        ws.send_text(json.dumps({"type": "text", "text": "still here"}))
        finishes, errors, answered = 0, [], False
        while not answered:
            message = ws.receive_json()
            if message["type"] == "finish":
                finishes += 1
            elif message["type"] == "error":
                errors.append(message["errorText"])
            elif message["type"] == "text-delta":
                answered = message["delta"].startswith("You said: still here")
        assert len(errors) <= 1  # one per overload episode
        assert all("not keeping up" in e for e in errors)
        assert finishes == 80  # every turn answered (80 < the queue bound of 100)


def test_audio_faster_than_real_time_never_drops_turn_edges_or_text(settings: Settings) -> None:
    """A flood of audio fills its own room; the turn's edges and a typed turn
    still reach the model."""
    small = replace(settings, max_pending_requests=5)
    with TestClient(create_app(small)) as client, client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        ws.send_text(json.dumps({"type": "activity_start"}))
        for _ in range(400):  # 8 s of audio at once
            ws.send_bytes(bytes(640))
        ws.send_text(json.dumps({"type": "activity_end"}))
        ws.send_text(json.dumps({"type": "text", "text": "typed after the flood"}))
        said = []
        while not any(s.startswith("You said: typed after the flood") for s in said):
            message = ws.receive_json()
            if message["type"] == "text-delta":
                said.append(message["delta"])
        kinds = [m for m in said if m.startswith("I heard")]
        assert kinds, said  # the push-to-talk turn ended and was answered


# ---------------------------------------------------------------- hung sockets


@pytest.mark.parametrize(
    "frame",
    [
        '{"type": "text", "text": "bad \\ud800 here"}',
        '{"type": "message", "messages": [{"role": "user", "parts": '
        '[{"type": "text", "text": "\\udfff"}]}]}',
        '{"type": "tool_result", "toolCallId": "x", "output": {"\\ud800": 1}}',
    ],
)
def test_text_the_model_layer_cannot_encode_is_refused_up_front(
    client: TestClient, frame: str
) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(frame)
        error = receive_until(ws, "error")[-1]
        assert "lone surrogates" in error["errorText"]
        ws.send_text(json.dumps({"type": "text", "text": "the socket lives"}))
        assert receive_until(ws, "finish")


def test_surrogates_are_refused_by_the_http_api_too(client: TestClient) -> None:
    part = '{"type": "text", "text": "\\ud800"}'
    body = '{"id": "c1", "messages": [{"role": "user", "parts": [' + part + "]}]}"
    response = client.post("/api/chat", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400 and "surrogates" in response.text
    rest = client.post(
        "/apps/audiocore/users/u1/sessions",
        content='{"state": {"k": "\\udc00"}}',
        headers={"content-type": "application/json"},
    )
    assert rest.status_code == 400


def test_a_model_connection_that_dies_on_a_send_ends_the_socket_with_an_error(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADK awaits its sending task only when the model's side ends: a send
    that raises left the run alive but deaf (no error, no close)."""
    from audiocore_server.offline.model import OfflineLiveConnection

    original = OfflineLiveConnection.send_content

    async def send_content(self: OfflineLiveConnection, content: Any) -> None:
        if any(p.text == "make the send fail" for p in content.parts or []):
            raise ConnectionResetError("the model's socket broke")
        await original(self, content)

    monkeypatch.setattr(OfflineLiveConnection, "send_content", send_content)
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(json.dumps({"type": "text", "text": "make the send fail"}))
        messages = []
        with pytest.raises(WebSocketDisconnect) as closed:
            while True:
                messages.append(ws.receive_json())
        assert closed.value.code == 1011
        (error,) = [m for m in messages if m["type"] == "error"]
        assert "ConnectionResetError" in error["errorText"]
        assert "the model's socket broke" not in error["errorText"]  # no raw text


# ---------------------------------------------------------------- operations: the database


def test_healthz_checks_the_session_database(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").json()["status"] == "ok"
        settings.session_db_path.unlink()
        gone = client.get("/healthz")
        assert gone.status_code == 503
        assert gone.json()["status"] == "unavailable" and "gone" in gone.json()["database"]


def test_healthz_reports_a_corrupt_store_and_a_socket_gets_a_clear_close(
    settings: Settings,
) -> None:
    with TestClient(create_app(settings)) as client:
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        client.portal.call(runtime.sessions.service.close)  # type: ignore[union-attr]
        settings.session_db_path.write_bytes(b"this is not a database" * 100)
        for suffix in ("-wal", "-shm"):
            settings.session_db_path.with_name(settings.session_db_path.name + suffix).unlink(
                missing_ok=True
            )
        response = client.get("/healthz")
        assert response.status_code == 503
        assert response.json()["database"] == "the session database failed: DatabaseError"
        with client.websocket_connect("/ws") as ws:
            ws.send_text(json.dumps({"type": "start"}))
            error = ws.receive_json()
            assert error["type"] == "error" and "DatabaseError" in error["errorText"]
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_json()
            assert closed.value.code == 1011


def test_a_locked_store_never_freezes_the_event_loop(settings: Settings) -> None:
    """Another process holds the SQLite file's write lock: the turn's writes
    wait asynchronously; the server keeps answering meanwhile, and the turn
    completes once the lock is gone."""
    import sqlite3

    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        start(ws)
        holder = sqlite3.connect(settings.session_db_path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the write lock, as another process would
        try:
            ws.send_text(json.dumps({"type": "text", "text": "written under a lock"}))
            # The user's turn is being persisted now (and waits); the loop is free:
            assert client.get("/list-apps").status_code == 200
        finally:
            holder.execute("COMMIT")
            holder.close()
        turn = receive_until(ws, "finish")
    assert not [m for m in turn if m["type"] == "error"]
    assert any(m.get("delta", "").startswith("You said: written under a lock") for m in turn)


def test_sessions_opened_and_never_used_expire(settings: Settings) -> None:
    import time as clock

    with TestClient(create_app(settings)) as client:
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        with client.websocket_connect("/ws") as ws:
            unused = start(ws)["data"]["sessionId"]
        with client.websocket_connect("/ws") as ws:
            used = start(ws)["data"]["sessionId"]
            ws.send_text(json.dumps({"type": "text", "text": "keep me"}))
            receive_until(ws, "finish")
        with client.websocket_connect("/ws") as ws:
            live = start(ws)["data"]["sessionId"]
            later = clock.time() + settings.unused_session_ttl_s + 1
            expired = client.portal.call(runtime.sessions.expire_unused, later)  # type: ignore[union-attr]
            assert expired == 1  # not the used one, not the live one
        now = client.portal.call(runtime.sessions.expire_unused)  # type: ignore[union-attr]
        assert now == 0  # nothing is old yet
        for session_id, kept in ((unused, False), (used, True), (live, True)):
            with client.websocket_connect("/ws") as ws:
                resumed = start(ws, sessionId=session_id)["data"]["resumed"]
                assert resumed is kept, session_id


# ---------------------------------------------------------------- session ids


@pytest.mark.parametrize(
    "variant",
    [
        lambda sid: sid + "\n",
        lambda sid: sid + " ",
        lambda sid: " " + sid,
        lambda sid: sid.swapcase(),
        lambda sid: sid + "\x00",
        lambda sid: sid[:-1] + chr(0xFF10 + int(sid[-1])) if sid[-1].isdigit() else sid + "\u200b",
    ],
    ids=["newline", "trailing-space", "leading-space", "case", "nul", "unicode"],
)
def test_an_id_that_differs_from_a_live_sessions_is_a_new_session(
    client: TestClient, variant: Any
) -> None:
    """Nothing a store or a regex might normalise away (case, white space,
    a NUL, look-alike characters) resumes a live session beside its run."""
    with client.websocket_connect("/ws") as first:
        session_id = start(first)["data"]["sessionId"]
        with client.websocket_connect("/ws") as second:
            other = start(second, sessionId=variant(session_id))
            assert other["data"]["sessionId"] != session_id and not other["data"]["resumed"]
            assert receive_until(second, "error")[-1]["errorText"].startswith("unknown sessionId")
        # The first connection was never taken over: its turn is answered.
        first.send_text(json.dumps({"type": "text", "text": "still mine"}))
        said = [m for m in receive_until(first, "finish") if m["type"] == "text-delta"]
        assert said[0]["delta"].startswith("You said: still mine")
