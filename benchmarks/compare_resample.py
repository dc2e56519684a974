"""One run, three tables and two plots: streaming resamplers side by side.

    python benchmarks/compare_resample.py [--calls 1000] [--plots DIR]
    python benchmarks/compare_resample.py --phone   # the 8 kHz pairs only, no plots
    python benchmarks/compare_resample.py --smoke   # one ratio, few calls, no plots (CI)

1. Speed: time per 20 ms chunk (median and p99 over `calls` consecutive
   calls of one stream, after 100 warm-up calls) and the time for a 10 s
   buffer in one call plus flush (median of 5, with the real-time factor),
   for 48k->16k, 48k->24k, 24k->48k and 44.1k->16k, then the phone rate's
   8k->16k, 8k->24k and 24k->8k; ratios are to soxr HQ in the same run.
   audiocore takes float32 and returns PCM16 (the mic path); "f32" rows
   return float32.  scipy's resample_poly is one-shot, so only its
   throughput is shown.
2. Quality, by the same functions for everyone (resample_cases.py): alias
   (or image) rejection into [0, 0.875 x Nyquist], passband ripple to
   0.875 x Nyquist, SNR of a 1 kHz sine, delay and 20 ms-chunk latency
   (mean/max), and the share of 20 ms calls that return nothing.
   audiocore is rated on its float32 output (PCM16 would cap SNR at ~92 dB).
3. audiocore per SIMD path.
Plots: frequency response, audiocore vs soxr, as PNG in `--plots`.
Outputs are checked after timing: every contender's output for a 1 kHz
tone (500 Hz with an 8 kHz side) matches the tone.
"""

import argparse
import os
import platform
import statistics
import time

import numpy as np
from resample_cases import (
    CHUNK_MS,
    PAIRS,
    PHONE_PAIRS,
    contenders,
    fit_tone,
    one_shot,
    quality_row,
    speech_like,
    spur_db,
    steady,
    stream_output,
    tone,
)

from audiocore import _resample


def chunks_for(contender, x, chunk):
    if getattr(contender, "takes_pcm16", False):
        pcm = np.rint(np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()
        return [pcm[2 * i : 2 * (i + chunk)] for i in range(0, len(x), chunk)]
    return [x[i : i + chunk] for i in range(0, len(x), chunk)]


def per_chunk_us(factory, in_rate, calls):
    """(median, mean, p99) µs per call of 20 ms; the mean is the real cost
    of a bursty contender, whose median call may do nothing."""
    chunk = in_rate * CHUNK_MS // 1000
    x = speech_like(chunk * (calls + 100), in_rate)
    contender = factory()
    parts = chunks_for(contender, x, chunk)
    process = contender.process
    clock = time.perf_counter_ns
    times = []
    for part in parts[:100]:
        process(part)
    for part in parts[100:]:
        start = clock()
        process(part)
        times.append(clock() - start)
    times = np.array(times) / 1000
    return float(np.median(times)), float(times.mean()), float(np.percentile(times, 99))


def ten_seconds_ms(factory, in_rate, reps):
    x = speech_like(10 * in_rate, in_rate)
    runs = []
    for _ in range(reps):
        contender = factory()
        buf = chunks_for(contender, x, len(x))[0]
        start = time.perf_counter()
        contender.process(buf)
        contender.flush()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) * 1000


def one_shot_ms(function, in_rate, reps):
    x = speech_like(10 * in_rate, in_rate)
    runs = []
    for _ in range(reps):
        start = time.perf_counter()
        function(x)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) * 1000


