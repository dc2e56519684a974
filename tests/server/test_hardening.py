"""Regression tests for the classes of hole found by trying the server as an
attacker and as an operator would (hosts and headers, parser limits, bursts,
connection caps, hung runs)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from server_helpers import receive_until, start
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from server import Settings, create_app
from server.app import SECURITY_HEADERS, host_allowed

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
