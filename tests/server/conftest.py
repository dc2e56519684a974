"""Shared fixtures for the server suite: real app, real SQLite file, offline model."""

from __future__ import annotations

import pathlib
import shutil
from collections.abc import Iterator

import numpy as np
import pytest
from postgres_helpers import postgres_server, postgres_url  # noqa: F401 (fixtures)
from server_helpers import serve_ws
from speech_helpers import speech_f32
from starlette.testclient import TestClient

from audiocore_server import Settings, create_app


@pytest.fixture
def settings(tmp_path: pathlib.Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        model="offline",
        hello_timeout_s=0.5,
        # Starlette's TestClient sends Host: testserver.
        allowed_hosts=("testserver",),
    )


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")


@pytest.fixture(scope="session")
def speech_48k(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    """Real speech (espeak-ng) as 48 kHz mono float32."""
    _need("espeak-ng")
    _need("sox")
    return speech_f32(tmp_path_factory.mktemp("speech"), 48_000)


@pytest.fixture
def live_server(settings: Settings) -> Iterator[str]:
    """The app on real uvicorn at 127.0.0.1 (an ephemeral port); yields ws:// base URL."""
    with serve_ws(settings) as url:
        yield url
