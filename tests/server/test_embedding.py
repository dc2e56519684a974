"""The server mounted under a prefix inside a host app (docs/embedding.md).

A Starlette host and a FastAPI host, each with routes of its own and
``create_app(...)`` at ``Mount("/voice", ...)``, on real uvicorn: every kind
of surface answers under the prefix (HTTP, ADK's REST, the three sockets,
the page), the host's routes still answer, and the credentials check names
the surfaces by their path below the prefix. The page itself under the
prefix, in Chromium, is tests/web/test_embedded_page.py.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import websockets
from fastapi import FastAPI
from server_helpers import open_ws, say, uvicorn_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from audiocore_server import Settings, create_app
from audiocore_server.__main__ import program_name
from audiocore_server.embed import lifespan
from audiocore_server.wire.route_path import route_path

KEY = "embedding-test-key-0123456789"


def starlette_host(voice: Starlette) -> Starlette:
    async def home(request: Request) -> PlainTextResponse:
        return PlainTextResponse("the host's home")

    return Starlette(
        routes=[Route("/", home), Mount("/voice", app=voice)],
        lifespan=lifespan(voice),
    )


def fastapi_host(voice: Starlette) -> FastAPI:
    host = FastAPI(lifespan=lifespan(voice))

    @host.get("/", response_class=PlainTextResponse)
    def home() -> str:
        return "the host's home"

    host.mount("/voice", voice)
    return host


HOSTS = {"starlette": starlette_host, "fastapi": fastapi_host}


def served(host_of: Any, settings: Settings) -> Iterator[str]:
    """The host app around ``create_app(settings)`` on real uvicorn; yields
    the host's base URL (http://127.0.0.1:PORT)."""
    voice = create_app(settings)
    with uvicorn_thread(host_of(voice), log_level="warning") as (address, port):
        yield f"http://{address}:{port}"


@pytest.fixture(scope="module", params=sorted(HOSTS))
def host(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("data"), model="offline")
    yield from served(HOSTS[request.param], settings)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    """(status, content type, body) of a GET."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["content-type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read().decode()


def post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def test_http_routes_answer_under_the_prefix_and_the_hosts_own_still_do(host: str) -> None:
    status, _, body = get(f"{host}/voice/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"
    assert get(f"{host}/voice/list-apps")[2] == '["audiocore"]'
    status, kind, page = get(f"{host}/voice/")
    assert status == 200 and kind.startswith("text/html") and 'src="app.js"' in page
    status, kind, _ = get(f"{host}/voice/sdk/session.js")
    assert status == 200 and "javascript" in kind
    assert get(f"{host}/") == (200, "text/plain; charset=utf-8", "the host's home")
    # Our routes are below the prefix only.
    assert get(f"{host}/healthz")[0] == 404
    status, _, _ = get(f"{host}/voice/metrics")
    assert status == 200


def test_a_ws_conversation_under_the_prefix(host: str) -> None:
    async def scenario() -> tuple[dict[str, Any], str]:
        collector, session = await open_ws(f"{host}/voice")
        answer = await say(collector, "hello from the host", 1)
        await collector.close()
        return session, answer

    session, answer = asyncio.run(scenario())
    assert session["data"]["model"] == "offline"
    assert answer.startswith("You said: hello from the host")


def test_live_under_the_prefix_speaks_the_seed_dialect(host: str) -> None:
    """/voice/live is the seed's dialect, /voice/ws ours: the app tells them
    apart by the path below the prefix."""

    async def scenario() -> list[str]:
        async with websockets.connect(host.replace("http", "ws") + "/voice/live") as ws:
            await ws.send(
                json.dumps(
                    {
                        "type": "message",
                        "id": "chat-1",
                        "messages": [
                            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
                        ],
                        "trigger": "submit-message",
                        "version": "1.0",
                    }
                )
            )
            frames = []
            while not frames or frames[-1] != "data: [DONE]\n\n":
                frames.append(str(await asyncio.wait_for(ws.recv(), 20)))
            return frames

    frames = asyncio.run(scenario())
    assert all(frame.startswith("data: ") for frame in frames)
    deltas = [json.loads(f[6:]) for f in frames[:-1]]
    assert {"type": "text-delta", "id": deltas[2]["id"], "delta": "You said: hi"} in deltas


def test_run_live_under_the_prefix(host: str) -> None:
    base = f"{host}/voice"
    post_json(f"{base}/apps/audiocore/users/u1/sessions", {"sessionId": "embedded-1"})

    async def scenario() -> list[dict[str, Any]]:
        query = "app_name=audiocore&user_id=u1&session_id=embedded-1"
        url = base.replace("http", "ws") + f"/run_live?{query}"
        async with websockets.connect(url, max_size=None) as ws:
            await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": "hi"}]}}))
            events = []
            while not (events and events[-1].get("turnComplete")):
                events.append(json.loads(await asyncio.wait_for(ws.recv(), 20)))
            return events

    events = asyncio.run(scenario())
    words = [p.get("text") for e in events for p in e.get("content", {}).get("parts", [])]
    assert "You said: hi" in words


@pytest.fixture(scope="module")
def keyed_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("keyed"), model="offline", api_key=KEY)
    yield from served(starlette_host, settings)


def test_credentials_name_the_surfaces_below_the_prefix(keyed_host: str) -> None:
    base = f"{keyed_host}/voice"
    # Open: liveness and the page's files.
    assert get(f"{base}/healthz")[0] == 200
    assert get(f"{base}/")[0] == 200
    assert get(f"{base}/sdk/session.js")[0] == 200
    # The REST needs the key, and takes it.
    status, _, body = get(f"{base}/list-apps")
    assert (status, body) == (401, "Unauthorized: credentials required: API key or token")
    assert get(f"{base}/list-apps", {"x-api-key": KEY})[:3:2] == (200, '["audiocore"]')

    async def refused() -> int | None:
        async with websockets.connect(base.replace("http", "ws") + "/ws") as ws:
            await ws.wait_closed()
            return ws.close_code

    with pytest.raises(websockets.InvalidStatus):
        asyncio.run(refused())  # closed before the handshake: 403


@pytest.mark.parametrize(
    ("path", "root_path", "expected"),
    [
        ("/ws", "", "/ws"),
        ("/voice/ws", "/voice", "/ws"),
        ("/voice", "/voice", "/"),
        ("/voice/", "/voice", "/"),
        ("/a/b/live", "/a/b", "/live"),
        # A prefix that is not a whole segment is no prefix.
        ("/voiceover/ws", "/voice", "/voiceover/ws"),
    ],
)
def test_route_path(path: str, root_path: str, expected: str) -> None:
    assert route_path({"type": "http", "path": path, "root_path": root_path}) == expected


@pytest.mark.parametrize(
    ("argv0", "expected"),
    [
        ("/repo/server/__main__.py", "python -m server"),
        (
            "/venv/lib/python3.11/site-packages/audiocore_server/__main__.py",
            "python -m audiocore_server",
        ),
        ("/venv/bin/audiocore-server", "audiocore-server"),
    ],
)
def test_the_command_is_named_as_it_was_started(argv0: str, expected: str) -> None:
    assert program_name(argv0) == expected


def test_the_page_is_found_in_the_checkout() -> None:
    assert Settings().web_dir == pathlib.Path(__file__).resolve().parents[2] / "web"
