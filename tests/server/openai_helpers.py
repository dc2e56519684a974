"""The server on the OpenAI Realtime path, pointed at the local endpoint
(tests/openai_realtime): real uvicorn, ADK's runner, our ``OpenAIRealtime``
model and the ``openai`` package's realtime client over TLS.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gemini_helpers import GOOGLE_ENV

from server import Settings
from tests.openai_realtime import LocalOpenAIRealtime

MODEL = "gpt-realtime-2"


def use_openai_key(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """The environment a user has: only an OpenAI key (no Google credentials,
    no CA bundle of their own, no proxy for loopback)."""
    for name in (*GOOGLE_ENV, "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


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
