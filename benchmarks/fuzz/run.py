"""Coverage-guided fuzzing of audiocore and the server's decoders (issue 13).

Runs each target of tests/core/fuzz_core.py and tests/server/fuzz_protocol.py
with atheris (libFuzzer) in its own subprocess, and counts, per target:
inputs run, crashes (the process died: a signal, an uncaught error, out of
memory), hangs (an input ran past --timeout), and unexpected exceptions (an
exception the target does not document, or a failed check: the worker
saves the input and goes on).  A worker that dies is restarted for the
inputs left, so one finding does not end the count.

    nice -n 19 python benchmarks/fuzz/run.py --runs 1000000 --json /tmp/fuzz.json
    python benchmarks/fuzz/run.py --targets read_wav,jitter --runs 100000
    python benchmarks/fuzz/run.py --replay /tmp/audiocore-fuzz/jitter/crash-... --target jitter

Needs the `bench` group (atheris); --replay does not.  Only the Python
layer is coverage-instrumented: the C kernels are exercised by the inputs
but not measured (CI's ASan/UBSan build runs tests/core on them).
Corpora and artifacts go to --workdir (default /tmp/audiocore-fuzz), never
into the checkout.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The targets import each other's helpers as test modules do (pytest puts
# these directories on sys.path).
PATHS = [ROOT, ROOT / "tests", ROOT / "tests" / "core", ROOT / "tests" / "server"]

# Target -> the module that defines it.
MODULES = {
    "read_wav": "fuzz_core",
    "wav_roundtrip": "fuzz_core",
    "convert": "fuzz_core",
    "g711": "fuzz_core",
    "jitter": "fuzz_core",
    "resampler": "fuzz_core",
    "ws_decode": "fuzz_protocol",
    "run_live": "fuzz_protocol",
    "run_live_query": "fuzz_protocol",
    "resampler_design": "fuzz_core",
    "echo_canceller": "fuzz_core",
}
# Per-input time limit in seconds.  A resampler input may design a new
# filter (up to a second with one BLAS thread, more under load); a design at
# arbitrary rates can take longer still.
TIMEOUTS = {"resampler": 60, "resampler_design": 120}
DEFAULT_TIMEOUT = 10
MAX_LEN = {"read_wav": 8192}
# A worker that keeps dying is a finding already; past this many restarts
# the target's run stops.
MAX_RESTARTS = 20


def _target(name: str) -> Callable[[bytes], None]:
    for path in PATHS:
        sys.path.insert(0, str(path))
    module = __import__(MODULES[name])
    return module.TARGETS[name]  # type: ignore[no-any-return]


# ---- the worker: one atheris process -----------------------------------------


def worker(args: argparse.Namespace) -> None:
    import atheris

    for path in PATHS:
        sys.path.insert(0, str(path))
    # Coverage for our Python only: the package, the server and the targets
    # (instrumenting pydantic, numpy or the byte reader fuzz_input would slow
    # every input for nothing).
    import fuzz_input

    with atheris.instrument_imports(
        include=["audiocore", "audiocore_server", "fuzz_core", "fuzz_protocol"]
    ):
        module = __import__(MODULES[args.worker])
    target = module.TARGETS[args.worker]
    out = Path(args.workdir) / args.worker
    stats_path = out / "stats.json"
    prior = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    state = {
        "inputs": prior.get("inputs", 0),
        "unexpected": prior.get("unexpected", 0),
        "unexpected_kinds": prior.get("unexpected_kinds", {}),
        "documented": prior.get("documented", {}),
    }
    flushed = [time.monotonic()]
    # libFuzzer ends the process with exit() after -runs, past any Python
    # cleanup: the last input flushes the counts itself.
    last = state["inputs"] + args.runs

    def flush() -> None:
        for shape, n in fuzz_input.OUTCOMES.shapes.items():
            state["documented"][shape] = state["documented"].get(shape, 0) + n
        fuzz_input.OUTCOMES.shapes.clear()
        tmp = stats_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(stats_path)
        flushed[0] = time.monotonic()

    def one_input(data: bytes) -> None:
        state["inputs"] += 1
        try:
            target(data)
        except Exception as exc:
            # A finding, not a crash: keep the input and go on fuzzing.
            state["unexpected"] += 1
            kind = fuzz_input.shape_of(exc)
            where = out / f"unexpected-{hashlib.sha1(data).hexdigest()}"
            if kind not in state["unexpected_kinds"]:
                where.write_bytes(data)
                tb = "".join(traceback.format_exception(exc))
                where.with_suffix(".txt").write_text(tb)
                state["unexpected_kinds"][kind] = {"count": 0, "input": str(where)}
            state["unexpected_kinds"][kind]["count"] += 1
            flush()
        if state["inputs"] >= last or time.monotonic() - flushed[0] > 1.0:
            flush()

    argv = [
        sys.argv[0],
        f"-runs={args.runs}",
        f"-timeout={args.timeout}",
        f"-max_len={MAX_LEN.get(args.worker, 4096)}",
        "-rss_limit_mb=4096",
        "-print_final_stats=1",
        f"-artifact_prefix={out}/",
        str(out / "corpus"),
    ]
    if args.max_time:
        argv.insert(1, f"-max_total_time={args.max_time}")
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


# ---- the runner ----------------------------------------------------------------


def _seed(name: str, corpus: Path) -> None:
    """A few valid files for read_wav, so the fuzzer starts past the RIFF
    magic (its first byte 0 picks the raw-bytes mode of the target)."""
    if name != "read_wav" or any(corpus.iterdir()):
        return
    for path in PATHS:
        sys.path.insert(0, str(path))
    import numpy as np

    import audiocore

    tone = (np.sin(np.arange(64) / 3) * 0.5).astype(np.float32)
    files = [
        audiocore.to_wav(audiocore.float32_to_pcm16(tone), 16000),
        audiocore.to_wav(tone, 48000, channels=2, format="f32"),
        audiocore.wav_header(24000) + bytes(32),
    ]
    for i, wav in enumerate(files):
        (corpus / f"seed-{i}").write_bytes(b"\0" + wav)


def _drop_from_corpus(artifacts: list[str], corpus: Path) -> None:
    """A crashing or hanging input leaves the corpus (it is kept as the
    artifact), or every restart would meet it first."""
    for artifact in artifacts:
        data = Path(artifact).read_bytes()
        for entry in corpus.iterdir():
            if entry.stat().st_size == len(data) and entry.read_bytes() == data:
                entry.unlink()


def run_target(name: str, args: argparse.Namespace) -> dict[str, object]:
    out = Path(args.workdir) / name
    (out / "corpus").mkdir(parents=True, exist_ok=True)
    stats_path = out / "stats.json"
    stats_path.unlink(missing_ok=True)
    _seed(name, out / "corpus")
    timeout = args.timeout or TIMEOUTS.get(name, DEFAULT_TIMEOUT)
    env = dict(os.environ)
    # numpy's threaded BLAS makes filter design 2-25x slower on 2 shared
    # cores (benchmarks/README.md), and a second thread per worker is not
    # ours to take.
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    crashes = hangs = restarts = 0
    artifacts: list[str] = []
    seconds = 0.0
    done = 0
    complete = False
    while True:
        left = args.runs - done
        log = out / f"worker-{restarts}.log"
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            name,
            "--runs",
            str(left),
            "--timeout",
            str(timeout),
            "--workdir",
            args.workdir,
        ]
        if args.max_time:
            cmd += ["--max-time", str(max(1, int(args.max_time - seconds)))]
        started = time.monotonic()
        with open(log, "w") as err:
            rc = subprocess.call(cmd, stdout=err, stderr=subprocess.STDOUT, env=env)
        seconds += time.monotonic() - started
        text = log.read_text(errors="replace")
        stats = json.loads(stats_path.read_text()) if stats_path.exists() else {"inputs": 0}
        # libFuzzer's count, the input that crashed included (the worker's
        # own is flushed once a second).
        executed = re.findall(r"stat::number_of_executed_units: (\d+)", text)
        done += int(executed[-1]) if executed else max(0, stats["inputs"] - done)
        found = re.findall(r"Test unit written to (\S+)", text)
        artifacts += found
        _drop_from_corpus(found, out / "corpus")
        if rc == 0:
            complete = done >= args.runs
            break
        if "ERROR: libFuzzer: timeout" in text:
            hangs += 1
        else:
            crashes += 1
        print(f"  {name}: worker ended with {rc} after {done} inputs; see {log}", flush=True)
        restarts += 1
        if restarts > MAX_RESTARTS or (args.max_time and seconds >= args.max_time):
            break
    result: dict[str, object] = {
        "inputs": done,
        "seconds": round(seconds, 1),
        "exec_per_s": round(done / seconds) if seconds else 0,
        "crashes": crashes,
        "hangs": hangs,
        "unexpected": stats.get("unexpected", 0),
        "runs_asked": args.runs,
        "max_time_s": args.max_time or None,
        "complete": complete,
        "timeout_s": timeout,
        "restarts": restarts,
        "artifacts": artifacts,
        "unexpected_kinds": stats.get("unexpected_kinds", {}),
        "documented": dict(sorted(stats.get("documented", {}).items(), key=lambda kv: -kv[1])),
    }
    return result


def replay(path: str, name: str) -> int:
    target = _target(name)
    data = Path(path).read_bytes()
    started = time.perf_counter()
    try:
        target(data)
    except Exception:
        traceback.print_exc()
        print(f"{name}: FINDING after {time.perf_counter() - started:.2f} s")
        return 1
    print(f"{name}: documented outcome in {time.perf_counter() - started:.2f} s")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default=",".join(MODULES), help="comma-separated")
    parser.add_argument("--runs", type=int, default=1_000_000, help="inputs per target")
    parser.add_argument("--timeout", type=int, default=0, help="seconds per input (0: per target)")
    parser.add_argument("--max-time", type=int, default=0, help="seconds per target (0: no cap)")
    parser.add_argument(
        "--cap",
        action="append",
        default=[],
        metavar="TARGET=SECONDS",
        help="a time cap for one target (resampler_design cannot reach 1M in an hour)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="targets run at once")
    parser.add_argument("--json", help="write the counts here")
    parser.add_argument("--workdir", default="/tmp/audiocore-fuzz")
    parser.add_argument("--replay", help="run one saved input through --target")
    parser.add_argument("--target", help="the target for --replay")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if args.replay:
        if args.target not in MODULES:
            parser.error(f"--target: expected one of {sorted(MODULES)}")
        sys.exit(replay(args.replay, args.target))
    caps = dict(cap.split("=", 1) for cap in args.cap)
    names = [n for n in args.targets.split(",") if n]
    unknown = sorted((set(names) | set(caps)) - set(MODULES))
    if unknown:
        parser.error(f"--targets: unknown {unknown}; expected some of {sorted(MODULES)}")
    report: dict[str, object] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "targets": {},
    }
    results: dict[str, dict[str, object]] = report["targets"]  # type: ignore[assignment]
    lock = threading.Lock()

    def one(name: str) -> None:
        print(f"{name}: {args.runs} inputs ...", flush=True)
        own = argparse.Namespace(**vars(args))
        if name in caps:
            own.max_time = int(caps[name])
        r = run_target(name, own)
        with lock:
            results[name] = r
            print(
                f"{name}: {r['inputs']} inputs, {r['exec_per_s']}/s, {r['crashes']} crashes, "
                f"{r['hangs']} hangs, {r['unexpected']} unexpected",
                flush=True,
            )
            report["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"
            )
            if args.json:  # after each target, so a cut-short run keeps what it counted
                Path(args.json).write_text(json.dumps(report, indent=1))

    # In the order given, --jobs at a time (each target is one process).
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for future in [pool.submit(one, name) for name in names]:
            future.result()
    failed = any(r["crashes"] or r["hangs"] or r["unexpected"] for r in results.values())
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
