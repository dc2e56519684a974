"""``GET /metrics``: what an operator alerts on, in Prometheus' text format."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from audiocore_server import Settings, create_app
from tests.server.server_helpers import start

ROOT = Path(__file__).resolve().parents[2]


def _samples(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def test_metrics_count_sockets_drops_refusals_and_the_loop_lag(settings: Settings) -> None:
    quick = replace(settings, max_dropped_messages=20, client_rate_scale=1e-6, max_connections=1)
    with TestClient(create_app(quick)) as client:
        with client.websocket_connect("/ws") as ws:
            start(ws)
            live = _samples(client)
            assert live[("audiocore_connections", ())] == 1
            assert live[("audiocore_live_runs", ())] == 1
            with client.websocket_connect("/ws") as refused:  # past max_connections
                assert refused.receive_json()["errorText"].startswith("the server is full")
            for _ in range(100):
                ws.send_text(json.dumps({"type": "ping"}))
            try:
                while True:
                    ws.receive_json()
            except WebSocketDisconnect:
                pass
        after = _samples(client)
    assert after[("audiocore_requests_refused_total", (("reason", "server_full"),))] == 1
    assert after[("audiocore_client_messages_dropped_total", (("kind", "ping"),))] == 21
    assert after[("audiocore_connections_closed_total", ())] >= 1
    assert after[("audiocore_event_loop_lag_seconds_count", ())] >= 1
    assert after[("audiocore_event_loop_lag_max_seconds", ())] >= 0


def test_metrics_need_the_api_key_when_one_is_set(settings: Settings) -> None:
    with TestClient(create_app(replace(settings, api_key="k" * 32))) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"x-api-key": "k" * 32}).status_code == 200
        assert client.get("/healthz").status_code == 200


def test_the_first_live_run_imports_and_builds_nothing_on_the_loop(tmp_path: Path) -> None:
    """ADK imports its workflow machinery and its live flow lazily, on the
    first live run: 0.3 s with the event loop held (every conversation
    waited, and /metrics showed it). It also builds the tools' declarations
    and completes its request model's pydantic schema there (22 ms more).
    The runtime does all of it before the first socket: a first
    conversation, in a fresh process, imports no module, builds no tool
    declaration and completes no pydantic model."""
    check = f"""
import json, pathlib, sys
import pydantic
from google.adk.tools import function_tool
from starlette.testclient import TestClient
from audiocore_server import Settings, create_app
def incomplete():
    found, todo = set(), [pydantic.BaseModel]
    while todo:
        for model in todo.pop().__subclasses__():
            if model not in found:
                found.add(model)
                todo.append(model)
    return {{m for m in found if not m.__dict__.get("__pydantic_complete__", True)}}
data = pathlib.Path({str(tmp_path)!r})
settings = Settings(data_dir=data, model="offline", allowed_hosts=("testserver",))
with TestClient(create_app(settings)) as client:
    before = set(sys.modules)
    pending = incomplete()
    built = function_tool._build_declaration_cached.cache_info().misses
    assert built > 0, "no tool declaration was built before the first socket"
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({{"type": "start", "turnDetection": "manual"}}))
        ws.receive_json()
        ws.send_text(json.dumps({{"type": "text", "text": "hello"}}))
        while ws.receive_json()["type"] != "finish":
            pass
    late = sorted(set(sys.modules) - before)
    completed = sorted(m.__module__ + "." + m.__qualname__ for m in pending - incomplete())
    built = function_tool._build_declaration_cached.cache_info().misses - built
assert not late, f"imported during the first conversation: {{late}}"
assert not completed, f"pydantic models completed during the first conversation: {{completed}}"
assert not built, f"{{built}} tool declarations built during the first conversation"
"""
    subprocess.run([sys.executable, "-c", check], check=True, cwd=ROOT)