def check(factory, in_rate, out_rate):
    # 1 kHz, or 500 Hz with an 8 kHz side: audioop.ratecv's linear
    # interpolation droops 4% at 1 kHz there, more than the check allows.
    freq = min(1000, min(in_rate, out_rate) // 16)
    y = stream_output(factory, tone(freq, in_rate, in_rate // 2), in_rate)
    amplitude, _ = fit_tone(steady(y, out_rate // 20), freq, out_rate)
    assert abs(amplitude - 0.5) < 0.01, amplitude


def speed_table(calls, pairs, reps=5):
    print("## Speed: µs per 20 ms chunk, and ms per 10 s buffer (process + flush)\n")
    print("| ratio | contender | median | mean | p99 | median vs soxr HQ | 10 s | × real time |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for in_rate, out_rate in pairs:
        found = contenders(in_rate, out_rate)
        rows = {name: per_chunk_us(f, in_rate, calls) for name, f in found.items()}
        anchor = rows["soxr HQ"][0] if "soxr HQ" in rows else float("nan")
        for name, (median, mean, p99) in rows.items():
            ms = ten_seconds_ms(found[name], in_rate, reps)
            print(
                f"| {in_rate}→{out_rate} | {name} | {median:.2f} | {mean:.2f} | {p99:.2f} | "
                f"{median / anchor:.2f}× | {ms:.2f} | {10000 / ms:.0f} |"
            )
        for name, function in one_shot(in_rate, out_rate).items():
            ms = one_shot_ms(function, in_rate, reps)
            print(
                f"| {in_rate}→{out_rate} | {name} | — | — | — | — | {ms:.2f} | {10000 / ms:.0f} |"
            )
        for factory in found.values():
            check(factory, in_rate, out_rate)


def quality_table(pairs):
    print("\n## Quality (same measurement for everyone)\n")
    print(
        "| ratio | contender | alias rejection dB | ripple dB | SNR 1 kHz dB | "
        "delay ms mean/max | latency@20ms mean/max | empty calls |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for in_rate, out_rate in pairs:
        found = contenders(in_rate, out_rate)
        for name, factory in found.items():
            if name.startswith("audiocore") and not name.endswith("f32"):
                continue  # rated on its float32 output, the same filter
            q = quality_row(factory, in_rate, out_rate)
            d, lat = q["delay ms"], q["latency ms"]
            print(
                f"| {in_rate}→{out_rate} | {name} | {q['alias rejection dB']:.1f} | "
                f"{q['passband ripple dB']:.4f} | {q['SNR 1 kHz dB']:.1f} | "
                f"{d[0]:.2f} / {d[1]:.2f} | {lat[0]:.1f} / {lat[1]:.1f} | "
                f"{q['empty calls %']:.0f}% |"
            )


def path_table(calls, pairs):
    print("\n## audiocore by SIMD path: µs per 20 ms chunk (median), f32 in, s16 out\n")
    paths = _resample._paths()
    print("| ratio | " + " | ".join(paths) + " |")
    print("|---|" + "---:|" * len(paths))
    before = _resample._get_path()
    try:
        for in_rate, out_rate in pairs:
            cells = []
            for path in paths:
                _resample._set_path(path)
                factory = contenders(in_rate, out_rate)["audiocore voice"]
                cells.append(f"{per_chunk_us(factory, in_rate, calls)[0]:.2f}")
            print(f"| {in_rate}→{out_rate} | " + " | ".join(cells) + " |")
    finally:
        _resample._set_path(before)


def response(factory, in_rate, out_rate, freqs):
    """Output level (dB re the input tone) at the tone if it is below the
    output Nyquist, else of its alias: the usual resampler plot."""
    levels = []
    for freq in freqs:
        y = stream_output(factory, tone(freq, in_rate, in_rate // 2, 0.9), in_rate)
        y = steady(y, out_rate // 20)[: 1 << 13]
        if freq < out_rate / 2:
            amplitude, _ = fit_tone(y, freq, out_rate)
            levels.append(20 * np.log10(max(amplitude / 0.9, 1e-15)))
        else:
            levels.append(spur_db(y, out_rate, None, 0.9))
    return np.array(levels)


def plots(directory):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for in_rate, out_rate in [(48000, 16000), (44100, 16000)]:
        found = contenders(in_rate, out_rate)
        wanted = {
            "audiocore voice": found["audiocore voice f32"],
            "audiocore high": found["audiocore high f32"],
        }
        for anchor in ("soxr HQ", "soxr VHQ"):
            if anchor in found:
                wanted[anchor] = found[anchor]
        freqs = np.linspace(50, in_rate / 2 * 0.995, 240)
        zoom = np.linspace(50, out_rate / 2 * 0.999, 160)
        fig, (full, near) = plt.subplots(2, 1, figsize=(9, 8))
        for label, factory in wanted.items():
            full.plot(freqs / 1000, response(factory, in_rate, out_rate, freqs), label=label)
            near.plot(zoom / 1000, response(factory, in_rate, out_rate, zoom), label=label)
        nyquist = out_rate / 2000
        for ax in (full, near):
            ax.axvline(nyquist, color="grey", lw=0.8, ls=":")
            ax.axvline(0.875 * nyquist, color="grey", lw=0.8, ls="--")
            ax.grid(alpha=0.3)
            ax.set_xlabel("input tone, kHz")
        full.set_ylim(-180, 5)
        full.set_ylabel("level at the tone, or of its alias (dB)")
        near.set_xlim(0.6 * nyquist, nyquist)
        near.set_ylim(-3, 0.5)
        near.set_ylabel("passband edge (dB)")
        full.set_title(f"{in_rate} → {out_rate} Hz: frequency response and aliasing")
        full.legend(loc="lower left")
        fig.tight_layout()
        name = os.path.join(directory, f"resample_response_{in_rate}_{out_rate}.png")
        fig.savefig(name, dpi=110)
        plt.close(fig)
        names.append(name)
    print("\nplots: " + ", ".join(names))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--plots", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the first ratio only, 5 calls, one repetition, no plots: that it runs",
    )
    parser.add_argument(
        "--phone", action="store_true", help="only the 8 kHz pairs (G.711's rate), no plots"
    )
    args = parser.parse_args()
    pairs, reps = PAIRS + PHONE_PAIRS, 5
    if args.phone:
        pairs, args.no_plots = PHONE_PAIRS, True
    if args.smoke:
        pairs, reps, args.calls, args.no_plots = PAIRS[:1], 1, 5, True
    print(
        f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"numpy {np.__version__}, audiocore path {_resample._get_path()}\n"
    )
    speed_table(args.calls, pairs, reps)
    quality_table(pairs)
    path_table(args.calls, pairs)
    if not args.no_plots:
        plots(args.plots)


if __name__ == "__main__":
    main()
