"""Gemini's built-in tools in a user's agent: refused by name on a model
that cannot run them (OpenAI Realtime, at the local endpoint)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from live_helpers import errors
from openai_helpers import openai_endpoint, openai_settings  # noqa: F401 (a fixture)
from provider_helpers import running
from server_helpers import Collector, serve_ws

from audiocore_server import Settings
from tests.openai_realtime import LocalOpenAIRealtime


def test_openai_realtime_refuses_gemini_built_in_tools_by_name(
    endpoint: LocalOpenAIRealtime, tmp_path: Path
) -> None:
    settings = openai_settings(
        endpoint, tmp_path / "data", agent="tests.server.user_agents:search_agent"
    )

    async def scenario(url: str) -> Collector:
        import json

        import websockets

        ws = await websockets.connect(url, max_size=None)
        await ws.send(json.dumps({"type": "start"}))
        col = Collector(ws)
        await col.task  # the app cannot run on this model: the server ends the socket
        return col

    with serve_ws(settings) as url:
        col = asyncio.run(scenario(url))
    (error,) = errors(col)
    assert error.startswith(
        "the agent has Gemini built-in tools (google_search), which OpenAI Realtime "
        "(gpt-realtime-2) cannot run"
    ), error
    assert col.ws.close_code == 1011
    assert endpoint.records == []  # refused before reaching the service


def test_the_offline_model_refuses_them_on_every_surface(tmp_path: Path) -> None:
    """The live surfaces and the HTTP chat, on the offline model: the error
    names the tool; nothing reaches ADK."""
    import json
    import urllib.request

    import websockets

    settings = Settings(
        data_dir=tmp_path, model="offline", agent="tests.server.user_agents:search_agent"
    )
    expected = "the agent has Gemini built-in tools (google_search), which the offline model"

    async def live(url: str) -> Collector:
        ws = await websockets.connect(url, max_size=None)
        await ws.send(json.dumps({"type": "start"}))
        col = Collector(ws)
        await col.task
        return col

    with serve_ws(settings) as url:
        col = asyncio.run(live(url))
        (error,) = errors(col)
        assert error.startswith(expected) and col.ws.close_code == 1011
        body = json.dumps(
            {
                "id": "c1",
                "messages": [{"id": "m", "role": "user", "parts": [{"type": "text", "text": "x"}]}],
            }
        ).encode()
        base = url.removesuffix("/ws").replace("ws://", "http://")
        request = urllib.request.Request(
            f"{base}/api/chat", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            stream = response.read().decode()
        assert expected in stream and '"type":"error"' in stream.replace(" ", ""), stream


def test_gemini_gets_them_in_its_setup_beside_the_function_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Gemini Live (the local endpoint, which validates the setup as the
    service documents it) the built-in tool passes through: the setup's
    ``tools`` hold ``googleSearch`` beside the agent's function."""
    import json

    with running("gemini", tmp_path, monkeypatch) as provider:
        settings = provider.settings(
            tmp_path / "data", agent="tests.server.user_agents:search_agent"
        )

        async def scenario(url: str) -> Collector:
            ws, col = await provider.open_session(url)
            await ws.send(json.dumps({"type": "text", "text": "hello"}))
            await col.wait_for("finish")
            await col.close()
            return col

        with serve_ws(settings) as url:
            col = asyncio.run(scenario(url))
        (record,) = provider.endpoint.records
        tools = record.parsed.raw["tools"]
    assert not errors(col)
    assert any("googleSearch" in tool for tool in tools), tools
    declared = [d["name"] for t in tools for d in t.get("functionDeclarations", [])]
    assert declared == ["_look_up"], declared
