"""Credentials on every surface (audiocore_server/gate/credentials.py,
audiocore_server/gate/tokens.py):
the matrix of surfaces × credentials, what a token binds (its owner, its
surfaces, its live sockets), bad tokens, rotation, and the audit log."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from audiocore_server import Settings, create_app
from audiocore_server.gate.tokens import TokenLimits, TokenSigner, secrets_from
from tests.server.server_helpers import start

KEY = "test-api-key-0123456789"
SECRET = "token-secret-new-0123456789abcdefghij"
OLD_SECRET = "token-secret-old-0123456789abcdefghij"
OWNER = "alice"
KEYED = {"x-api-key": KEY}
CHAT = {
    "id": "chat-credentials",
    "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}],
    "trigger": "submit-message",
}


@pytest.fixture
def keyed(settings: Settings) -> Settings:
    return replace(settings, api_key=KEY, token_secrets=(SECRET, OLD_SECRET))


@pytest.fixture
def client(keyed: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(keyed)) as test_client:
        yield test_client


def mint(client: TestClient, owner: str = OWNER, **body: Any) -> str:
    response = client.post("/tokens", json={"owner": owner, **body}, headers=KEYED)
    assert response.status_code == 200, response.text
    token: str = response.json()["token"]
    return token


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def use(client: TestClient, surface: str, headers: dict[str, str], token: str | None) -> str:
    """Use one surface as OWNER: "ok", or how it was refused."""
    if token is not None:
        headers = {**headers, **bearer(token)} if surface not in _SOCKETS else headers
    if surface in _SOCKETS:
        return _socket(client, surface, headers, token)
    if surface == "rest":
        response = client.get(f"/apps/audiocore/users/{OWNER}/sessions", headers=headers)
    elif surface == "chat":
        response = client.post("/api/chat", json=CHAT, headers=headers)
    elif surface == "metrics":
        response = client.get("/metrics", headers=headers)
    else:
        response = client.post("/tokens", json={"owner": "bob"}, headers=headers)
    return "ok" if response.status_code == 200 else str(response.status_code)


_SOCKETS = ("ws", "live", "run_live")


def _socket(client: TestClient, surface: str, headers: dict[str, str], token: str | None) -> str:
    query = f"token={token}" if token is not None else ""
    if surface == "run_live":
        created = client.post(f"/apps/audiocore/users/{OWNER}/sessions", json={}, headers=KEYED)
        session = created.json()["id"]
        query += f"&app_name=audiocore&user_id={OWNER}&session_id={session}"
    try:
        with client.websocket_connect(f"/{surface}?{query}", headers=headers) as ws:
            if surface == "run_live":
                ws.close()  # accepted: the run itself is test_run_live.py's
                return "ok"
            opened(ws)
            return "ok"
    except WebSocketDisconnect as exc:
        return str(exc.code)


def opened(ws: Any) -> None:
    """The conversation answers (/ws: its session first; /live: a pong)."""
    ws.send_json({"type": "ping"})
    first = ws.receive_text()
    assert "session" in first or "pong" in first, first


SURFACES = ("ws", "live", "run_live", "rest", "chat", "metrics", "tokens")
KEY_ONLY = {"metrics", "tokens"}


@pytest.mark.parametrize("surface", SURFACES)
def test_no_credentials_wrong_key_and_the_key(client: TestClient, surface: str) -> None:
    refused = "1008" if surface in _SOCKETS else "401"
    assert use(client, surface, {}, None) == refused
    assert use(client, surface, {"x-api-key": "not-the-key-0123456789"}, None) == refused
    assert use(client, surface, bearer("not-the-key-0123456789"), None) == refused
    assert use(client, surface, KEYED, None) == "ok"
    assert use(client, surface, bearer(KEY), None) == "ok"


@pytest.mark.parametrize("surface", SURFACES)
def test_tokens_on_every_surface(keyed: Settings, client: TestClient, surface: str) -> None:
    refused = "1008" if surface in _SOCKETS else "401"
    valid = "ok" if surface not in KEY_ONLY else refused
    assert use(client, surface, {}, mint(client)) == valid
    # Expired: minted by a clock long past.
    signer = TokenSigner(secrets_from(keyed.token_secrets, KEY), clock=lambda: 1_000_000.0)
    expired, _ = signer.mint(OWNER, 60)
    assert use(client, surface, {}, expired) == refused
    # Another owner: refused where the surface names its user (the chat has
    # none of its own: its sessions' ids are the capability).
    other = mint(client, "bob")
    names_user = surface in ("rest", "run_live")
    assert use(client, surface, {}, other) == (
        refused if names_user or surface in KEY_ONLY else valid
    )
    # Limited to other surfaces.
    elsewhere = "rest" if surface != "rest" else "chat"
    narrow = mint(client, limits={"surfaces": [elsewhere]})
    assert use(client, surface, {}, narrow) == refused


@pytest.mark.parametrize("surface", SURFACES)
def test_tokens_of_another_host_and_of_the_old_secret(
    keyed: Settings, client: TestClient, surface: str, tmp_path: Any
) -> None:
    valid = "ok" if surface not in KEY_ONLY else "401"
    # Another host: its own app and API key, the same token secrets.
    other_host = replace(keyed, api_key="another-hosts-key-0123", data_dir=tmp_path / "other")
    with TestClient(create_app(other_host)) as other:
        response = other.post(
            "/tokens", json={"owner": OWNER}, headers={"x-api-key": "another-hosts-key-0123"}
        )
        shared = response.json()["token"]
    assert use(client, surface, {}, shared) == valid
    # Rotation: a token signed with the old secret, before it became second.
    old, _ = TokenSigner([OLD_SECRET.encode()]).mint(OWNER)
    assert use(client, surface, {}, old) == valid
    # A secret that is not among ours.
    foreign, _ = TokenSigner([b"x" * 40]).mint(OWNER)
    assert use(client, surface, {}, foreign) == ("1008" if surface in _SOCKETS else "401")


@pytest.mark.parametrize("surface", ["ws", "live"])
def test_max_sessions_caps_the_owners_live_sockets(client: TestClient, surface: str) -> None:
    token = mint(client, limits={"maxSessions": 1})
    with client.websocket_connect(f"/{surface}?token={token}") as first:
        opened(first)
        assert use(client, surface, {}, token) == "1013"
        # Another token of the same owner counts the same sockets.
        assert use(client, "ws", {}, mint(client, limits={"maxSessions": 1})) == "1013"
        assert use(client, "ws", {}, mint(client, "bob", limits={"maxSessions": 1})) == "ok"
        assert use(client, "rest", {}, token) == "ok"  # not a live socket
    assert use(client, surface, {}, token) == "ok"  # the place is free again


def test_the_token_owner_is_the_live_clients_user_key(client: TestClient) -> None:
    token = mint(client, "owner-key-0123456789abcdef")
    with client.websocket_connect(f"/ws?token={token}") as ws:
        start(ws, userKey="owner-key-0123456789abcdef")
    with client.websocket_connect(f"/ws?token={token}") as ws:
        ws.send_json({"type": "start", "userKey": "someone-else-0123456789abc"})
        with pytest.raises(WebSocketDisconnect) as refused:
            ws.receive_text()
        assert refused.value.code == 1008 and "owner" in refused.value.reason
    # Absent: the owner's tasks are the connection's.
    with client.websocket_connect(f"/ws?token={token}") as ws:
        start(ws)
        connection = next(iter(client.app.state.connections))  # type: ignore[attr-defined]
        assert connection.conversation.delivery.owner == "key:owner-key-0123456789abcdef"


def test_a_token_in_the_subprotocol_gets_an_offered_one_back(client: TestClient) -> None:
    token = mint(client)
    offered = ["audiocore", f"audiocore.token.{token}"]
    with client.websocket_connect("/ws", subprotocols=offered) as ws:
        assert ws.accepted_subprotocol == "audiocore"
        start(ws)
    with client.websocket_connect("/ws", subprotocols=[f"audiocore.token.{token}"]) as ws:
        assert ws.accepted_subprotocol == f"audiocore.token.{token}"
        start(ws)


@pytest.mark.parametrize(
    "bad",
    [
        "truncated",
        "tampered",
        "huge",
        "non-ascii",
        "no-dot",
        "empty",
        "padding",
        "two-dots",
    ],
)
def test_bad_tokens_are_refused_quietly(
    client: TestClient, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    token = mint(client)
    body, signature = token.split(".")
    forms = {
        "truncated": token[:-5],
        "tampered": body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + signature,
        "huge": "A" * 8000 + "." + signature,  # within a request head's 16 KiB
        "non-ascii": body + "é." + signature,
        "no-dot": body + signature,
        "empty": "",
        "padding": token + "=",
        "two-dots": body + "." + body + "." + signature,
    }
    caplog.set_level(logging.INFO)
    for surface in ("ws", "rest", "chat"):
        if bad == "non-ascii" and surface != "ws":
            continue  # HTTP headers are Latin-1: the client itself refuses to send it
        assert use(client, surface, {}, forms[bad]) in ("1008", "401")
    assert not [r for r in caplog.records if r.exc_info], "a refusal logged a traceback"


def test_refusals_are_logged_and_counted_without_the_secrets(
    client: TestClient, keyed: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = mint(client, limits={"maxSessions": 1, "surfaces": ["ws", "rest"]})
    expired, claims = TokenSigner(secrets_from(keyed.token_secrets, KEY), clock=lambda: 0.0).mint(
        OWNER, 1
    )
    use(client, "rest", {}, None)
    use(client, "rest", {"x-api-key": "wrong-" + KEY}, None)
    use(client, "ws", {}, expired)
    use(client, "chat", {}, token)  # not among its surfaces
    use(client, "rest", {}, mint(client, "bob"))  # another owner
    use(client, "metrics", {}, token)  # the key only
    with client.websocket_connect(f"/ws?token={token}") as ws:
        start(ws)
        use(client, "ws", {}, token)  # over maxSessions
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("audiocore_server.gate.")]
    refusals = [line for line in lines if line.startswith("refused")]
    assert len(refusals) == 7, refusals
    assert any(f"token {claims.token_id}" in line and "expired" in line for line in refusals)
    assert all("testclient" in line for line in refusals)  # the client's address
    text = caplog.text + "\n".join(lines)
    for secret in (KEY, token, expired, SECRET, OLD_SECRET, token.split(".")[1]):
        assert secret not in text
    metrics = client.get("/metrics", headers=KEYED).text
    for reason in (
        "no_credentials",
        "bad_key",
        "token_expired",
        "token_surface",
        "wrong_owner",
        "key_only",
        "over_limit",
    ):
        assert f'audiocore_requests_refused_total{{reason="{reason}"}} 1.0' in metrics, reason


def test_what_stays_open(client: TestClient) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/").status_code == 200
    assert client.get("/app.js").status_code == 200
    assert (
        client.options(
            "/api/chat",
            headers={"origin": "http://localhost:5173", "access-control-request-method": "POST"},
        ).status_code
        == 200
    )
    # Anything else, known or not, needs credentials.
    assert client.get("/nothing-here").status_code == 401
    assert client.get("/../server/settings.py").status_code == 401
    assert client.get("/api/tasks").status_code == 401
    assert client.get("/nothing-here", headers=KEYED).status_code == 404


def test_minting_checks_its_input(client: TestClient) -> None:
    def minted(body: Any) -> int:
        return client.post("/tokens", json=body, headers=KEYED).status_code

    assert minted({"owner": OWNER, "ttlSeconds": 60, "limits": {"liveMinutes": 1.5}}) == 200
    for body in (
        {},
        {"owner": ""},
        {"owner": "web"},  # reserved
        {"owner": "a b"},
        {"owner": OWNER, "ttlSeconds": 0},
        {"owner": OWNER, "ttlSeconds": 10**9},
        {"owner": OWNER, "ttlSeconds": True},
        {"owner": OWNER, "limits": {"maxSessions": 0}},
        {"owner": OWNER, "limits": {"surfaces": ["metrics"]}},
        {"owner": OWNER, "limits": {"other": 1}},
        {"owner": OWNER, "extra": 1},
        [OWNER],
    ):
        assert minted(body) == 422, body


def test_the_key_alone_signs_when_no_secret_is_configured(settings: Settings) -> None:
    with TestClient(create_app(replace(settings, api_key=KEY))) as client:
        token = mint(client)
        assert use(client, "rest", {}, token) == "ok"
    derived, _ = TokenSigner(secrets_from((), KEY)).mint(OWNER)
    with TestClient(create_app(replace(settings, api_key=KEY))) as client:
        assert use(client, "rest", {}, derived) == "ok"  # another process, the same key


def test_without_a_key_nothing_is_required(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        assert client.post("/tokens", json={"owner": OWNER}).status_code in (404, 405)
        assert use(client, "rest", {}, None) == "ok"
        assert use(client, "ws", {}, None) == "ok"


def test_verification_refuses_every_mutation_with_its_own_error() -> None:
    """Seeded: each byte of a token changed, cut or doubled, and oversized
    and non-ASCII forms; only ``TokenRefused`` comes out."""
    import random

    from audiocore_server.gate.tokens import MAX_TOKEN_CHARS, TokenRefused

    signer = TokenSigner([SECRET.encode()])
    token, claims = signer.mint(OWNER, limits=TokenLimits(2, 1.0, ("ws",)))
    assert signer.verify(token) == claims
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    forms = ["A" * 10**6, token + "A" * MAX_TOKEN_CHARS, token.replace(".", "\u2024"), "é" * 60]
    for i in range(len(token)):
        forms.append(token[:i])
        forms.append(token[:i] + token[i] + token[i:])
        forms.append(token[:i] + rng.choice("AZaz09-_.=+/é\x00") + token[i + 1 :])
    # The signature's last character has two spare bits: no other spelling.
    forms += [
        token[:-1] + c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    ]
    for form in forms:
        if form == token:
            continue
        try:
            signer.verify(form)
        except TokenRefused:
            continue
        raise AssertionError(f"accepted a mutation (seed {seed}): {form!r}")


def test_live_minutes_end_the_socket(client: TestClient) -> None:
    token = mint(client, limits={"liveMinutes": 0.001})  # 60 ms
    with client.websocket_connect(f"/ws?token={token}") as ws:
        start(ws)
        with pytest.raises(WebSocketDisconnect) as ended:
            while True:  # until the close, whatever comes first
                ws.receive_text()
    assert ended.value.code == 1008 and ended.value.reason == "live time limit reached"


def test_beyond_localhost_only_with_a_key_or_when_told(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith("AUDIOCORE_")}
    result = subprocess.run(
        [sys.executable, "-m", "server", "--data-dir", str(tmp_path), "--host", "0.0.0.0"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "python -m server: error: host: 0.0.0.0 is reachable from other machines and no API "
        "key is set: set AUDIOCORE_API_KEY, or pass --insecure-no-auth to serve it without one"
    )
    fine = Settings(data_dir=tmp_path)
    assert fine.problems() == []  # 127.0.0.1
    for host in ("localhost", "::1", "127.0.0.2"):
        assert replace(fine, host=host).problems() == []
    assert replace(fine, host="0.0.0.0", api_key=KEY).problems() == []
    assert replace(fine, host="::", insecure_no_auth=True).problems() == []
    told = Settings.from_env({"AUDIOCORE_INSECURE_NO_AUTH": "1"}, host="192.0.2.1")
    assert told.insecure_no_auth and replace(told, data_dir=tmp_path).problems() == []
    short = replace(fine, api_key=KEY, token_secrets=("short",))
    assert short.problems() == ["token_secrets: expected at least 32 characters each"]
    assert "short" not in repr(short) and KEY not in repr(short)


def test_on_real_sockets_the_token_stays_out_of_the_log(
    keyed: Settings, caplog: pytest.LogCaptureFixture, tmp_path: Any
) -> None:
    """uvicorn logs each socket's path and query: the token is redacted
    there; a subprotocol entry is answered with an offered one on the wire;
    a refused socket fails its handshake (403)."""
    import asyncio
    import socket
    import threading

    import uvicorn
    import websockets

    caplog.set_level(logging.INFO)
    app = create_app(keyed)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # log_config=None: uvicorn's records reach the root logger, and caplog.
    config = uvicorn.Config(app, log_level="info", log_config=None, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    ready = threading.Event()
    while not server.started:
        ready.wait(0.01)
    token, _ = TokenSigner([SECRET.encode()]).mint(OWNER)

    async def visit() -> None:
        base = f"ws://127.0.0.1:{port}/ws"
        async with websockets.connect(f"{base}?token={token}") as ws:
            await ws.send('{"type": "start"}')
            assert "data-session" in await ws.recv()
        offered = ["audiocore", f"audiocore.token.{token}"]
        async with websockets.connect(base, subprotocols=offered) as ws:  # type: ignore[arg-type]
            assert ws.subprotocol == "audiocore"
            await ws.send('{"type": "start"}')
            assert "data-session" in await ws.recv()
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(f"{base}?token={token[:-3]}"):
                pass
        assert refused.value.response.status_code == 403

    try:
        asyncio.run(visit())
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
    assert "token=***" in caplog.text
    assert token not in caplog.text and token[:-3] not in caplog.text


def test_a_key_with_a_dot_is_still_the_key_as_a_bearer(settings: Settings) -> None:
    dotted = "key.with.dots-0123456789"
    with TestClient(create_app(replace(settings, api_key=dotted))) as client:
        assert use(client, "rest", bearer(dotted), None) == "ok"
        assert use(client, "ws", bearer(dotted), None) == "ok"
        assert use(client, "rest", bearer(dotted + "x"), None) == "401"
