"""One table, one run: float32 <-> PCM16 conversion against the anchors.

    python benchmarks/compare_convert.py [--repeat 15]
    python benchmarks/compare_convert.py --smoke    # each call once: that it runs (CI)

Per contender and size: the median over `repeat` timeit runs of the time per
call (each run long enough to swamp the timer), the ratio to audiocore, and
throughput.  Then audiocore on every SIMD path this CPU has.  Results are
checked against audiocore's after timing.
"""

import argparse
import platform
import statistics
import timeit
import warnings

import numpy as np
from convert_cases import SIZES, f32_input, s16_input, to_f32_cases, to_s16_cases

import audiocore
from audiocore import _convert

warnings.filterwarnings("ignore", category=DeprecationWarning)  # audioop


def per_call_ns(call, repeat):
    if repeat == 0:  # the smoke run: one call, a figure of no meaning
        return timeit.Timer(call).timeit(number=1) * 1e9
    number, _ = timeit.Timer(call).autorange()  # runs of >= 0.2 s
    number = max(1, number // 4)
    runs = timeit.Timer(call).repeat(repeat=repeat, number=number)
    return statistics.median(runs) / number * 1e9


def fmt_ns(ns):
    return f"{ns / 1000:.1f} µs" if ns >= 10_000 else f"{ns:.0f} ns"


def contenders(repeat):
    rows = []
    for direction, make_input, make_cases, reference in (
        ("f32→s16", f32_input, to_s16_cases, lambda s: audiocore.float32_to_pcm16(s)),
        ("s16→f32", s16_input, to_f32_cases, lambda s: audiocore.pcm16_to_float32(s).tobytes()),
    ):
        for n in SIZES:
            src = make_input(n)
            expected = reference(src)
            timings = {}
            for name, (call, extract) in make_cases(src).items():
                timings[name] = per_call_ns(call, repeat)
                if extract is not None:
                    assert extract(call()) == expected, (direction, n, name)
            rows.append((direction, n, timings))
    return rows


def paths(repeat):
    before = _convert._get_path()
    table = {}
    try:
        for path in _convert._paths():
            _convert._set_path(path)
            for n in SIZES:
                x, pcm = f32_input(n), s16_input(n)
                table[path, n] = (
                    per_call_ns(lambda x=x: audiocore.float32_to_pcm16(x), repeat),
                    per_call_ns(lambda pcm=pcm: audiocore.pcm16_to_float32(pcm), repeat),
                )
    finally:
        _convert._set_path(before)
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--smoke", action="store_true", help="time each call once (--repeat 0): that it runs"
    )
    args = parser.parse_args()
    if args.smoke:
        args.repeat = 0
    print(
        f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"numpy {np.__version__}, default path {_convert._get_path()}"
    )
    overhead = fmt_ns(per_call_ns(lambda: None, args.repeat))
    print(f"# empty-lambda call overhead (in every figure): {overhead}\n")
    rows = contenders(args.repeat)
    names = list(dict.fromkeys(name for _, _, timings in rows for name in timings))
    print("| direction | samples | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for direction, n, timings in rows:
        ours = timings["audiocore"]
        cells = []
        for name in names:
            ns = timings.get(name)
            ratio = "" if ns is None or name == "audiocore" else f" ({ns / ours:.1f}×)"
            cells.append("—" if ns is None else fmt_ns(ns) + ratio)
        print(f"| {direction} | {n} | " + " | ".join(cells) + " |")

    print("\naudiocore by SIMD path (time per call; Gsamples/s)\n")
    print("| path | " + " | ".join(f"f32→s16 {n} | s16→f32 {n}" for n in SIZES) + " |")
    print("|---|" + "---:|" * (2 * len(SIZES)))
    table = paths(args.repeat)
    for path in _convert._paths():
        cells = []
        for n in SIZES:
            for ns in table[path, n]:
                cells.append(f"{fmt_ns(ns)}; {n / ns:.2f}")
        print(f"| {path} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
