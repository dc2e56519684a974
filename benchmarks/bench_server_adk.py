"""Our server against ADK's own ``adk api_server``, same offline agent, same client.

    python benchmarks/bench_server_adk.py                  # N = 1, 10, 50; 3 repetitions
    python benchmarks/bench_server_adk.py --sessions 1,10 --repeat 1 --json out.json

Contenders, run one after the other at each N, their order alternating
from one repetition to the next (the machine is shared: a ratio is taken
within a repetition, then the median over repetitions):

* ``run_live ours`` and ``run_live adk``: ``WS /run_live`` of our server
  (its ADK dialect) and of ``adk api_server``, driven by the *same* client:
  ``LiveRequest`` JSON with base64 16 kHz PCM16 blobs of 20 ms at real-time
  pace, ``Event`` JSON back with URL-safe base64 24 kHz audio.
* ``ws ours``: our ``/ws`` in its native protocol, for scale: binary frames
  of 48 kHz float32 (what a browser captures; the server resamples), echo
  back as binary 24 kHz PCM16.

Each session is push-to-talk turns of espeak-ng speech (``activity_start``,
the utterance, ``activity_end``, then silence while the echo comes back);
the sessions start spread over 1 s. Both servers run the same agent
(``server.agent.definition.build_agent`` with the offline model and the demo tools) in
one process each, with ADK's SQLite session service, and are warmed up by
one session before the first timed one.

Per contender and N:

* server CPU seconds per session (utime + stime from /proc of the server
  process and its children, before and after the sessions) and CPU % of a
  core;
* per-chunk latency (``bench_server_client.chunk_lateness``): chunk k of
  the echo, whose first sample is o_k seconds into the echo, arriving at
  a_k, has latency a_k - (t_end + o_k), t_end being when the client sent
  ``activity_end``: the delay a listener starting the echo at the end of
  the utterance would see on that chunk. p50 / p99 / max over every chunk
  of every turn; chunk 0 is first audio. A server that sends faster than
  real time (ADK's sends the model's events as they come) has negative
  values: the chunk came ahead of its play time;
* late frames for a listener with a 100 ms prebuffer; lost samples;
* barge-ins (``interrupted`` events) the client got;
* failures: sessions the server closed (with its close code and reason) or
  that hung (no ``turnComplete`` within 30 s).

Checked after the timed region (``bench_server_client.check_echo``), for
all three: every turn's audio against the exact echo of what was sent (the
offline model resamples the 16 kHz utterance to 24 kHz; ours pads the last
40 ms frame with silence), frame by frame — frames our pacer made up during
a stall ("concealed") or faded in after one ("altered"), and turns whose
echo did not arrive whole and in order ("incomplete").
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from statistics import median

from bench_server_client import (
    FRAME_S,
    IN_RATE,
    OUT_FRAME,
    OUT_RATE,
    REPO,
    TurnResult,
    check_echo,
    cpu_seconds,
    exact_echo,
    free_port,
    our_server,
    our_session,
    percentile,
    push_to_talk_turns,
    py_spy,
    run_clients,
    speech_48k,
    wait_http,
)

# Not "audiocore": ADK imports the app's directory as a module, and that is our package.
APP = "voice_app"
AGENT_PY = """
from audiocore_server.agent.definition import build_agent
from audiocore_server.agent.demo_tools import DEMO_TOOLS
from audiocore_server.settings import Settings
from audiocore_server.tools.spec import spec_of

