"""Where a turn's time goes (audiocore_server/ops/turn_timing.py): the
histograms and the spans of a turn with a tool call and a barge-in, on a
clock the test moves and an in-memory span exporter; then on the real
server, the histograms a spoken turn fills on ``/metrics``."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from server_helpers import open_ws, receive_until, say, server_process, start
from starlette.testclient import TestClient

from audiocore_server import Settings, create_app
from audiocore_server.ops.turn_timing import TurnMetrics, TurnTimer, tracing_on
from audiocore_server.wire import chunks


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def timed_turn() -> tuple[CollectorRegistry, list[ReadableSpan]]:
    """A spoken turn: the model's detector ends it, the model answers in
    words and audio, runs a tool, then the user barges in."""
    registry, exporter = CollectorRegistry(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    clock = Clock()
    timer = TurnTimer(
        TurnMetrics(registry),
        tracer=provider.get_tracer("test"),
        attributes={"audiocore.app": "desk"},
        clock=clock,
    )
    timer.user_done("model")
    clock.now += 0.25
    timer.user_done("client")  # a later edge of the same words: not counted
    timer.model_output()
    clock.now += 0.15
    timer.model_audio()
    clock.now += 0.05
    timer.client_audio()
    timer.client_audio()  # only the first frame counts
    timer.tool_chunk(chunks.ToolInput("c1", "lookup_order", {}))
    clock.now += 0.4
    timer.tool_chunk(chunks.ToolOutput("c1", {"ok": True}))
    timer.tool_chunk(chunks.ToolInput("c2", "get_location", {}))
    timer.tool_chunk(chunks.ToolApprovalRequest("apr_c2", "c2"))
    clock.now += 2.0
    timer.tool_chunk(chunks.ToolOutputDenied("c2"))
    timer.barge_in()
    timer.silence(0.012)
    timer.turn_end(interrupted=True)
    # The next turn, typed; the connection ends during it.
    timer.user_done("text")
    clock.now += 0.5
    timer.model_output()
    timer.close()
    return registry, list(exporter.get_finished_spans())


def test_the_histograms_of_a_turn() -> None:
    registry, _ = timed_turn()
    latency = "audiocore_turn_latency_seconds"
    assert sample(registry, f"{latency}_sum", stage="model_first_byte", edge="model") == (
        pytest.approx(0.25)
    )
    assert sample(registry, f"{latency}_sum", stage="model_first_audio", edge="model") == (
        pytest.approx(0.40)
    )
    assert sample(registry, f"{latency}_sum", stage="client_first_audio", edge="model") == (
        pytest.approx(0.45)
    )
    assert sample(registry, f"{latency}_count", stage="client_first_audio", edge="model") == 1
    assert sample(registry, f"{latency}_count", stage="model_first_byte", edge="client") is None
    assert sample(registry, f"{latency}_sum", stage="model_first_byte", edge="text") == (
        pytest.approx(0.5)
    )
    tool = "audiocore_tool_round_trip_seconds"
    assert sample(registry, f"{tool}_sum", kind="server") == pytest.approx(0.4)
    assert sample(registry, f"{tool}_sum", kind="approval") == pytest.approx(2.0)
    assert sample(registry, "audiocore_bargein_silence_seconds_sum") == pytest.approx(0.012)


def test_the_barge_in_latency_runs_from_the_users_voice_to_the_notice() -> None:
    registry, exporter = CollectorRegistry(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    clock = Clock()
    timer = TurnTimer(TurnMetrics(registry), tracer=provider.get_tracer("test"), clock=clock)
    latency = "audiocore_bargein_latency_seconds"
    timer.user_done("model")
    timer.model_audio()
    timer.user_voice(clock.now)  # the caller speaks over the answer
    clock.now += 0.003
    timer.barge_in()  # the model's interruption flushes the pacer
    timer.turn_end(interrupted=True)
    clock.now += 0.001
    assert timer.barge_in_told() == pytest.approx(0.004)
    timer.silence(0.0)
    assert sample(registry, f"{latency}_count") == 1
    assert sample(registry, f"{latency}_sum") == pytest.approx(0.004)
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "audiocore.barge_in"]
    assert (span.attributes or {})["audiocore.latency_s"] == pytest.approx(0.004)
    # Told twice, or with no voice before it: nothing observed.
    assert timer.barge_in_told() is None
    timer.user_done("model")
    timer.model_audio()
    timer.user_voice(clock.now)  # voice over an answer that then ends by itself
    timer.turn_end()
    clock.now += 5.0
    timer.barge_in()  # a later barge-in is not timed from that voice
    assert timer.barge_in_told() is None
    assert sample(registry, f"{latency}_count") == 1


def test_the_spans_of_a_turn_their_parents_and_order() -> None:
    _, spans = timed_turn()
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (connection,) = by_name["audiocore.connection"]
    first, second = sorted(by_name["audiocore.turn"], key=lambda s: s.start_time or 0)
    tools = sorted(by_name["audiocore.tool"], key=lambda s: s.start_time or 0)
    (bargein,) = by_name["audiocore.barge_in"]
    assert connection.parent is None and connection.attributes == {"audiocore.app": "desk"}
    context = connection.get_span_context()
    assert context is not None
    for turn in (first, second):
        assert turn.parent is not None and turn.parent.span_id == context.span_id
    first_context = first.get_span_context()
    assert first_context is not None
    for child in (*tools, bargein):
        assert child.parent is not None and child.parent.span_id == first_context.span_id
        assert child.context is not None and child.context.trace_id == context.trace_id
    assert [event.name for event in first.events] == [
        "model_first_byte",
        "model_first_audio",
        "client_first_audio",
    ]
    assert first.attributes is not None and first.attributes["audiocore.edge"] == "model"
    assert first.attributes["audiocore.interrupted"] is True
    assert [(t.attributes or {}).get("audiocore.tool") for t in tools] == [
        "lookup_order",
        "get_location",
    ]
    assert [(t.attributes or {}).get("audiocore.tool_kind") for t in tools] == [
        "server",
        "approval",
    ]
    assert (tools[1].attributes or {})["audiocore.outcome"] == "tool-output-denied"
    assert (bargein.attributes or {})["audiocore.silence_s"] == 0.012
    # Ended in order: every child before its parent, the connection last.
    ends = [s.name for s in sorted(spans, key=lambda s: s.end_time or 0)]
    assert ends[-1] == "audiocore.connection"
    assert ends.index("audiocore.barge_in") < ends.index("audiocore.turn")


def test_a_turn_whose_audio_leaves_after_the_models_end_is_timed_to_its_first_frame() -> None:
    """The model's whole answer can arrive (and end) before its first frame
    leaves, paced behind what still plays: the client stage is still timed,
    and the turn's span ends with that frame; a barge-in before it drops it."""
    registry, exporter = CollectorRegistry(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    clock = Clock()
    timer = TurnTimer(TurnMetrics(registry), tracer=provider.get_tracer("t"), clock=clock)
    timer.user_done("text")
    clock.now += 0.2
    timer.model_audio()
    timer.turn_end()
    assert [s.name for s in exporter.get_finished_spans()] == []  # not heard yet
    clock.now += 0.3
    timer.client_audio()
    assert [s.name for s in exporter.get_finished_spans()] == ["audiocore.turn"]
    stage = {"stage": "client_first_audio", "edge": "text"}
    assert registry.get_sample_value("audiocore_turn_latency_seconds_sum", stage) == (
        pytest.approx(0.5)
    )
    # Another, cut by a barge-in before its first frame left: never heard.
    timer.user_done("text")
    timer.model_audio()
    timer.turn_end()
    timer.barge_in()
    timer.client_audio()  # a later answer's frame: not this turn's
    assert registry.get_sample_value("audiocore_turn_latency_seconds_count", stage) == 1
    timer.close()
    assert [s.name for s in exporter.get_finished_spans()].count("audiocore.turn") == 2


def test_without_a_tracer_no_span_is_made() -> None:
    timer = TurnTimer(TurnMetrics(CollectorRegistry()))
    assert timer.parent_context is None
    timer.user_done("text")
    timer.tool_chunk(chunks.ToolInput("c1", "x", {}))
    timer.close()  # nothing to end, nothing fails
    assert not tracing_on()  # no provider in this process: the server makes none


def metric_samples(text: str, name: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith(name):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def test_a_spoken_turn_and_a_tool_fill_the_servers_histograms(tmp_path: Any) -> None:
    settings = Settings(
        data_dir=tmp_path,
        model="offline",
        hello_timeout_s=0.5,
        allowed_hosts=("testserver",),
    )
    with TestClient(create_app(settings)) as client:
        with client.websocket_connect("/ws") as ws:
            start(ws, input={"sampleRate": 16_000, "format": "s16"})
            tone = bytes(2 * 3200) + b"".join(
                int(8000 * ((-1) ** (i // 20))).to_bytes(2, "little", signed=True)
                for i in range(12_800)
            )
            for i in range(0, len(tone), 640):
                ws.send_bytes(tone[i : i + 640])
            ws.send_bytes(bytes(2 * 16_000))
            receive_until(ws, "finish")
            ws.send_text(json.dumps({"type": "text", "text": "what's the weather in Paris"}))
            receive_until(ws, "finish")
        text = client.get("/metrics").text
    latency = metric_samples(text, "audiocore_turn_latency_seconds_count")
    for stage in ("model_first_byte", "model_first_audio", "client_first_audio"):
        assert latency[f'audiocore_turn_latency_seconds_count{{edge="model",stage="{stage}"}}'] == 1
    assert (
        latency['audiocore_turn_latency_seconds_count{edge="text",stage="model_first_byte"}'] == 1
    )
    tools = metric_samples(text, "audiocore_tool_round_trip_seconds_count")
    assert tools['audiocore_tool_round_trip_seconds_count{kind="server"}'] == 1


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP trace collector: what ``POST /v1/traces`` brought, decoded."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.arrived = threading.Condition()
        super().__init__(("127.0.0.1", 0), _OtlpHandler)

    def wait_for(self, names: set[str], timeout: float = 30) -> list[Any]:
        with self.arrived:
            ok = self.arrived.wait_for(lambda: names <= {s.name for s in self.spans}, timeout)
        assert ok, sorted({s.name for s in self.spans})
        return list(self.spans)


class _OtlpHandler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["content-length"]))
        request = ExportTraceServiceRequest.FromString(body)
        spans = [
            span
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self.server.arrived:
            self.server.spans += spans
            self.server.arrived.notify_all()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args: Any) -> None:
        pass


def test_the_command_sends_its_spans_and_adks_in_one_trace_to_a_collector(
    tmp_path: Any,
) -> None:
    """``OTEL_EXPORTER_OTLP_ENDPOINT`` set: ``python -m server`` exports the
    connection's, the turn's and the tool's spans, and ADK's own spans of
    the run are in the connection's trace, below it."""
    collector = Collector()
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_port}",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_SERVICE_NAME": "audiocore-test",
    }
    try:
        with server_process(tmp_path / "data", tmp_path / "log", env=env) as (base, _):

            async def scenario() -> None:
                col, _ = await open_ws(base)
                await say(col, "what's the weather in Paris", 1)
                await col.close()

            asyncio.run(scenario())
            # ADK's (google-adk 2.13): the agent's run, and the tool it ran.
            adk_names = {"invoke_agent voice_agent", "execute_tool get_weather"}
            ours = {"audiocore.connection", "audiocore.turn", "audiocore.tool"}
            spans = collector.wait_for(ours | adk_names)
    finally:
        collector.shutdown()
        collector.server_close()
        thread.join()
    (connection,) = [s for s in spans if s.name == "audiocore.connection"]
    (turn,) = [s for s in spans if s.name == "audiocore.turn"]
    (tool,) = [s for s in spans if s.name == "audiocore.tool"]
    assert turn.parent_span_id == connection.span_id and tool.parent_span_id == turn.span_id
    assert [e.name for e in turn.events][:1] == ["model_first_byte"]
    by_id = {s.span_id: s for s in spans}
    adks = [s for s in spans if not s.name.startswith("audiocore.")]
    assert adks, [s.name for s in spans]
    for span in adks:
        assert span.trace_id == connection.trace_id, span.name
        ancestor = span
        while ancestor.parent_span_id and ancestor.parent_span_id in by_id:
            ancestor = by_id[ancestor.parent_span_id]
        assert ancestor.span_id == connection.span_id, span.name
