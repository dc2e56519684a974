"""Every benchmark runs, in a smoke size: seconds each, so a benchmark that
no longer runs fails the day it breaks, not the day someone wants its
figures. What the figures are worth is benchmarks/README.md's business; here
a benchmark passes when it runs to its end and checks what it checks (exit
status 0), and its output has its table.

Each entry point of benchmarks/ is listed here, and
``test_every_benchmark_has_a_smoke_run`` fails for one that is not. They
need the ``bench`` dependency group (and the server ones what the server
tests need); without it they skip, naming it. Deselect them all with
``-m "not bench_smoke"``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"

pytestmark = pytest.mark.bench_smoke


class Smoke(NamedTuple):
    """A benchmark's smoke run: its arguments, the Python modules and the
    system tools it needs, and a line its output must contain."""

    arguments: list[str]
    expected: str
    modules: list[str] = []
    tools: list[str] = []


# The pytest-benchmark suites run each test once, untimed
# (--benchmark-disable), which still runs the checks after the timed call.
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-disable"]
SERVER = ["google.adk", "starlette", "uvicorn", "websockets", "uvloop"]
SPEECH = ["espeak-ng", "sox"]
SMOKE = {
    "bench_convert.py": Smoke(
        [*PYTEST, "benchmarks/bench_convert.py"], "passed", ["pytest_benchmark"]
    ),
    "bench_jitter.py": Smoke(
        [*PYTEST, "benchmarks/bench_jitter.py"], "passed", ["pytest_benchmark"]
    ),
    # One pair of rates: every contender, as the other pairs would run them.
    "bench_resample.py": Smoke(
        [*PYTEST, "benchmarks/bench_resample.py", "-k", "48000 and 16000"],
        "passed",
        ["pytest_benchmark", "soxr", "samplerate", "scipy"],
    ),
    "compare_convert.py": Smoke(["--smoke"], "audiocore by SIMD path"),
    "compare_g711.py": Smoke(["--smoke"], "## Phone paths", ["soxr"]),
    # One short scene, both anchors (libspeexdsp, and WebRTC's shim built
    # with g++ against Debian's headers).
    "bench_aec.py": Smoke(["--smoke"], "| webrtc |", [], ["espeak-ng", "g++", "pkg-config"]),
    # Three answers, the normal echo, every kind of move.
    "bench_aec_shifts.py": Smoke(["--smoke"], "| 0 or 20 ms |", [], ["espeak-ng"]),
    "bench_aec_no_echo.py": Smoke(
        ["--smoke"], "| audiocore | 35.0 / 35.0 |", [], ["espeak-ng", "g++", "pkg-config"]
    ),
    "compare_resample.py": Smoke(["--smoke"], "## Quality", ["soxr", "samplerate", "scipy"]),
    "jitter_sim.py": Smoke(["--seconds", "30"], "model + barge-in"),
    "bench_gemini_send.py": Smoke(["--seconds", "1", "--chunks", "20"], "20ms", SERVER),
    "bench_tokens.py": Smoke(["--smoke"], "| guard: request → principal |", ["starlette"]),
    "bench_delivery.py": Smoke(["--repeat", "1", "--work", "0.05"], "| case |", SERVER),
    "bench_acp.py": Smoke(
        ["--tasks", "1", "--work", "0.3"], "| answered → heard (first audio) |", [*SERVER, "acp"]
    ),
    "bench_server.py": Smoke(
        # The local Gemini endpoint's start is bench_gemini_send.py's smoke;
        # the OpenAI one's is here (the last line: its barge-in).
        ["--sessions", "1", "--turns", "1", "--barge-ins", "1", "--models", "offline,openai"]
        + ["--echo-cancellation", "client,server"],
        "barge-in, openai",
        [*SERVER, "openai"],
        SPEECH,
    ),
    "bench_server_adk.py": Smoke(
        ["--sessions", "1", "--turns", "1", "--repeat", "1", "--no-warm-up"],
        "N=1: ADK / ours",
        SERVER,
        SPEECH,
    ),
    # One call: its barge-in's clear, timed by the client and the server.
    "bench_phone.py": Smoke(["--smoke"], "\n| 1 | ", SERVER, SPEECH),
    "bench_recovery.py": Smoke(["--smoke"], "| openai | refused | 2/2 |", [*SERVER, "openai"]),
    "bench_acp_floods.py": Smoke(["--smoke"], "| endless-line 40 |", [*SERVER, "acp"]),
    "bench_hostile.py": Smoke(
        ["--classes", "ping", "--sessions", "1", "--turns", "1", "--flood-s", "1"],
        "| ping |",
        SERVER,
        SPEECH,
    ),
    "soak.py": Smoke(
        ["--sessions", "2", "--minutes", "1", "--minute-s", "5", "--settle", "1"]
        + ["--stagger", "0.5", "--sample-every", "2.5"],
        "samples_exact",
        SERVER,
        SPEECH,
    ),
    "bench_memory.py": Smoke(
        ["--sizes", "50,200", "--total", "2000", "--queries", "10", "--sessions", "1"],
        "| PostgreSQL | 200 | 2,000 |",
        [*SERVER, "asyncpg", "pytest_postgresql", "port_for"],
    ),
    "bench_web.py": Smoke(
        ["--seconds", "10", "--interrupts", "1"],
        '"interrupt_to_silence_ms"',
        ["playwright"],
        SPEECH,
    ),
    # Two targets (one of audiocore's, one of the server's) under atheris:
    # tests/*/test_*fuzz_smoke.py already run every target without it.
    "fuzz/run.py": Smoke(
        ["--targets", "read_wav,ws_decode", "--runs", "20", "--workdir", "{tmp}"],
        "ws_decode: 20 inputs",
        ["atheris", *SERVER],
    ),
    # Its input comes from bench_server.py --py-spy; a small one stands in.
    "profile_summary.py": Smoke(["{tmp}/profile.txt"], "by component"),
}
# Shared pieces the entry points import: run through them.
LIBRARIES = {
    "bench_server_client.py",
    "convert_cases.py",
    "g711_cases.py",
    "resample_cases.py",
}

PROFILE = """\
Runner.run (asyncio/runners.py:118);_run_once (asyncio/base_events.py:1906) 40
Runner.run (asyncio/runners.py:118);LiveConnection._sender (audiocore_server/live/connection.py:400);float32_to_pcm16 (audiocore/__init__.py:1) 7
Runner.run (asyncio/runners.py:118);AsyncSession._receive (genai/live.py:300);loads (json/__init__.py:346) 3
"""  # noqa: E501


def entry_points() -> set[str]:
    """Every Python file of benchmarks/ that runs: a __main__ block or a
    pytest-benchmark test."""
    found = set()
    for path in BENCHMARKS.rglob("*.py"):
        body = ast.parse(path.read_text()).body
        main = any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in body)
        tests = any(isinstance(n, ast.FunctionDef) and n.name.startswith("test_") for n in body)
        if main or tests:
            found.add(path.relative_to(BENCHMARKS).as_posix())
    return found


def test_every_benchmark_has_a_smoke_run() -> None:
    assert entry_points() == set(SMOKE)
    every = {p.relative_to(BENCHMARKS).as_posix() for p in BENCHMARKS.rglob("*.py")}
    assert every == set(SMOKE) | LIBRARIES, "a new file: an entry point, or a library here"


def missing(name: str) -> str | None:
    """Why the smoke run of `name` cannot run here, if it cannot."""
    smoke = SMOKE[name]
    for module in smoke.modules:
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install --group bench)"
    for tool in smoke.tools:
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {tool})"
    if name == "bench_web.py" and not os.access(
        os.environ.get("AUDIOCORE_CHROMIUM", "/usr/bin/chromium"), os.X_OK
    ):
        return "Chromium is not installed (Debian package chromium)"
    return None


def start(name: str, folder: Path) -> subprocess.Popen[bytes]:
    """The smoke run of `name`, in a session of its own (so that it and the
    servers it starts can be ended together), its output in `folder`."""
    arguments = [a.replace("{tmp}", str(folder)) for a in SMOKE[name].arguments]
    if arguments[0] != sys.executable:
        arguments = [sys.executable, str(BENCHMARKS / name), *arguments]
    if name == "profile_summary.py":
        (folder / "profile.txt").write_text(PROFILE)
    with open(folder / "output", "wb") as output:
        return subprocess.Popen(
            arguments, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait()


@pytest.mark.parametrize("name", list(SMOKE))
def test_the_benchmark_runs_in_a_smoke_size(name: str, tmp_path: Path) -> None:
    # One at a time: the server ones play audio at real time, and run side
    # by side on a busy machine they starve each other into failing.
    reason = missing(name)
    if reason is not None:
        pytest.skip(reason)
    process = start(name, tmp_path)
    try:
        process.wait(timeout=240)
    finally:
        stop(process)
    output = (tmp_path / "output").read_text(errors="replace")
    assert process.returncode == 0, output[-6000:]
    assert SMOKE[name].expected in output, output[-6000:]


def test_the_server_benchmark_measures_the_input_path_alone(tmp_path: Path) -> None:
    """``bench_server.py --idle``: sessions that stream and never take a turn."""
    reason = missing("bench_server.py")
    if reason is not None:
        pytest.skip(reason)
    run = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_server.py"), "--sessions", "2", "--idle", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        start_new_session=True,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "2 idle sessions" in run.stdout and "µs of server CPU per client frame" in run.stdout
