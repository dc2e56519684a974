"""The demo page served under a prefix, in real Chromium: the server mounted
at ``/voice`` inside a host Starlette app (docs/embedding.md), the page
loaded from ``/voice/``. It must find its socket and its memory REST beside
itself (``/voice/ws``, ``/voice/memory``), never at the host's root, and get
the offline model's answer. (The other surfaces under the prefix:
tests/server/test_embedding.py.)

Push-to-talk mode, so the fake microphone starts no turn."""

from __future__ import annotations

import pathlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from web_helpers import check_no_page_errors, connect, demo, wait_for

from audiocore_server import Settings, create_app
from audiocore_server.embed import lifespan


@pytest.fixture
def host_url(tmp_path: pathlib.Path) -> Iterator[str]:
    """A host app with the server at /voice on real uvicorn; yields its base URL."""
    voice = create_app(Settings(data_dir=tmp_path / "data", model="offline"))

    async def home(request: Request) -> PlainTextResponse:
        return PlainTextResponse("the host's home")

    host = Starlette(
        routes=[Route("/", home), Mount("/voice", app=voice)], lifespan=lifespan(voice)
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(host, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    waited = threading.Event()
    for _ in range(500):
        if server.started:
            break
        waited.wait(0.01)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_the_page_under_a_prefix_reaches_its_socket_and_gets_the_answer(
    browser: Any, host_url: str
) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.page_errors = []
        page.on("pageerror", lambda exc: page.page_errors.append(str(exc)))
        sockets: list[str] = []
        page.on("websocket", lambda ws: sockets.append(ws.url))
        fetched: list[str] = []
        page.on("request", lambda request: fetched.append(request.url))
        page.goto(f"{host_url}/voice/?mode=push-to-talk")
        page.wait_for_function("() => window.__demo !== undefined")
        connect(page)
        page.fill("#text", "hello from the host's page")
        page.press("#text", "Enter")
        wait_for(
            page,
            "[...document.querySelectorAll('#log .entry.agent')].some("
            '(e) => e.textContent.includes("You said: hello from the host\'s page"))',
        )
        wait_for(page, "__demo.memory().reads >= 1")  # read when the conversation opened
        ws_base = host_url.replace("http://", "ws://")
        assert sockets == [f"{ws_base}/voice/ws"]
        memory = [url for url in fetched if "/memory" in url]
        assert memory and all(url.startswith(f"{host_url}/voice/memory") for url in memory)
        # Every file the page loaded came from below the prefix.
        # (Inline data: and blob: URLs are no fetch from the host: some
        # Chromium builds report the page's `data:` icon as a request.)
        outside = [
            url for url in fetched if not url.startswith(("data:", "blob:", f"{host_url}/voice/"))
        ]
        assert outside == []
        assert demo(page, "__demo.session")["model"] == "offline"
        check_no_page_errors(page)
    finally:
        context.close()
