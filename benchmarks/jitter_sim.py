"""Trace-driven simulator for `JitterBuffer` against fixed-delay buffers, a
plain FIFO and the oracle.

What it measures: playout quality, not speed.  Each seeded synthetic trace
says when every piece of audio was sent and when (if) it arrived; a consumer
pops one frame every frame period on the receiver's clock.  Every output
sample is traced back to its source sample (the core's `positions`), so the
metrics are exact:

- delay: play time - send time - the trace's smallest one-way delay (mean and
  p95 over played samples; for model output, play time - arrival time);
- start: turn start delay (first sample played - first chunk arrived), max;
- conceal %: concealed output samples / samples sent (network loss
  included); for model output the check line compares it with the stall
  inherent in the source (an ideal zero-delay player's);
- late %: packets that arrived too late to be used / packets that arrived;
- disc/min: audible discontinuities, an output step larger than 1.5x the
  largest step in the source signal (merged within 10 ms);
- lost %: audio that arrived but was never played (late, dropped); network
  loss is in conceal %, time-scaling is not loss;
- stale: samples of a flushed turn played after the barge-in (after the
  frame that was already in flight).

Baselines: a fixed-delay buffer plays sample j at T0 + D + j / rate (T0 the
first packet's send time plus the smallest one-way delay; late and lost audio
become zeros); the FIFO plays what arrived, in arrival order, as soon as it
can (zeros when empty); the oracle is the smallest fixed delay with no late
packet over the whole trace (for model output: per turn).

Run: python benchmarks/jitter_sim.py [--seed N] [--seconds S]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from collections import deque

import numpy as np

from audiocore.jitter import JitterBuffer

PACKET_RATE = 16000
TS_OFFSET = 2**32 - 5 * PACKET_RATE  # RTP timestamps wrap 5 s into every packet trace
MODEL_RATE = 24000
FRAME_MS = 20
FIXED_DELAYS = (20, 40, 60, 80, 120, 200)  # ms


@dataclasses.dataclass
class Piece:
    """A packet or chunk: source samples [start, start + n), sent and arrived
    (None = lost) on the receiver's clock."""

    start: int
    n: int
    send: float
    arrival: float | None
    seq: int = 0
    turn: int = 0
    final: bool = False


@dataclasses.dataclass
class Trace:
    name: str
    rate: int
    source: np.ndarray  # int16, all samples the sender produced
    pieces: list[Piece]
    duration: float
    profile: str = "packet"
    flushes: list[float] = dataclasses.field(default_factory=list)
    # Receiver-clock send time of sample j: send of its piece + offset / rate_sender.
    sender_rate: float = 0.0


# -- synthetic sources ----------------------------------------------------------


