"""pytest-benchmark suite for float32 <-> PCM16 conversion.

    pytest benchmarks/bench_convert.py --benchmark-only --benchmark-group-by=param:direction,param:n

Each test times one contender on one size, then checks its result against
audiocore's (which the test suite checks against the reference).
"""

import pytest
from convert_cases import SIZES, f32_input, s16_input, to_f32_cases, to_s16_cases

import audiocore


def all_cases():
    for n in SIZES:
        for name in to_s16_cases(f32_input(1)):
            yield pytest.param("f32->s16", n, name, id=f"f32->s16-{n}-{name}")
        for name in to_f32_cases(s16_input(1)):
            yield pytest.param("s16->f32", n, name, id=f"s16->f32-{n}-{name}")


@pytest.mark.parametrize(("direction", "n", "name"), list(all_cases()))
def test_convert(benchmark, direction, n, name):
    if direction == "f32->s16":
        src = f32_input(n)
        call, extract = to_s16_cases(src)[name]
        expected = audiocore.float32_to_pcm16(src)
    else:
        src = s16_input(n)
        call, extract = to_f32_cases(src)[name]
        expected = audiocore.pcm16_to_float32(src).tobytes()
    result = benchmark(call)
    if extract is not None:
        assert extract(result) == expected
