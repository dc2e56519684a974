"""The server on the OpenAI Realtime path, pointed at the local endpoint
(tests/openai_realtime): real uvicorn, ADK's runner, our ``OpenAIRealtime``
model and the ``openai`` package's realtime client over TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from gemini_helpers import GOOGLE_ENV
from live_helpers import open_ready_session, use_only_key
from server_helpers import Collector, serve_ws

from audiocore_server import Settings
from tests.openai_realtime import EndpointConfig, LocalOpenAIRealtime

MODEL = "gpt-realtime-2"
T = TypeVar("T")


def use_openai_key(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """The environment a user has: only an OpenAI key (no Google credentials,
    no CA bundle of their own, no proxy for loopback)."""
    cleared = (*GOOGLE_ENV, "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")
    use_only_key(monkeypatch, "OPENAI_API_KEY", key, cleared)


def openai_settings(endpoint: LocalOpenAIRealtime, data_dir: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "data_dir": data_dir,
        "model": f"openai:{MODEL}",
        "openai_base_url": endpoint.base_url,
        "openai_ca_file": endpoint.ca_file,
        "hello_timeout_s": 0.5,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@contextlib.contextmanager
def keyed_endpoint(
    config: EndpointConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalOpenAIRealtime]:
    """The endpoint with ``config``, its key in the environment."""
    with LocalOpenAIRealtime(config, cert_dir=tmp_path / "cert") as live:
        use_openai_key(monkeypatch, live.api_key)
        yield live


@pytest.fixture(name="endpoint")
def openai_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalOpenAIRealtime]:
    """The endpoint answering at once: a sample-exact echo must not depend on
    how fast this machine relays a real-time stream. (Each test_openai_*
    module imports it, and ``serve_openai``.)"""
    with keyed_endpoint(EndpointConfig(speed=1000.0), tmp_path, monkeypatch) as live:
        yield live


@pytest.fixture(name="openai_server")
def serve_openai(endpoint: LocalOpenAIRealtime, tmp_path: Path) -> Iterator[str]:
    """The server on the OpenAI path at ``endpoint``; yields its ws:// base URL."""
    with serve_ws(openai_settings(endpoint, tmp_path / "data")) as url:
        yield url


def run_on_server(
    endpoint: LocalOpenAIRealtime, data_dir: Path, scenario: Callable[[str], Awaitable[T]]
) -> T:
    """``scenario(ws_base_url)`` against the server on the OpenAI path at
    ``endpoint`` (its data in ``data_dir``); returns what it returns."""
    with serve_ws(openai_settings(endpoint, data_dir)) as url:
        return asyncio.run(scenario(url))


async def open_session(
    url: str, endpoint: LocalOpenAIRealtime, **start: Any
) -> tuple[Any, Collector]:
    """A client session whose realtime session is configured (so no audio
    waits for it)."""
    return await open_ready_session(url, endpoint, lambda record: record.updates, **start)


def received(endpoint: LocalOpenAIRealtime, kind: str, index: int = 0) -> list[dict[str, Any]]:
    return [e for e in endpoint.records[index].received if e["type"] == kind]
