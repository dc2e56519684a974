"""The demo page against a server that requires credentials, in Chromium:
it fetches a token from the operator's URL (here a tiny route of the test
that mints with the API key through ``POST /tokens``), opens its socket
with ``?token=``, renews the token ahead of expiry and reconnects with the
fresh one (web/credentials.js)."""

from __future__ import annotations

import json
import pathlib
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send
from web_helpers import check_no_page_errors, demo, entries, wait_for

from audiocore_server import Settings, create_app

KEY = "operator-api-key-0123456789"
OWNER = "signed-in-user-1"


@dataclass
class Operator:
    """The operator's backend: mints a token for its signed-in user with the key."""

    base: str = ""
    ttl_s: float = 600
    minted: list[dict[str, Any]] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def mint(self) -> bytes:
        request = urllib.request.Request(
            self.base + "tokens",
            data=json.dumps({"owner": OWNER, "ttlSeconds": self.ttl_s}).encode(),
            headers={"x-api-key": KEY, "content-type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        with self.changed:
            self.minted.append(json.loads(body))
            self.changed.notify_all()
        return body

    def wait_minted(self, count: int, timeout_s: float = 20) -> None:
        """Until ``count`` tokens were minted (the timeout guards a hang)."""
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.minted) >= count, timeout_s)


def with_operator(app: Any, operator: Operator) -> Callable[..., Any]:
    """The operator's route beside the server, on the page's origin."""

    async def combined(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/operator/token":
            import anyio

            body = await anyio.to_thread.run_sync(operator.mint)
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return combined


@pytest.fixture
def keyed_server(tmp_path: pathlib.Path) -> Iterator[tuple[str, Operator]]:
    settings = Settings(data_dir=tmp_path / "data", model="offline", api_key=KEY)
    operator = Operator()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    operator.base = f"http://127.0.0.1:{port}/"
    config = uvicorn.Config(
        with_operator(create_app(settings), operator), log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    started = threading.Event()
    for _ in range(500):
        if server.started:
            break
        started.wait(0.01)
    assert server.started, "uvicorn did not start"
    try:
        yield operator.base, operator
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def page_of(browser: Any) -> Iterator[Callable[[str], Any]]:
    contexts = []

    def opener(url: str) -> Any:
        context = browser.new_context()
        contexts.append(context)
        page = context.new_page()
        page.page_errors = []
        page.on("pageerror", lambda exc: page.page_errors.append(str(exc)))
        page.sockets = []
        page.on("websocket", lambda ws: page.sockets.append(ws.url))
        page.goto(url)
        page.wait_for_function("() => window.__demo !== undefined")
        return page

    yield opener
    for context in contexts:
        context.close()


def say(page: Any, text: str) -> None:
    page.fill("#text", text)
    page.press("#text", "Enter")
    wait_for(
        page,
        f"[...document.querySelectorAll('#log .entry.agent')].some("
        f"(e) => e.textContent.includes({('You said: ' + text)!r}))",
    )


def test_the_page_connects_with_a_token_from_the_operator(keyed_server, page_of) -> None:
    base, operator = keyed_server
    page = page_of(base + "?mode=push-to-talk&tokenUrl=/operator/token")
    page.click("#connect")
    wait_for(page, "__demo.state === 'connected'")
    assert len(operator.minted) == 1
    token = operator.minted[0]["token"]
    assert page.sockets == [f"{base.replace('http', 'ws')}ws?token={token}"]
    say(page, "hello with a token")
    assert any("hello with a token" in e for e in entries(page, "agent"))
    check_no_page_errors(page)


def test_the_page_renews_ahead_of_expiry_and_reconnects_with_the_fresh_token(
    keyed_server, page_of
) -> None:
    base, operator = keyed_server
    operator.ttl_s = 6  # renewed halfway: 3 s after it was minted
    page = page_of(base + "?mode=push-to-talk&tokenUrl=/operator/token")
    page.click("#connect")
    wait_for(page, "__demo.state === 'connected'")
    operator.wait_minted(2)  # renewed while connected
    fresh = operator.minted[1]["token"]
    # A reconnect (another turn-taking mode is a fresh socket) uses it.
    with page.expect_websocket() as reconnected:
        page.check('input[name="mode"][value="hands-free"]')
    assert reconnected.value.url.endswith(f"?token={fresh}")
    wait_for(page, "__demo.state === 'connected' && __demo.mode === 'hands-free'")
    assert len(page.sockets) == 2
    check_no_page_errors(page)


def test_without_a_token_the_keyed_server_refuses_the_page(keyed_server, page_of) -> None:
    base, operator = keyed_server
    page = page_of(base + "?mode=push-to-talk")
    assert demo(page, "__demo.state") == "idle"  # the page's files stay open
    page.click("#connect")
    wait_for(page, "__demo.state !== 'connecting' && __demo.state !== 'idle'")
    assert demo(page, "__demo.state") != "connected"
    assert operator.minted == []
