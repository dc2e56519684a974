"""pytest-benchmark suite for the per-frame cost of `JitterBuffer`.

    pytest benchmarks/bench_jitter.py --benchmark-only --benchmark-group-by=param:rate

One round is one 20 ms frame in and one out (push + pop) on a stream kept
in steady state, inputs prepared outside the timed region; the anchor is a
plain FIFO (a deque of bytes frames), the least a Python jitter buffer could
cost.  Concealment and time compression are timed on their own.  After the
timed rounds each test checks that the output is still the input.  Playout
quality is jitter_sim.py's job.
"""

import itertools
from collections import deque

import numpy as np
import pytest

from audiocore.jitter import JitterBuffer

RATES = [16000, 24000, 48000]
ROUNDS = 2000


def frames(rate, count=200):
    n = rate // 50
    t = np.arange(n * count) / rate
    pcm = (8000 * np.sin(2 * np.pi * 180 * t)).astype("<i2")
    return [pcm[i * n : (i + 1) * n].tobytes() for i in range(count)]


@pytest.mark.parametrize("rate", RATES)
def test_fifo_anchor(benchmark, rate):
    queue = deque()
    chunks = itertools.cycle(frames(rate))

    def step():
        queue.append(next(chunks))
        return queue.popleft()

    benchmark.pedantic(step, rounds=ROUNDS, warmup_rounds=100)


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("profile", ["generator", "reliable", "packet"])
def test_push_pop(benchmark, rate, profile):
    chunks = frames(rate)
    jb = JitterBuffer(rate, profile=profile)
    counter = itertools.count()
    push, pop = jb.push, jb.pop
    if profile == "packet":
        n = rate // 50

        def step():
            i = next(counter)
            push(
                chunks[i % len(chunks)],
                seq=i & 0xFFFF,
                timestamp=(i * n) & 0xFFFFFFFF,
                arrival=i * 0.02,
            )
            return pop()

        # Fill to the target first, so every timed pop plays a packet.
        for _ in range(3):
            step()
    else:

        def step():
            push(chunks[next(counter) % len(chunks)])
            return pop()

    benchmark.pedantic(step, rounds=ROUNDS, warmup_rounds=100)
    s = jb.stats
    assert s["concealed_samples"] == 0
    assert step() in chunks


@pytest.mark.parametrize("rate", RATES)
def test_pop_concealing(benchmark, rate):
    """An underrun: the period search happens once per event, then each pop
    repeats it with a fade."""
    jb = JitterBuffer(rate)
    chunk = frames(rate, 1)[0]

    def step():
        jb.push(chunk)
        jb.pop()
        return jb.pop()  # concealment

    benchmark.pedantic(step, rounds=ROUNDS // 2, warmup_rounds=10)
    # Counted from the pops made, however many rounds ran (one, in the
    # smoke run with --benchmark-disable): every second pop conceals.
    pops = jb.stats["emitted_samples"] // (rate // 50)
    assert jb.stats["concealment_events"] == pops // 2 > 0


@pytest.mark.parametrize("rate", RATES)
def test_pop_compressing(benchmark, rate):
    """Catching up a backlog: a correlation search and a cross-fade per pop."""
    jb = JitterBuffer(rate, profile="reliable", target_ms=20, max_ms=40, capacity_ms=600_000)
    backlog = b"".join(frames(rate, 200)) * 20  # 80 s
    jb.push(backlog)
    for _ in range(10):
        jb.pop()  # the level estimate settles above max_ms
    benchmark.pedantic(jb.pop, rounds=ROUNDS, warmup_rounds=10)
    pops = jb.stats["emitted_samples"] // (rate // 50)
    assert jb.stats["accelerations"] == pops > 10  # every pop compressed
