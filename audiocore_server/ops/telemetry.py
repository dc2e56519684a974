"""What an operator alerts on, at ``GET /metrics`` in Prometheus' text format.

``Telemetry`` keeps its own registry (one per app, so several apps in one
process never mix their figures) with:

* the event loop's lag: a timer that asks to wake every ``LAG_EVERY_S`` and
  records how late it woke — every live conversation on the process waits
  that long too (``audiocore_event_loop_lag_seconds``, a histogram, and its
  maximum);
* the live sockets and ADK live runs now;
* what was dropped or refused, by reason: client messages past their rate
  (by kind), sockets refused (server full, per address, origin, API key),
  and the totals of finished connections (frames sent, late, concealed;
  input audio dropped because the model did not keep up);
* where turns' time goes (``turn_timing.py``): the latency from the end of
  the user's words to the model's first output and audio and to the first
  audio sent, tool round trips, barge-in to silence.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from .metrics import MetricsTotals
from .turn_timing import TurnMetrics

LAG_EVERY_S = 0.05
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Totals(Collector):
    """The finished connections' totals, read when scraped."""

    def __init__(self, totals: MetricsTotals) -> None:
        self._totals = totals

    def collect(self) -> Iterator[Metric]:
        t = self._totals
        for name, doc, value in (
            ("connections_closed", "live connections closed", t.connections),
            ("frames_sent", "paced audio frames sent by closed connections", t.frames_sent),
            ("frames_late", "frames sent after the client's playback ran dry", t.late_frames),
            ("frames_concealed", "frames concealed while the model stalled", t.concealed_frames),
            (
                "input_chunks_dropped",
                "input audio chunks dropped: the model did not keep up",
                t.dropped_input_chunks,
            ),
        ):
            yield CounterMetricFamily(f"audiocore_{name}", doc, value=value)


class Telemetry:
    def __init__(
        self,
        *,
        connections: Callable[[], int],
        live_runs: Callable[[], int],
        totals: MetricsTotals,
    ) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        Gauge("audiocore_connections", "live sockets now", registry=registry).set_function(
            lambda: connections()
        )
        Gauge("audiocore_live_runs", "ADK live runs now", registry=registry).set_function(
            lambda: live_runs()
        )
        self.lag = Histogram(
            "audiocore_event_loop_lag_seconds",
            "how late the event loop woke a timer: every conversation waited as long",
            buckets=(0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=registry,
        )
        self.lag_max = Gauge(
            "audiocore_event_loop_lag_max_seconds",
            "the longest event loop lag since the start",
            registry=registry,
        )
        self.dropped = Counter(
            "audiocore_client_messages_dropped",
            "client messages dropped past their kind's rate",
            ["kind"],
            registry=registry,
        )
        self.refused = Counter(
            "audiocore_requests_refused",
            "sockets and requests refused, by reason",
            ["reason"],
            registry=registry,
        )
        registry.register(_Totals(totals))
        self.turns = TurnMetrics(registry)  # every connection's turns (turn_timing.py)
        self._watch: asyncio.Task[None] | None = None

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def start(self) -> None:
        self._watch = asyncio.create_task(self._watch_lag())

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)

    async def _watch_lag(self) -> None:
        worst = 0.0
        while True:
            asked = time.monotonic() + LAG_EVERY_S
            await asyncio.sleep(LAG_EVERY_S)
            lag = max(0.0, time.monotonic() - asked)
            self.lag.observe(lag)
            if lag > worst:
                worst = lag
                self.lag_max.set(lag)
