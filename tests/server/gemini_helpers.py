"""The server on the production model path, pointed at the local Gemini Live
endpoint (tests/gemini_live): real uvicorn, ADK's Gemini model, google-genai.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from server import Settings, create_app
from tests.gemini_live import LocalGeminiLive

GOOGLE_ENV = (
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
    "SSL_CERT_FILE",
)


def use_endpoint_key(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """The environment a user has: only an API key (and no proxy for loopback)."""
    for name in GOOGLE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", key)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def gemini_settings(endpoint: LocalGeminiLive, data_dir: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "data_dir": data_dir,
        "model": "gemini-3.8-live",
        "gemini_base_url": endpoint.url,
        "gemini_ca_file": endpoint.ca_file,
        "hello_timeout_s": 0.5,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@contextlib.contextmanager
def serve(settings: Settings) -> Iterator[str]:
    """The app on real uvicorn at 127.0.0.1 (an ephemeral port); yields its ws:// URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(settings),
        log_level="warning",
        ws_max_size=settings.max_message_bytes,
        ws_per_message_deflate=False,
        lifespan="on",
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
        yield f"ws://127.0.0.1:{port}/ws"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in GOOGLE_ENV}
