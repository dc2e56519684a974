"""How each `JitterBuffer` profile configures the compiled core.

`JitterBuffer` validates its arguments and keeps track of turns; this module
turns a profile and its durations (ms, already range-checked) into a
configured `JitterCore`: the defaults, the checks that relate one duration
to another, and the core's mode, start level, drop policy, time-scaling
and delay estimator.
"""

from __future__ import annotations

from audiocore import _jitter
from audiocore._jitter import JitterCore

PROFILES = ("generator", "reliable", "packet")

# The durations each profile has no use for: giving one is an error.
UNUSED = {
    "generator": ("target_ms", "min_ms", "max_ms"),
    "reliable": ("preroll_ms", "min_ms", "high_water_ms"),
    "packet": ("preroll_ms", "high_water_ms"),
}

# Generator profile: backpressure above this much buffered, by default.
HIGH_WATER_MS = 10_000

# Packet profile: the NetEq-like estimator's defaults.  The 90th percentile
# of the delay relative to the fastest packet in the last 2 s, forgetting at
# 0.995 per packet (~200 packets, 4 s at 20 ms): a delay spike every few
# seconds then does not lift the target (a buffer sized for spikes pays
# their delay all the time), while packets a little later than the target
# are still played: the buffer stalls for them and compresses the extra
# delay away.  Chosen on the traces of benchmarks/jitter_sim.py.
QUANTILE = 0.90
FORGET = 0.995


class Shape:
    """One stream's rate, channels and frame, and ms → samples."""

    def __init__(self, rate: int, channels: int, frame: int, frame_ms: float) -> None:
        self.rate = rate
        self.channels = channels
        self.frame = frame
        self.frame_ms = frame_ms

    def samples(self, value_ms: float) -> int:
        return round(value_ms * self.rate / 1000)


def generator_core(shape: Shape, preroll: float | None, capacity: float | None) -> JitterCore:
    start = shape.samples(shape.frame_ms if preroll is None else preroll)
    return JitterCore(
        shape.rate,
        shape.channels,
        shape.frame,
        _jitter.STREAM,
        shape.samples(60_000 if capacity is None else capacity),
        start,
        max(start, 1),  # after an underrun, resume once the pre-roll is back
        False,  # never drop: a push that does not fit is refused
    )


def reliable_core(
    shape: Shape, target: float | None, hi: float | None, capacity: float | None
) -> JitterCore:
    frame = shape.frame
    if hi is not None and target is None:
        raise ValueError("max_ms: caps the latency of target_ms; give target_ms too")
    if target is not None:
        hi = target + 100 if hi is None else hi
        if hi < target:
            raise ValueError(f"max_ms: expected at least target_ms ({target:g}), got {hi:g}")
    capacity = max(10_000, 2 * (hi or 0)) if capacity is None else capacity
    start = frame if target is None else max(frame, shape.samples(target))
    core = JitterCore(
        shape.rate,
        shape.channels,
        frame,
        _jitter.STREAM,
        shape.samples(capacity),
        start,
        frame,
        True,  # bounded latency: past the capacity the oldest audio goes
    )
    if target is not None and hi is not None:
        # Levels count the frame about to play.  Compress above the cap,
        # down to the target plus half a frame.
        core.set_timescale(
            shape.samples(hi) + frame, shape.samples(target) + frame + frame // 2, -1, -1
        )
    return core


def packet_core(
    shape: Shape,
    target: float | None,
    lo: float | None,
    hi: float | None,
    capacity: float | None,
) -> JitterCore:
    frame, frame_ms = shape.frame, shape.frame_ms
    lo = frame_ms if lo is None else lo
    hi = 1000 if hi is None else hi
    if hi < lo:
        raise ValueError(f"max_ms: expected at least min_ms ({lo:g}), got {hi:g}")
    if target is not None and not lo <= target <= hi:
        raise ValueError(f"target_ms: expected {lo:g} to {hi:g} ms, got {target:g}")
    capacity = max(2000, 2 * hi + 1000) if capacity is None else capacity
    if capacity < hi + 2 * frame_ms:
        raise ValueError(
            f"capacity_ms: expected at least max_ms + two frames ({hi + 2 * frame_ms:g})"
        )
    core = JitterCore(
        shape.rate,
        shape.channels,
        frame,
        _jitter.TIMELINE,
        shape.samples(capacity),
        frame,
        frame,
        False,
    )

    # Levels count the frame about to play: never below one frame.
    def level(value_ms: float) -> int:
        return max(frame, shape.samples(value_ms))

    quantile = 0.0 if target is not None else QUANTILE
    initial = level(2 * frame_ms if target is None else target)
    core.set_adaptive(quantile, FORGET, level(lo), level(hi), initial)
    return core