def speech(rng, seconds, rate, gaps=True):
    """Voiced speech-like audio: harmonics of a wandering f0, syllable
    envelope, a little noise; with `gaps`, talk spurts of 1-3 s separated by
    0.3-1.2 s of silence."""
    n = round(seconds * rate)
    t = np.arange(n) / rate
    f0 = (
        140
        + 50 * np.sin(2 * np.pi * 0.3 * t + rng.uniform(0, 6))
        + 20 * np.sin(2 * np.pi * 1.7 * t)
    )
    phase = 2 * np.pi * np.cumsum(f0) / rate
    x = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t + rng.uniform(0, 6))
    x = x * envelope + 0.02 * rng.standard_normal(n)
    if gaps:
        mask = np.zeros(n)
        at = 0.0
        while at < seconds:
            talk, pause = rng.uniform(1, 3), rng.uniform(0.3, 1.2)
            a, b = int(at * rate), int(min(seconds, at + talk) * rate)
            ramp = min(int(0.01 * rate), (b - a) // 2)
            mask[a:b] = 1
            mask[a : a + ramp] = np.linspace(0, 1, ramp)
            mask[b - ramp : b] = np.linspace(1, 0, ramp)
            at += talk + pause
        x = x * mask
    return np.round(x / np.abs(x).max() * 12000).astype(np.int16)


# -- traces ---------------------------------------------------------------------


def packet_trace(name, rng, seconds, delays, lost=None, drift_ppm=0.0):
    rate = PACKET_RATE
    p = rate * FRAME_MS // 1000
    count = int(seconds * 1000 / FRAME_MS)
    source = speech(rng, count * p / rate + 0.1, rate, gaps=(name == "bursty loss"))
    scale = 1 / (1 + drift_ppm * 1e-6)  # sender seconds -> receiver seconds
    pieces = []
    for i in range(count):
        send = i * p / rate * scale
        arrival = None if lost is not None and lost[i] else send + delays[i]
        pieces.append(Piece(i * p, p, send, arrival, seq=i))
    return Trace(name, rate, source, pieces, count * p / rate, sender_rate=rate / scale)


def gilbert_elliott(rng, count, p_gb=0.03, p_bg=0.3, loss_good=0.002, loss_bad=0.7):
    lost = np.zeros(count, bool)
    bad = False
    for i in range(count):
        bad = rng.random() < (1 - p_bg if bad else p_gb)
        lost[i] = rng.random() < (loss_bad if bad else loss_good)
    return lost


def spikes(rng, count, p_s):
    """Delay spikes: every 4-8 s the path stalls 150-400 ms, then delivers
    the backlog at once (a Wi-Fi hiccup)."""
    delays = 0.04 + np.abs(rng.normal(0, 0.003, count))
    i = int(rng.uniform(2, 4) / p_s)
    while i < count:
        stall = rng.uniform(0.15, 0.4)
        release = i * p_s + stall
        j = i
        while j < count and j * p_s < release:
            delays[j] = max(delays[j], release - j * p_s + 0.04)
            j += 1
        i = j + int(rng.uniform(4, 8) / p_s)
    return delays


def packet_traces(rng, seconds):
    p_s = FRAME_MS / 1000
    count = int(seconds / p_s)
    return [
        packet_trace("constant", rng, seconds, np.full(count, 0.05)),
        packet_trace("gaussian", rng, seconds, np.maximum(0.0, 0.05 + rng.normal(0, 0.015, count))),
        packet_trace(
            "bursty loss",
            rng,
            seconds,
            0.05 + np.abs(rng.normal(0, 0.005, count)),
            lost=gilbert_elliott(rng, count),
        ),
        packet_trace("delay spikes", rng, seconds, spikes(rng, count, p_s)),
        packet_trace(
            "drift +2000ppm",
            rng,
            seconds,
            0.05 + np.abs(rng.normal(0, 0.005, count)),
            drift_ppm=2000,
        ),
        packet_trace(
            "drift -2000ppm",
            rng,
            seconds,
            0.05 + np.abs(rng.normal(0, 0.005, count)),
            drift_ppm=-2000,
        ),
    ]


def tcp_trace(rng, seconds):
    """Mic over TCP: 20 ms chunks, 30 ms base delay, stalls of 100-500 ms
    every 3-8 s released as one burst (in order, nothing lost)."""
    rate = PACKET_RATE
    p = rate * FRAME_MS // 1000
    count = int(seconds * 1000 / FRAME_MS)
    source = speech(rng, count * p / rate + 0.1, rate)
    delays = 0.03 + np.abs(rng.normal(0, 0.002, count))
    i = int(rng.uniform(2, 4) * 50)
    while i < count:
        stall = rng.uniform(0.1, 0.5)
        j = i
        while j < count and j * 0.02 < i * 0.02 + stall:
            delays[j] = i * 0.02 + stall - j * 0.02 + 0.03
            j += 1
        i = j + int(rng.uniform(3, 8) * 50)
    sends = np.arange(count) * p / rate
    arrivals = np.maximum.accumulate(sends + delays)  # TCP keeps order
    pieces = [Piece(i * p, p, sends[i], arrivals[i], seq=i) for i in range(count)]
    return Trace(
        "mic over TCP", rate, source, pieces, count * p / rate, "reliable", sender_rate=rate
    )


def model_trace(rng, seconds, barge_in):
    """Model output: turns of 3-10 s of audio; the first 2 s arrive within
    200 ms, the rest at 0.6-1.6x real time (a new speed every 0.5 s, and a
    0.3-2 s stall at one change in five); 2-4 s of user speech between
    turns.  With `barge_in`, every other turn is interrupted while playing
    and the model keeps sending it for another 300 ms."""
    rate = MODEL_RATE
    pieces, flushes = [], []
    source_parts = []
    at, pos, turn = 1.0, 0, 0
    while at < seconds - 12:
        turn += 1
        length = int(rng.uniform(3, 10) * rate)
        audio = speech(rng, length / rate, rate, gaps=False)[:length]
        source_parts.append(audio)
        sent, t = 0, at
        speed = rng.uniform(0.6, 1.6)
        next_change = t + 0.5
        while sent < length:
            n = min(length - sent, int(rng.uniform(0.02, 0.12) * rate))
            if sent < 2 * rate:
                t += 0.2 * n / (2 * rate)
            else:
                if t > next_change:
                    speed, next_change = rng.uniform(0.6, 1.6), t + 0.5
                    if rng.random() < 0.2:
                        t += rng.uniform(0.3, 2.0)  # a stall
                t += n / rate / speed
            pieces.append(Piece(pos + sent, n, t, t, turn=turn, final=sent + n == length))
            sent += n
        if barge_in and turn % 2 == 0:
            cut = at + rng.uniform(0.5, min(2.5, length / rate * 0.8))
            flushes.append(cut)
            # The model notices 300 ms later; later chunks of the turn never come.
            pieces = [q for q in pieces if q.turn != turn or q.arrival <= cut + 0.3]
        pos += length
        at = max(t, at + length / rate) + rng.uniform(2, 4)
    source = np.concatenate(source_parts)
    name = "model + barge-in" if barge_in else "model bursts"
    return Trace(name, rate, source, pieces, at, "generator", flushes, sender_rate=rate)


# -- running a JitterBuffer -----------------------------------------------------------


@dataclasses.dataclass
class Run:
    """One buffer's playout of a trace: output samples, the source sample each
    one is (-1: synthesized or silence), and when it plays."""

    out: np.ndarray
    src: np.ndarray
    play: np.ndarray
    conceal_pct: float
    late_pct: float
    lost_pct: float | None = None  # None: every arrived, unflushed sample must play
    stats: dict | None = None


def pop_clock(trace):
    """Pop times: every frame from just after the first arrival, at a phase
    unrelated to the packet clock, until a second after the trace ends."""
    t0 = min(q.arrival for q in trace.pieces if q.arrival is not None) + 0.0071
    return t0 + np.arange(int((trace.duration + 1.0) * 1000 / FRAME_MS)) * FRAME_MS / 1000


def arrived_in_order(trace):
    return sorted((q for q in trace.pieces if q.arrival is not None), key=lambda q: q.arrival)


def frame_play_times(pops, frame, rate):
    return (pops[:, None] + np.arange(frame)[None, :] / rate).reshape(-1)


def run_jitter_buffer(trace, **kwargs):
    rate = trace.rate
    frame = rate * FRAME_MS // 1000
    jb = JitterBuffer(rate, frame_ms=FRAME_MS, profile=trace.profile, **kwargs)
    pieces = arrived_in_order(trace)
    pops = pop_clock(trace)
    outs, srcs = [], []
    pos = np.empty(frame, np.int64)
    origin = None
    turn_range, offsets = {}, {}
    flushes = deque(sorted(trace.flushes))
    i = 0
    for t in pops:
        while flushes and flushes[0] <= t:
            flushes.popleft()
            jb.flush()
        while i < len(pieces) and pieces[i].arrival <= t:
            q = pieces[i]
            data = trace.source[q.start : q.start + q.n]
            if trace.profile == "packet":
                jb.push(
                    data,
                    seq=q.seq & 0xFFFF,
                    timestamp=(q.start + TS_OFFSET) & 0xFFFFFFFF,
                    arrival=q.arrival,
                )
                if origin is None:
                    origin = jb._core.read_pos - q.start
            else:
                before = jb._core.write_pos
                if jb.push(data, arrival=q.arrival, turn=q.turn, final=q.final):
                    lo, _ = turn_range.get(q.turn, (before, before))
                    turn_range[q.turn] = (lo, jb._core.write_pos)
                    # Stream position - source index, per turn (it changes at a flush).
                    offsets.setdefault(q.turn, before - q.start)
            i += 1
            if i == len(pieces) and trace.profile != "generator":
                jb.end_turn()  # end of stream: stop concealing after the last packet
        outs.append(np.frombuffer(jb._core.pop(pos), "<i2"))
        srcs.append(pos.copy())
    raw = np.concatenate(srcs)
    # -2 - p: cross-faded into source p after concealment; it was played.
    stream_pos = np.where(raw >= 0, raw, np.where(raw <= -2, -raw - 2, -1))
    if trace.profile == "packet":
        src = np.where(stream_pos >= 0, stream_pos - origin, -1)
    else:
        src = np.full_like(stream_pos, -1)
        for turn, (lo, hi) in turn_range.items():
            inside = (stream_pos >= lo) & (stream_pos < hi)
            src[inside] = stream_pos[inside] - offsets[turn]
    s = jb.stats
    arrived = len(pieces)
    return Run(
        np.concatenate(outs),
        src,
        frame_play_times(pops, frame, rate),
        s["concealed_samples"] / sent_samples(trace) * 100,
        s["late_packets"] / max(1, arrived) * 100,
        # Time-scaling consumes samples without playing them verbatim, so
        # loss is what the buffer refused or skipped as too late.
        None if trace.profile == "generator" else s["late_samples"] / len(trace.source) * 100,
        s,
    )


def run_fifo(trace):
    """Plays arrived audio in arrival order as soon as it can, zeros when
    empty; a barge-in empties it (it has no turn ids to refuse stragglers)."""
    rate = trace.rate
    frame = rate * FRAME_MS // 1000
    pieces = arrived_in_order(trace)
    pops = pop_clock(trace)
    flushes = deque(sorted(trace.flushes))
    flushed = {turn for _, turn in flushed_turns(trace)}
    queue = deque()
    outs, srcs = [], []
    i = concealed = 0
    for t in pops:
        while flushes and flushes[0] <= t:
            flushes.popleft()
            queue.clear()
        while i < len(pieces) and pieces[i].arrival <= t:
            queue.append([pieces[i], 0])
            i += 1
        n = 0
        out = np.zeros(frame, np.int16)
        src = np.full(frame, -1)
        while n < frame and queue:
            q, used = queue[0]
            take = min(q.n - used, frame - n)
            src[n : n + take] = np.arange(q.start + used, q.start + used + take)
            out[n : n + take] = trace.source[src[n : n + take]]
            n += take
            if used + take == q.n:
                queue.popleft()
            else:
                queue[0][1] = used + take
        # Silence counts as concealment only while more audio is due.
        due = i < len(pieces) and (
            trace.profile != "generator"
            or not (pieces[i - 1].final or pieces[i - 1].turn in flushed)
        )
        if n or due:
            concealed += frame - n
        outs.append(out)
        srcs.append(src)
    return Run(
        np.concatenate(outs),
        np.concatenate(srcs),
        frame_play_times(pops, frame, rate),
        concealed / sent_samples(trace) * 100,
        0.0,
        None if trace.profile == "generator" else 0.0,
    )


def run_fixed(trace, delay):
    """Fixed playout delay on the receiver's clock: sample j plays at
    T0 + D + j / rate, T0 the first sample's send time plus the trace's
    smallest one-way delay; for model output `delay` maps each turn to its
    D and T0 is the turn's first arrival.  Late and lost audio is silence."""
    rate = trace.rate
    play = np.full(len(trace.source), np.nan)
    firsts = {}
    for q in trace.pieces:
        firsts.setdefault(q.turn, q)
    t0 = send_times(trace)[0] + smallest_delay(trace)
    for q in trace.pieces:
        if isinstance(delay, dict):
            f = firsts[q.turn]
            base, d = f.arrival - f.start / rate, delay[q.turn]
        else:
            base, d = t0, delay
        play[q.start : q.start + q.n] = base + d + np.arange(q.start, q.start + q.n) / rate
    on_time = np.zeros(len(trace.source), bool)
    covered = ~np.isnan(play)
    late = arrived = lost = 0
    for q in trace.pieces:
        if q.arrival is None:
            lost += q.n
        else:
            arrived += 1
            if q.arrival <= play[q.start] + 1e-9:  # the oracle sits exactly on it
                on_time[q.start : q.start + q.n] = True
            else:
                late += 1
    idx = np.flatnonzero(covered)
    src = np.where(on_time[idx], idx, -1)
    out = np.where(on_time[idx], trace.source[idx], 0).astype(np.int16)
    missing = int(np.sum(covered & ~on_time))
    return Run(
        out,
        src,
        play[idx],
        missing / sent_samples(trace) * 100,
        late / max(1, arrived) * 100,
        None if trace.profile == "generator" else (missing - lost) / sent_samples(trace) * 100,
    )


def sent_samples(trace):
    return sum(q.n for q in trace.pieces)


def smallest_delay(trace):
    return min(q.arrival - q.send for q in trace.pieces if q.arrival is not None)


def oracle_delay(trace, per_turn=False):
    """The smallest fixed delay with no late packet: whole trace, or per turn."""
    rate = trace.rate
    if not per_turn:
        t0 = send_times(trace)[0] + smallest_delay(trace)
        return max(q.arrival - t0 - q.start / rate for q in trace.pieces if q.arrival)
    firsts, need = {}, {}
    for q in trace.pieces:
        f = firsts.setdefault(q.turn, q)
        lateness = q.arrival - f.arrival - (q.start - f.start) / rate
        need[q.turn] = max(need.get(q.turn, 0.0), lateness)
    return need


# -- metrics ----------------------------------------------------------------------


def discontinuities(out, source, rate):
    limit = 1.5 * np.abs(np.diff(source.astype(np.int64))).max()
    steps = np.flatnonzero(np.abs(np.diff(out.astype(np.int64))) > limit)
    if not len(steps):
        return 0
    return 1 + int(np.sum(np.diff(steps) > rate // 100))


def send_times(trace):
    """Receiver-clock send time of every source sample."""
    t = np.zeros(len(trace.source))
    for q in trace.pieces:
        t[q.start : q.start + q.n] = q.send + np.arange(q.n) / trace.sender_rate
    return t


def arrival_times(trace):
    t = np.full(len(trace.source), np.inf)
    for q in trace.pieces:
        if q.arrival is not None:
            t[q.start : q.start + q.n] = q.arrival
    return t


def flushed_turns(trace):
    """(flush time, turn playing then) for every barge-in."""
    marks = []
    for cut in trace.flushes:
        before = [q.turn for q in trace.pieces if q.arrival <= cut]
        marks.append((cut, before[-1]))
    return marks


@dataclasses.dataclass
class Row:
    trace: str
    buffer: str
    delay_mean: float
    delay_p95: float
    start: float
    conceal: float
    late: float
    disc: float
    lost: float
    stale: int | None


def measure(trace, run, label):
    played = run.src >= 0
    if trace.profile == "generator":
        ref = arrival_times(trace)
    else:
        ref = send_times(trace) + smallest_delay(trace)
    delay = (run.play[played] - ref[run.src[played]]) * 1000
    start = stale = float("nan")
    lost = run.lost_pct
    if trace.profile == "generator":
        firsts = {}
        for q in trace.pieces:
            firsts.setdefault(q.turn, q)
        first_play = {}
        order = np.argsort(run.src[played], kind="stable")
        srcs, plays = run.src[played][order], run.play[played][order]
        for turn, q in firsts.items():
            k = np.searchsorted(srcs, q.start)
            if k < len(srcs) and srcs[k] == q.start:
                first_play[turn] = plays[k] - q.arrival
        start = max(first_play.values()) * 1000
        ranges = {}
        for q in trace.pieces:
            lo, hi = ranges.get(q.turn, (q.start, q.start))
            ranges[q.turn] = (min(lo, q.start), max(hi, q.start + q.n))
        stale = 0
        flushed = set()
        for cut, turn in flushed_turns(trace):
            # The frame in flight at the barge-in was already sent.
            lo, hi = ranges[turn]
            after = run.play >= cut + FRAME_MS / 1000
            stale += int(np.sum(after & (run.src >= lo) & (run.src < hi)))
            flushed.add(turn)
        expected = np.zeros(len(trace.source), bool)
        for q in trace.pieces:
            if q.turn not in flushed and q.arrival is not None:
                expected[q.start : q.start + q.n] = True
        seen = np.zeros(len(trace.source), bool)
        seen[run.src[played]] = True
        lost = np.sum(expected & ~seen) / max(1, expected.sum()) * 100
    return Row(
        trace.name,
        label,
        float(np.mean(delay)),
        float(np.percentile(delay, 95)),
        start,
        run.conceal_pct,
        run.late_pct,
        discontinuities(run.out, trace.source, trace.rate) / (trace.duration / 60),
        lost,
        stale,
    )


def ideal_stall_ms(trace):
    """Stall of an ideal zero-delay player: plays every sample as soon as it
    has arrived and the previous one has played (flushed turns left out)."""
    stall = 0.0
    turns = {}
    for q in trace.pieces:
        turns.setdefault(q.turn, []).append(q)
    flushed = {turn for _, turn in flushed_turns(trace)}
    for turn, qs in turns.items():
        if turn in flushed:
            continue
        clock = qs[0].arrival
        for q in qs:
            if q.arrival > clock:
                stall += q.arrival - clock
                clock = q.arrival
            clock += q.n / trace.rate
    return stall * 1000


# -- the table ----------------------------------------------------------------------


def below_curve(row, fixed):
    """True if no fixed-delay buffer, interpolated between the fixed delays,
    has as little delay and less concealment (by more than 0.02 points:
    20 ms in a 2-minute trace).
    Delays below every fixed buffer's are out of their reach: fine."""
    pts = sorted((f.delay_mean, f.conceal) for f in fixed)
    d = [p[0] for p in pts]
    c = [p[1] for p in pts]
    return row.delay_mean < d[0] or row.conceal <= float(np.interp(row.delay_mean, d, c)) + 0.02


def fmt(v, spec):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--seconds", type=float, default=120.0)
    args = parser.parse_args()
    if args.seconds < 14:
        # model_trace starts a turn of up to 10 s only while 12 s remain.
        parser.error(f"--seconds: expected at least 14 (one model turn), got {args.seconds:g}")
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    rows, checks = [], []
    for trace in packet_traces(rng, args.seconds) + [tcp_trace(rng, args.seconds)]:
        fixed = [measure(trace, run_fixed(trace, d / 1000), f"fixed {d} ms") for d in FIXED_DELAYS]
        oracle = oracle_delay(trace)
        oracle_row = measure(trace, run_fixed(trace, oracle), f"oracle {oracle * 1000:.0f} ms")
        kwargs = {"target_ms": 40} if trace.profile == "reliable" else {}
        label = f"JitterBuffer {trace.profile}" + (" 40" if kwargs else "")
        jb = measure(trace, run_jitter_buffer(trace, **kwargs), label)
        rows += [jb, *fixed, measure(trace, run_fifo(trace), "FIFO"), oracle_row]
        if trace.profile == "packet":
            ok = below_curve(jb, fixed)
            checks.append(f"{trace.name}: at/below the fixed-delay curve: {yes(ok)}")
        else:
            checks.append(
                f"{trace.name}: lost {jb.lost:.2f}% (nothing dropped), p95 delay "
                f"{jb.delay_p95:.0f} ms, stalls concealed {jb.conceal:.2f}%"
            )
        if trace.name == "gaussian":
            ratio = jb.delay_mean / max(1e-9, oracle_row.delay_mean)
            checks.append(
                f"gaussian: delay {ratio:.2f}x oracle at {jb.conceal:.2f}% concealment "
                f"(target <= 1.5x at <= 1%): {yes(ratio <= 1.5 and jb.conceal <= 1)}"
            )
        if trace.name.startswith("drift"):
            checks.append(
                f"{trace.name}: lost {jb.lost:.2f}% + concealed {jb.conceal:.2f}% "
                f"(target <= 1%): {yes(jb.lost + jb.conceal <= 1)}"
            )
    for barge_in in (False, True):
        trace = model_trace(rng, args.seconds, barge_in)
        run = run_jitter_buffer(trace)
        jb = measure(trace, run, "JitterBuffer generator")
        stall = ideal_stall_ms(trace)
        concealed_ms = run.stats["concealed_samples"] / trace.rate * 1000
        need = oracle_delay(trace, per_turn=True)
        whole = max(need.values())
        rows += [
            jb,
            *(
                measure(trace, run_fixed(trace, dict.fromkeys(need, d / 1000)), f"fixed {d} ms")
                for d in (20, 100, 200)
            ),
            measure(trace, run_fifo(trace), "FIFO"),
            measure(
                trace, run_fixed(trace, dict.fromkeys(need, whole)), f"oracle {whole * 1000:.0f} ms"
            ),
            measure(trace, run_fixed(trace, need), "oracle per turn"),
        ]
        good = jb.start <= FRAME_MS and jb.lost == 0 and jb.stale == 0
        checks.append(
            f"{trace.name}: start {jb.start:.1f} ms (<= {FRAME_MS}), lost {jb.lost:.3f}%, "
            f"stale {jb.stale}, concealed {concealed_ms:.0f} ms vs the source's own stalls "
            f"{stall:.0f} ms: {yes(good)}"
        )

    header = (
        f"{'trace':<17} {'buffer':<25} {'delay':>7} {'p95':>7} {'start':>6} "
        f"{'conceal%':>8} {'late%':>6} {'disc/min':>8} {'lost%':>6} {'stale':>6}"
    )
    print(f"seed {args.seed}, {args.seconds:g} s per trace, {FRAME_MS} ms frames; delays in ms")
    print(header)
    print("-" * len(header))
    last = None
    for r in rows:
        if last is not None and r.trace != last:
            print()
        last = r.trace
        print(
            f"{r.trace:<17} {r.buffer:<25} {fmt(r.delay_mean, '7.1f')} {fmt(r.delay_p95, '7.1f')} "
            f"{fmt(r.start, '6.1f')} {fmt(r.conceal, '8.2f')} {fmt(r.late, '6.2f')} "
            f"{fmt(r.disc, '8.1f')} {fmt(r.lost, '6.2f')} {fmt(r.stale, '6.0f')}"
        )
    print()
    for line in checks:
        print(line)
    print(f"({time.perf_counter() - started:.1f} s)")


def yes(ok):
    return "yes" if ok else "NO"


if __name__ == "__main__":
    main()
