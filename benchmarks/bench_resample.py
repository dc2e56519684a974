"""pytest-benchmark suite for streaming resampling.

    pytest benchmarks/bench_resample.py --benchmark-only --benchmark-group-by=param:pair

Each test times one contender on 20 ms chunks of one continuous stream (one
chunk per round, inputs prepared outside the timed region), then checks that
the stream still turns a 1 kHz tone (500 Hz with an 8 kHz side) into the
same tone.  The comparison table with quality and delay is
compare_resample.py.
"""

import itertools

import pytest
from compare_resample import check, chunks_for
from resample_cases import CHUNK_MS, PAIRS, PHONE_PAIRS, contenders, speech_like


def all_cases():
    for in_rate, out_rate in PAIRS + PHONE_PAIRS:
        for name in contenders(in_rate, out_rate):
            pair = f"{in_rate}->{out_rate}"
            yield pytest.param(pair, in_rate, out_rate, name, id=f"{pair}-{name}")


@pytest.mark.parametrize(("pair", "in_rate", "out_rate", "name"), list(all_cases()))
def test_chunk(benchmark, pair, in_rate, out_rate, name):
    factory = contenders(in_rate, out_rate)[name]
    chunk = in_rate * CHUNK_MS // 1000
    contender = factory()
    parts = itertools.cycle(chunks_for(contender, speech_like(chunk * 200, in_rate), chunk))
    process = contender.process
    benchmark.pedantic(lambda: process(next(parts)), rounds=1000, warmup_rounds=100)
    check(factory, in_rate, out_rate)
