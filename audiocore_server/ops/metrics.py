"""What a connection measures, and the totals the runtime keeps of them.

A ``ConnectionMetrics`` belongs to one connection, which fills it as it
runs; when the connection ends the runtime adds it to its ``MetricsTotals``.
Latency samples are kept only when the settings ask for them
(``collect_timings``, for benchmarks): a list per frame is not free.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path


@dataclasses.dataclass
class ConnectionMetrics:
    collect_timings: bool = False
    frames_sent: int = 0
    late_frames: int = 0
    concealed_frames: int = 0
    made_up_samples: int = 0  # sent, and no sample of the model's audio
    dropped_input_chunks: int = 0
    # Per barge-in: flush → last stale audio frame sent (0 when none was on its way).
    bargein_last_frame_s: list[float] = dataclasses.field(default_factory=list)
    # Per barge-in of the model's: the user's first voiced frame read →
    # the barge-in told to the client (when timings are collected).
    bargein_latency_s: list[float] = dataclasses.field(default_factory=list)
    # Server-added latency, seconds: client frame received → its audio handed
    # to the model; model audio received → frame sent (beyond the pacing).
    latency_in: list[float] = dataclasses.field(default_factory=list)
    latency_out: list[float] = dataclasses.field(default_factory=list)

    def input_latency(self, seconds: float) -> None:
        if self.collect_timings:
            self.latency_in.append(seconds)

    def output_latency(self, seconds: float) -> None:
        if self.collect_timings:
            self.latency_out.append(seconds)

    def bargein_latency(self, seconds: float) -> None:
        if self.collect_timings:
            self.bargein_latency_s.append(seconds)


@dataclasses.dataclass
class MetricsTotals(ConnectionMetrics):
    """The sum of finished connections' metrics."""

    connections: int = 0

    def add(self, metrics: ConnectionMetrics) -> None:
        self.connections += 1
        self.frames_sent += metrics.frames_sent
        self.late_frames += metrics.late_frames
        self.concealed_frames += metrics.concealed_frames
        self.made_up_samples += metrics.made_up_samples
        self.dropped_input_chunks += metrics.dropped_input_chunks
        self.bargein_last_frame_s += metrics.bargein_last_frame_s
        self.bargein_latency_s += metrics.bargein_latency_s
        self.latency_in += metrics.latency_in
        self.latency_out += metrics.latency_out

    def write(self, path: Path, *, per_process: bool) -> None:
        """Write the totals as JSON; ``per_process``: one file per worker (name.PID)."""
        if per_process:
            path = path.with_name(f"{path.name}.{os.getpid()}")
        totals = dataclasses.asdict(self)
        del totals["collect_timings"]
        path.write_text(json.dumps(totals))
