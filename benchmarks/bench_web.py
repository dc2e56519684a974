"""The demo page's figures, measured in real Chromium against the real server.

What it measures (offline model, fake microphone looping espeak-ng speech
followed by silence, so each loop is one user turn that the model echoes):

1. A conversation of ``--seconds`` (default 60) left alone: playback
   underruns per minute (target 0), turns played, samples played vs received,
   and end of speech -> first agent audio. That latency is taken on the
   AudioContext clock: from the last capture frame above -40 dBFS to the first
   reply sample the playback worklet renders; it includes the offline model's
   600 ms end-of-turn hangover.
2. ``--interrupts`` barge-ins (default 6), each ~0.3 s into an echo: interrupt
   request -> playback worklet silent (target <= 30 ms), on the context clock
   (request -> first silent sample rendered, fade included) and on the wall
   clock (request -> the worklet's "silent" message back on the main thread,
   an upper bound). The device's own output buffer comes on top of both and
   is reported beside them (AudioContext baseLatency + outputLatency).

Nothing is timed in Python: every figure comes from the page's own hook,
``window.__demo``. Run from the repository root:

    python benchmarks/bench_web.py [--seconds 60] [--interrupts 6] [--base64]
                                   [--prebuffer 60] [--json out.json]

Needs what tests/web needs: playwright (pip), chromium, espeak-ng and sox
(apt).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "web"))
from web_helpers import CHROMIUM, LEAD_IN_S, TAIL_S, launch, make_speech, run_server  # noqa: E402


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "n": len(values),
        "min": round(ordered[0], 2),
        "median": round(statistics.median(ordered), 2),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
        "max": round(ordered[-1], 2),
    }


def machine() -> dict[str, object]:
    cpu = platform.processor() or ""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    chromium = subprocess.run(
        [CHROMIUM, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "browser": chromium,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interrupts", type=int, default=6)
    parser.add_argument("--prebuffer", type=int, default=60, help="playback prebuffer, ms")
    parser.add_argument(
        "--base64", action="store_true", help="agent audio as data-pcm chunks, not binary frames"
    )
    parser.add_argument("--json", type=pathlib.Path, help="also write the results here")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        wav = make_speech(folder, lead_in=LEAD_IN_S, tail=TAIL_S, name="speech")
        with run_server(folder) as url, sync_playwright() as pw:
            browser = launch(pw, wav)
            page = browser.new_page()
            binary = 0 if args.base64 else 1
            page.goto(f"{url}?prebuffer={args.prebuffer}&binary={binary}")
            page.click("#connect")
            page.wait_for_function("() => __demo.state === 'connected'", timeout=10_000)
            rate = page.evaluate("() => __demo.sampleRate")
            output_latency = page.evaluate("() => __demo.outputLatencyMs()")

            # 1. The conversation, left alone.
            page.wait_for_timeout(args.seconds * 1000)
            conversation = page.evaluate(
                """() => ({
                    playback: __demo.playback,
                    events: __demo.events,
                    received: __demo.received.samples,
                    latencies: __demo.latencies,
                    framesSent: __demo.capture.sent,
                    errors: __demo.errors.concat(__demo.serverErrors),
                })"""
            )

            # 2. Barge-ins: interrupt echoes ~0.3 s in, each turn at most once.
            interrupted_turn = -1
            deadline = time.monotonic() + 30 + 12 * args.interrupts
            while len(page.evaluate("() => __demo.flushes")) < args.interrupts:
                if time.monotonic() > deadline:
                    sys.exit("timed out waiting for echoes to interrupt")
                page.wait_for_function(
                    "(t) => __demo.playback.state === 'playing' && __demo.events.started > t",
                    arg=interrupted_turn,
                    timeout=20_000,
                )
                page.wait_for_timeout(300)
                # Click only while audio is really playing, so no flush is
                # measured on an already silent worklet.
                turn = page.evaluate(
                    """() => {
                        const p = __demo.playback;
                        if (p.state !== "playing" || p.bufferedSamples < 1000) return -1;
                        document.getElementById("interrupt").click();
                        return __demo.events.started;
                    }"""
                )
                if turn < 0:
                    continue
                interrupted_turn = turn
                page.wait_for_function(
                    "() => __demo.playback.state === 'idle' && __demo.muted === false",
                    timeout=5_000,
                )
            flushes = page.evaluate("() => __demo.flushes")
            status = page.inner_text("#status")
            page.click("#disconnect")
            browser.close()

    played = conversation["playback"]
    minutes = args.seconds / 60
    results = {
        "machine": machine(),
        "sample_rate": rate,
        "prebuffer_ms": args.prebuffer,
        "output_transport": "base64 data-pcm" if args.base64 else "binary frames",
        "conversation": {
            "seconds": args.seconds,
            "turns_played": conversation["events"]["started"],
            "turns_ended": conversation["events"]["ended"],
            "underruns": played["underruns"],
            "underruns_per_minute": round(played["underruns"] / minutes, 2),
            "samples_played": played["samplesPlayed"],
            "samples_received": conversation["received"],
            "seconds_played": round(played["samplesPlayed"] / rate, 2),
            "frames_sent": conversation["framesSent"],
            "end_of_speech_to_first_audio_ms": summary(conversation["latencies"]),
            "errors": conversation["errors"],
        },
        "interrupt_to_silence_ms": {
            "context_clock": summary([f["contextMs"] for f in flushes]),
            "wall_clock_round_trip": summary([f["roundTripMs"] for f in flushes]),
            "fade_ms": summary([f["fadeMs"] for f in flushes]),
            # Not in the figures above: the device's buffer after the worklet
            # (AudioContext baseLatency + outputLatency).
            "device_output_latency_ms": round(output_latency, 2),
        },
        "status_line": status,
    }
    # Checks after the measurement: the run is only valid if audio flowed.
    if conversation["events"]["started"] < max(1, int(args.seconds / 10)):
        sys.exit(f"too few turns played: {json.dumps(results, indent=2)}")
    if len(flushes) != args.interrupts:
        sys.exit(f"expected {args.interrupts} flushes, got {len(flushes)}")
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
