"""One run, four tables: G.711 and the phone paths against the anchors.

    python benchmarks/compare_g711.py [--repeat 9] [--calls 2000]
    python benchmarks/compare_g711.py --smoke    # each call once: that it runs (CI)

1. The codec per call, 20 ms at 8 kHz (160 samples) and 1M samples, both
   laws both ways: audiocore (and with out=), audioop (the reference it
   matches bit for bit), a NumPy table lookup (64 Ki entries to encode, 256
   to decode: the fastest plain NumPy) and the NumPy formulas of the tests.
   Median over `repeat` timeit runs; ratios to audiocore.
2. float32 in or out in one pass, against the two calls through PCM16.
3. The phone paths per 20 ms chunk of one stream (median, mean and p99 over
   `calls` calls after 100 warm-up calls): audiocore's Resampler reading or
   writing G.711, against audioop's codec with a soxr stream (int16 in and
   out), as voice frameworks build it (pipecat: soxr VHQ).  Ratios of the
   medians and of the means to audioop + soxr VHQ: soxr works in blocks,
   so some of its calls do little and its mean is the fairer cost.
4. audiocore's codec per SIMD path.
Results are checked after timing: the codec against audioop, the fused
paths against the codec composed with audiocore's PCM16 resampler, and a
1 kHz tone through every phone contender.
"""

import argparse
import datetime
import math
import os
import platform
import statistics
import sys
import time
import timeit

import numpy as np
from g711_cases import (
    LAWS,
    PHONE_PATHS,
    SIZES,
    audioop,
    decode_cases,
    encode,
    encode_cases,
    float_cases,
    phone_chunks,
    phone_contenders,
    speech_pcm16,
)

import audiocore
from audiocore import _convert

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "core"))
from g711_reference import audioop_decode, audioop_encode  # noqa: E402
from resample_reference import fit_tone, steady  # noqa: E402


