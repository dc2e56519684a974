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

from server import Settings, create_app
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


def test_the_first_live_run_imports_nothing_on_the_loop(tmp_path: Path) -> None:
    """ADK imports its workflow machinery and its live flow lazily, on the
    first live run: 0.3 s with the event loop held (every conversation
    waited, and /metrics showed it). The runtime imports them before the
    first socket: a first conversation, in a fresh process, imports no
    module at all."""
    check = f"""
import json, pathlib, sys
from starlette.testclient import TestClient
from server import Settings, create_app
data = pathlib.Path({str(tmp_path)!r})
settings = Settings(data_dir=data, model="offline", allowed_hosts=("testserver",))
with TestClient(create_app(settings)) as client:
    before = set(sys.modules)
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({{"type": "start", "turnDetection": "manual"}}))
        ws.receive_json()
        ws.send_text(json.dumps({{"type": "text", "text": "hello"}}))
        while ws.receive_json()["type"] != "finish":
            pass
    late = sorted(set(sys.modules) - before)
assert not late, f"imported during the first conversation: {{late}}"
"""
    subprocess.run([sys.executable, "-c", check], check=True, cwd=ROOT)