root_agent = build_agent(Settings(model="offline"), [spec_of(f) for f in DEMO_TOOLS])
"""
MODEL_RATE = 16_000
TURN_TIMEOUT_S = 30
CONTENDERS = ("run_live ours", "run_live adk", "ws ours")


@contextlib.contextmanager
def adk_server(agents: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """``adk api_server`` with the agents in ``agents``; yields its http:// base."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))},
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "google.adk.cli", "api_server", "--no-reload"]
        + ["--host", "127.0.0.1", "--port", str(port), "--log_level", "warning", str(agents)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/list-apps", timeout=120)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def create_session(base: str, user: str, session: str) -> None:
    request = urllib.request.Request(
        f"{base}/apps/{APP}/users/{user}/sessions",
        data=json.dumps({"sessionId": session, "state": {}}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(request, timeout=30).read()


def blob_request(pcm: bytes) -> str:
    data = base64.b64encode(pcm).decode()
    return json.dumps({"blob": {"mime_type": f"audio/pcm;rate={MODEL_RATE}", "data": data}})


async def run_live_session(
    base: str, k: int, speech16: bytes, turns: int, counter: dict, *, padded: bool
) -> list[TurnResult]:
    """One ADK client on ``base``'s ``/run_live``: create the session by REST,
    then push-to-talk turns; keeps each turn's echo for the check."""
    import websockets

    user, session = f"u{k}", f"s{k}-{uuid.uuid4().hex}"
    await asyncio.to_thread(create_session, base, user, session)
    step = int(MODEL_RATE * FRAME_S) * 2
    frames = [blob_request(speech16[i : i + step]) for i in range(0, len(speech16), step)]
    echo_samples = len(speech16) // 2 * OUT_RATE // MODEL_RATE
    url = (
        base.replace("http://", "ws://")
        + f"/run_live?app_name={APP}&user_id={user}&session_id={session}&modalities=AUDIO"
    )
    async with websockets.connect(url, max_size=None, compression=None) as ws:
        arrivals: list[tuple[float, int]] = []
        received: list[bytes] = []
        finished: asyncio.Queue[float] = asyncio.Queue()

        async def send(frame: str) -> None:
            counter["up"] += len(frame)
            await ws.send(frame)

        async def receive() -> None:
            async for message in ws:
                counter["down"] += len(message)
                event = json.loads(message)
                for part in (event.get("content") or {}).get("parts") or []:
                    data = (part.get("inlineData") or {}).get("data")
                    if data:
                        pcm = base64.urlsafe_b64decode(data)
                        arrivals.append((time.monotonic(), len(pcm) // 2))
                        received.append(pcm)
                if event.get("interrupted"):
                    counter["interrupted"] += 1
                if event.get("turnComplete"):
                    finished.put_nowait(time.monotonic())

        turns_task = asyncio.ensure_future(
            push_to_talk_turns(
                send,
                arrivals,
                finished,
                turns=turns,
                frames=frames,
                quiet=blob_request(bytes(step)),
                gap=int((len(speech16) / 2 / MODEL_RATE + 0.6) / FRAME_S),
                edges=('{"activity_start": {}}', '{"activity_end": {}}'),
                # Ours leaves in whole 40 ms frames, the last padded with silence.
                expected=-(-echo_samples // OUT_FRAME) * OUT_FRAME if padded else echo_samples,
                prebuffer_s=0.1,
                received=received,
            )
        )
        reader = asyncio.ensure_future(receive())
        try:
            # The reader ends when the server closes the socket: the session
            # fails then, rather than waiting out the turn's timeout.
            await asyncio.wait([turns_task, reader], return_when=asyncio.FIRST_COMPLETED)
            if turns_task.done():
                return turns_task.result()
            turns_task.cancel()
            reason = f"{type(reader.exception()).__name__}" if reader.exception() else "closed"
            raise RuntimeError(
                f"{reason} by the server, close code {ws.close_code} {ws.close_reason!r}, "
                f"{len(arrivals)} audio events into the turn"
            )
        except TimeoutError:
            raise RuntimeError(
                f"hang: no turnComplete within {TURN_TIMEOUT_S} s, socket open, "
                f"{len(arrivals)} audio events into the turn"
            ) from None
        finally:
            reader.cancel()


async def _sessions(n: int, one) -> list:
    """``one(k)`` for k < n, starts spread over 1 s; an exception is a result."""

    async def started(k: int):
        await asyncio.sleep(k / max(1, n))
        return await one(k)

    return await asyncio.gather(*(started(k) for k in range(n)), return_exceptions=True)


def run_block(contender: str, n: int, turns: int, target: dict, inputs: dict) -> dict:
    """One contender at N sessions: the timed sessions, then the checks."""
    counter = {"up": 0, "down": 0, "interrupted": 0}
    if contender == "ws ours":

        def one(k):
            return our_session(target["ws"], inputs["speech"], turns, counter=counter)

    else:
        base, padded = target[contender], contender == "run_live ours"

        def one(k):
            return run_live_session(base, k, inputs["speech16"], turns, counter, padded=padded)

    pid = target["pid " + contender.split()[1]]
    c0, t0, me0 = cpu_seconds(pid), time.monotonic(), time.process_time()
    sessions = run_clients(_sessions(n, one))
    c1, t1, me1 = cpu_seconds(pid), time.monotonic(), time.process_time()
    # The checks, after the timed region.
    failures = [f"{type(s).__name__}: {s}" for s in sessions if isinstance(s, BaseException)]
    turns_all = [t for s in sessions if not isinstance(s, BaseException) for t in s]
    checks = [check_echo(t.audio, inputs["echo"]) for t in turns_all]
    lateness = [x for t in turns_all for x in t.lateness_s]
    first = [t.first_audio_s for t in turns_all]
    return {
        "contender": contender,
        "sessions": n,
        "turns": len(turns_all),
        "failed_sessions": len(failures),
        "failures": failures,
        "cpu_s_per_session": (c1 - c0) / n,
        "cpu_pct": 100 * (c1 - c0) / (t1 - t0),
        "client_cpu_pct": 100 * (me1 - me0) / (t1 - t0),
        "interrupted": counter["interrupted"],
        "first_audio_p50_ms": 1e3 * percentile(first, 50),
        "first_audio_p99_ms": 1e3 * percentile(first, 99),
        "chunk_p50_ms": 1e3 * percentile(lateness, 50),
        "chunk_p99_ms": 1e3 * percentile(lateness, 99),
        "chunk_max_ms": 1e3 * max(lateness, default=float("nan")),
        "late_frames": sum(t.late_frames for t in turns_all),
        "frames": sum(t.frames for t in turns_all),
        "lost_samples": sum(t.expected - t.samples for t in turns_all),
        # Turns whose echo did not arrive whole and in order, and frames the
        # server made up during a stall or changed around one.
        "incomplete_echo_turns": sum(not c.complete for c in checks),
        "concealed_frames": sum(c.concealed for c in checks),
        "altered_frames": sum(c.altered for c in checks),
        "up_kB_s": counter["up"] / n / (t1 - t0) / 1000,
        "down_kB_s": counter["down"] / n / (t1 - t0) / 1000,
    }


COLUMNS = (
    ("contender", "{:<13}"),
    ("sessions", "{:>4}"),
    ("cpu_s_per_session", "{:>8.3f}"),
    ("cpu_pct", "{:>6.1f}"),
    ("chunk_p50_ms", "{:>9.1f}"),
    ("chunk_p99_ms", "{:>9.1f}"),
    ("chunk_max_ms", "{:>9.1f}"),
    ("first_audio_p50_ms", "{:>8.1f}"),
    ("first_audio_p99_ms", "{:>8.1f}"),
    ("late_frames", "{:>5}"),
    ("lost_samples", "{:>6}"),
    ("incomplete_echo_turns", "{:>5}"),
    ("concealed_frames", "{:>5}"),
    ("altered_frames", "{:>5}"),
    ("failed_sessions", "{:>5}"),
    ("interrupted", "{:>5}"),
    ("client_cpu_pct", "{:>6.1f}"),
)
HEADER = (
    "contender        N  cpu s/ses  cpu%  chunk p50  chunk p99  chunk max  first50  first99"
    "  late   lost incmp concl altrd  fail  intr client%"
)


def row(r: dict) -> str:
    return " ".join(fmt.format(r[key]) for key, fmt in COLUMNS)


def summary(results: list[dict]) -> str:
    """Medians over repetitions, and the ADK/ours ratios taken within each."""
    lines = [
        "| N | contender | CPU s / session | CPU % | chunk latency p50 / p99 / max ms "
        "| first audio p50 / p99 ms | late / frames | concealed / altered frames "
        "| incomplete echoes | barge-ins | failed sessions |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ratios = []
    for n in sorted({r["sessions"] for r in results}):
        for contender in CONTENDERS:
            rs = [r for r in results if r["sessions"] == n and r["contender"] == contender]
            if not rs:
                continue

            def med(key, rs=rs):
                return median(r[key] for r in rs)

            lines.append(
                f"| {n} | {contender} | {med('cpu_s_per_session'):.3f} | {med('cpu_pct'):.1f} "
                f"| {med('chunk_p50_ms'):.1f} / {med('chunk_p99_ms'):.1f} / "
                f"{med('chunk_max_ms'):.1f} | {med('first_audio_p50_ms'):.1f} / "
                f"{med('first_audio_p99_ms'):.1f} | {sum(r['late_frames'] for r in rs)} / "
                f"{sum(r['frames'] for r in rs)} | {sum(r['concealed_frames'] for r in rs)} / "
                f"{sum(r['altered_frames'] for r in rs)} "
                f"| {sum(r['incomplete_echo_turns'] for r in rs)} "
                f"| {sum(r['interrupted'] for r in rs)} "
                f"| {sum(r['failed_sessions'] for r in rs)} of {n * len(rs)} |"
            )
        pairs = [
            (a, b)
            for a in results
            for b in results
            if a["sessions"] == b["sessions"] == n
            and a["rep"] == b["rep"]
            and a["contender"] == "run_live adk"
            and b["contender"] == "run_live ours"
        ]
        if pairs:

            def ratio(key, pairs=pairs):
                return median(a[key] / b[key] for a, b in pairs)

            ratios.append(
                f"N={n}: ADK / ours, median of {len(pairs)} repetitions: "
                f"CPU per session {ratio('cpu_s_per_session'):.2f}x, "
                f"first audio p50 {ratio('first_audio_p50_ms'):.2f}x, "
                f"p99 {ratio('first_audio_p99_ms'):.2f}x"
            )
    return "\n".join(lines + [""] + ratios)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", default="1,10,50")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help="a subset, in order")
    parser.add_argument("--json", type=Path, help="write every block's figures here")
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="DIR",
        help="profile the server of each contender's first repetition with py-spy into "
        "DIR/<contender>-<N>.txt (profile_summary.py reads them)",
    )
    parser.add_argument(
        "--no-warm-up",
        dest="warm_up",
        action="store_false",
        help="skip the warm-up block (a smoke run: its first figures are cold)",
    )
    args = parser.parse_args()
    import audiocore

    speech = speech_48k()
    speech16 = bytes(audiocore.resample(speech, IN_RATE, MODEL_RATE, input="f32", output="s16"))
    echo = exact_echo(speech)
    inputs = {"speech": speech, "speech16": speech16, "echo": echo}
    agents = Path(tempfile.mkdtemp())
    (agents / APP).mkdir()
    (agents / APP / "agent.py").write_text(AGENT_PY)
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{now}, load average at start: {loadavg()}")
    print(HEADER, flush=True)
    results = []
    try:
        for n in (int(v) for v in args.sessions.split(",")):
            stats = Path(tempfile.mkdtemp()) / "stats.json"
            # Timings off: a list per frame that ADK's server does not keep.
            ours = our_server(stats, AUDIOCORE_APP_NAME=APP, AUDIOCORE_COLLECT_TIMINGS="0")
            with ours as (ws_url, our_proc), adk_server(agents) as (adk_base, adk_proc):
                target = {
                    "ws": ws_url,
                    "run_live ours": ws_url.removesuffix("/ws").replace("ws://", "http://"),
                    "run_live adk": adk_base,
                    "pid ours": our_proc.pid,
                    "pid adk": adk_proc.pid,
                }
                contenders = tuple(args.contenders.split(","))
                for contender in contenders if args.warm_up else ():
                    # Imports, filter designs, the database.
                    run_block(contender, 1, 1, target, inputs)
                for rep in range(args.repeat):
                    order = contenders if rep % 2 == 0 else contenders[::-1]
                    for contender in order:
                        pid = target["pid adk" if contender == "run_live adk" else "pid ours"]
                        name = f"{contender.replace(' ', '-')}-{n}.txt"
                        profile = args.py_spy / name if args.py_spy and rep == 0 else None
                        with py_spy(pid, profile):
                            r = run_block(contender, n, args.turns, target, inputs)
                        r |= {"rep": rep}
                        results.append(r)
                        print(row(r), flush=True)
                        for failure in sorted(set(r["failures"])):
                            count = r["failures"].count(failure)
                            print(f"    {count} x {failure}", flush=True)
    finally:
        shutil.rmtree(agents, ignore_errors=True)
    print(f"load average at end: {loadavg()}")
    print(summary(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
