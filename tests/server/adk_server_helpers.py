"""ADK's own ``adk api_server``, run on an agents folder for the tests that
compare our surfaces with it (test_run_live.py, test_run_live_apps.py)."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
from server_helpers import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def adk_api_server(agents: pathlib.Path, log_path: pathlib.Path) -> Iterator[str]:
    """``adk api_server AGENTS`` on 127.0.0.1 (in-memory sessions, no Google
    credentials, this checkout importable); yields its http:// base URL once
    ``/health`` answers. Skips when the ``adk`` command is not installed."""
    adk = shutil.which("adk", path=os.path.dirname(sys.executable))
    if adk is None:
        pytest.skip("the adk command is not installed")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GOOGLE_API_KEY", None)
    env.pop("GEMINI_API_KEY", None)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [adk, "api_server", "--host", "127.0.0.1", "--port", str(port), "--no-reload"]
            + ["--session_service_uri", "memory://", str(agents)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log_path.read_text()
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, (
                "adk api_server did not start: " + log_path.read_text()
            )
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
