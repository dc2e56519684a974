"""The server on the production model path, pointed at the local Gemini Live
endpoint (tests/gemini_live): real uvicorn, ADK's Gemini model, google-genai.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from live_helpers import use_only_key

from audiocore_server import Settings
from tests.gemini_live import LocalGeminiLive

GEMINI_3 = "gemini-3.8-live"  # the default: ADK's gemini-3.x paths
GEMINI_25 = "gemini-2.5-flash-native-audio-preview-12-2025"  # ADK's other paths
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
    use_only_key(monkeypatch, "GOOGLE_API_KEY", key, GOOGLE_ENV)


def gemini_settings(endpoint: LocalGeminiLive, data_dir: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "data_dir": data_dir,
        "model": GEMINI_3,
        "gemini_base_url": endpoint.url,
        "gemini_ca_file": endpoint.ca_file,
        "hello_timeout_s": 0.5,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in GOOGLE_ENV}