def per_call_ns(call, repeat):
    if repeat == 0:  # the smoke run: one call, a figure of no meaning
        return timeit.Timer(call).timeit(number=1) * 1e9
    number, _ = timeit.Timer(call).autorange()  # runs of >= 0.2 s
    number = max(1, number // 4)
    runs = timeit.Timer(call).repeat(repeat=repeat, number=number)
    return statistics.median(runs) / number * 1e9


def fmt_ns(ns):
    return f"{ns / 1000:.1f} µs" if ns >= 10_000 else f"{ns:.0f} ns"


def ratio_cells(timings, names, anchor="audiocore"):
    ours = timings[anchor]
    cells = []
    for name in names:
        ns = timings.get(name)
        ratio = "" if ns is None or name == anchor else f" ({ns / ours:.1f}×)"
        cells.append("—" if ns is None else fmt_ns(ns) + ratio)
    return cells


def codec_table(repeat):
    print("## The codec: time per call (ratio to audiocore)\n")
    rows = []
    for law in LAWS:
        for n in SIZES:
            for direction, cases in (
                (f"PCM16→{law}", encode_cases(law, n)),
                (f"{law}→PCM16", decode_cases(law, n)),
            ):
                timings = {name: per_call_ns(call, repeat) for name, (call, _) in cases.items()}
                # Checked after timing: every contender gives the reference's bytes.
                pcm = speech_pcm16(n).tobytes()
                if direction.startswith("PCM16"):
                    expected = audioop_encode(law, pcm) if audioop else encode(law, pcm)
                else:
                    codes = encode(law, speech_pcm16(n))
                    expected = audioop_decode(law, codes) if audioop else None
                for name, (call, extract) in cases.items():
                    if expected is not None:
                        assert extract(call()) == expected, (direction, n, name)
                rows.append((direction, n, timings))
    names = list(dict.fromkeys(name for _, _, t in rows for name in t))
    print("| direction | samples | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for direction, n, timings in rows:
        print(f"| {direction} | {n} | " + " | ".join(ratio_cells(timings, names)) + " |")


def float_table(repeat):
    print("\n## float32 in one pass, against two calls through PCM16\n")
    print("| direction | samples | one pass | two calls |")
    print("|---|---:|---:|---:|")
    for law in LAWS:
        for n in SIZES:
            for direction, (fused, two) in float_cases(law, n).items():
                a, b = per_call_ns(fused, repeat), per_call_ns(two, repeat)
                assert bytes(fused()) == bytes(two()), (direction, n)
                print(f"| {direction} | {n} | {fmt_ns(a)} | {fmt_ns(b)} ({b / a:.1f}×) |")


def per_chunk_us(factory, chunks, calls):
    stream = factory()
    process = stream.process
    clock = time.perf_counter_ns
    times = []
    for chunk in chunks[:100]:
        process(chunk)
    for chunk in chunks[100 : 100 + calls]:
        start = clock()
        process(chunk)
        times.append(clock() - start)
    times = np.array(times) / 1000
    return float(np.median(times)), float(times.mean()), float(np.percentile(times, 99))


def check_phone_path(name, factory, in_rate, out_rate, input, output):
    """A 1 kHz tone at half scale comes out at half scale; the fused path
    is, bit for bit, the codec composed with the PCM16 resampler."""
    t = np.arange(in_rate // 2)
    pcm = np.rint(0.5 * 32767 * np.sin(2 * np.pi * 1000 / in_rate * t)).astype("<i2")
    data = encode("ulaw", pcm) if input == "ulaw" else pcm.tobytes()
    size = in_rate // 50 * (1 if input == "ulaw" else 2)
    stream = factory()
    out = b"".join(stream.process(data[i : i + size]) for i in range(0, len(data), size))
    y = np.frombuffer(out if output == "s16" else audiocore.ulaw_to_pcm16(out), "<i2")
    amplitude, _ = fit_tone(steady(y.astype(np.float64) / 32768, out_rate // 20), 1000, out_rate)
    assert abs(amplitude - 0.5) < 0.02, (name, amplitude)
    if name == "audiocore fused":
        if input == "ulaw":
            composed = audiocore.Resampler(in_rate, out_rate, input="s16").process(
                audiocore.ulaw_to_pcm16(data)
            )
        else:
            composed = audiocore.pcm16_to_ulaw(
                audiocore.Resampler(in_rate, out_rate, input="s16").process(data)
            )
        assert out == composed, name


def phone_table(calls):
    print("\n## Phone paths: µs per 20 ms chunk of one stream\n")
    print(
        "| path | contender | median | mean | p99 | median vs audioop + soxr VHQ | "
        "mean vs audioop + soxr VHQ |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for label, in_rate, out_rate, input, output in PHONE_PATHS:
        found = phone_contenders(in_rate, out_rate, input, output)
        chunks = phone_chunks(in_rate, input, calls + 100)
        rows = {name: per_chunk_us(f, chunks, calls) for name, f in found.items()}
        anchor = rows.get("audioop + soxr VHQ", (math.nan, math.nan))
        for name, (median, mean, p99) in rows.items():
            print(
                f"| {label} | {name} | {median:.2f} | {mean:.2f} | {p99:.2f} | "
                f"{median / anchor[0]:.2f}× | {mean / anchor[1]:.2f}× |"
            )
        for name, factory in found.items():
            check_phone_path(name, factory, in_rate, out_rate, input, output)


def path_table(repeat):
    print("\n## audiocore's codec by SIMD path: time per call (Msamples/s)\n")
    columns = [(law, way, n) for law in LAWS for way in ("enc", "dec") for n in SIZES]
    print("| path | " + " | ".join(f"{law} {way} {n}" for law, way, n in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    before = _convert._get_path()
    try:
        for path in _convert._paths():
            _convert._set_path(path)
            cells = []
            for law, way, n in columns:
                cases = encode_cases(law, n) if way == "enc" else decode_cases(law, n)
                ns = per_call_ns(cases["audiocore"][0], repeat)
                cells.append(f"{fmt_ns(ns)} ({n / ns * 1000:.0f})")
            print(f"| {path} | " + " | ".join(cells) + " |")
    finally:
        _convert._set_path(before)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument(
        "--smoke", action="store_true", help="each call once, 5 chunks a path: that it runs"
    )
    args = parser.parse_args()
    if args.smoke:
        args.repeat, args.calls = 0, 5
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"# {now}, {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}, numpy {np.__version__}, default path "
        f"{_convert._get_path()}, load average {os.getloadavg()[0]:.2f}"
    )
    overhead = fmt_ns(per_call_ns(lambda: None, args.repeat))
    print(f"# empty-lambda call overhead (in every figure): {overhead}\n")
    codec_table(args.repeat)
    float_table(args.repeat)
    phone_table(args.calls)
    path_table(args.repeat)


if __name__ == "__main__":
    main()
