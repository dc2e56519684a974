"""Server benchmarks on loopback (no network): the offline model and the
production model path side by side, in the same run.

    python benchmarks/bench_server.py                  # everything, ~5 minutes
    python benchmarks/bench_server.py --sessions 10,25 --turns 2
    python benchmarks/bench_server.py --stagger 4     # starts spread over a turn
    python benchmarks/bench_server.py --workers 2     # python -m server --workers 2
    python benchmarks/bench_server.py --models offline  # the offline model only
    python benchmarks/bench_server.py --sessions 1,10,25,50 --models offline,gemini,openai
    python benchmarks/bench_server.py --trees ../before,.  # two checkouts' servers in turn
    python benchmarks/bench_server.py --sessions 100 --idle 10  # the input path alone
    python benchmarks/bench_server.py --echo-cancellation client,server  # the server's AEC off, on

Models: "offline" is the embedded offline model; "gemini" is the production
path — ADK's Gemini model and google-genai's live client over TLS, JSON and
base64 both ways — against the local Gemini Live endpoint
(tests/gemini_live, in a process of its own whose CPU is reported apart:
it stands in for Google's servers); "openai" is the OpenAI Realtime path —
our ``OpenAIRealtime`` model and the ``openai`` package's realtime client
over TLS, audio at 24 kHz both ways — against the local OpenAI Realtime
endpoint (tests/openai_realtime, likewise in its own process). Both
endpoints answer with the same exact echo, streamed in 200 ms bursts at
twice real time.

What it measures, with `python -m server` in its own process and the clients
in this one (both on this machine's cores):

* server-added latency per chunk, p50/p99: client frame received → its audio
  handed to ``LiveRequestQueue.send_realtime``; and model audio event received
  → its frame sent on the socket, beyond the intended real-time pacing
  (recorded by the server with AUDIOCORE_COLLECT_TIMINGS=1);
* first-audio latency: ``activity_end`` sent → first echoed audio frame
  received by the client (push-to-talk turns of real espeak-ng speech,
  48 kHz float32 in, binary 24 kHz PCM16 out);
* capacity: N concurrent real-time sessions; per N the server's CPU use
  (% of one core over the run; ms per session), latency p99, late frames
  (a listener with a 100 ms prebuffer would have run dry), lost samples
  (the echo's samples − the received samples that are echo: received −
  what the server sent that is not; the echo is exact, so anything else is
  a loss) and failed sessions (a turn not finished in 30 s, a socket
  closed), with their reasons.

Session starts are spread evenly over ``--stagger`` seconds (default 1 s):
with every session speaking the same 2.5 s turns, their turn ends — when the
model answers with a burst of events — fall within that window. 1 s packs
all of them into one second (near lockstep: at 100 sessions one core is
saturated for ≈0.8 s per turn end); 4 s, about one turn's length, spreads
them as independent users would.

Inputs are built before the timed part; results are checked after it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import websockets
from bench_server_client import (
    FRAME_S,
    IN_RATE,
    OUT_FRAME,
    PUSH_TO_TALK_START,
    REPO,
    cpu_seconds,
    local_gemini,
    local_openai,
    our_server,
    our_session,
    paced_frames,
    percentile,
    push_to_talk_start,
    py_spy,
    run_clients,
    server_stats,
    speech_48k,
    split,
)


async def _run_sessions(url: str, speech, n: int, turns: int, stagger_s: float, start: str):
    async def one(k: int):
        await asyncio.sleep(stagger_s * k / max(1, n))
        try:
            return await our_session(url, speech, turns, start=start)
        except (RuntimeError, OSError, websockets.ConnectionClosed) as exc:
            # An overloaded server: a turn that never finished, a socket
            # closed. Counted as a failed session, not the end of the run.
            return exc

    return await asyncio.gather(*(one(k) for k in range(n)))


def run(
    n: int,
    turns: int,
    speech,
    stagger_s: float = 1.0,
    workers: int = 1,
    model_env: dict[str, str] | None = None,
    endpoint_pid: int | None = None,
    profile: Path | None = None,
    tree: Path = REPO,
    start: str = PUSH_TO_TALK_START,
) -> dict:
    stats_path = Path(tempfile.mkdtemp()) / "stats.json"
    env = {"AUDIOCORE_WORKERS": str(workers), **(model_env or {})}
    with our_server(stats_path, tree, **env) as (url, proc), py_spy(proc.pid, profile):
        cpu0, t0, me0 = cpu_seconds(proc.pid), time.monotonic(), time.process_time()
        far0 = cpu_seconds(endpoint_pid) if endpoint_pid else 0.0
        sessions = run_clients(_run_sessions(url, speech, n, turns, stagger_s, start))
        cpu1, t1, me1 = cpu_seconds(proc.pid), time.monotonic(), time.process_time()
        far1 = cpu_seconds(endpoint_pid) if endpoint_pid else 0.0
    server = server_stats(stats_path)
    finished = [s for s in sessions if not isinstance(s, BaseException)]
    turns_all = [t for s in finished for t in s]
    first = [t.first_audio_s for t in turns_all]
    echo = len(speech) // 2  # 24 kHz: half the 48 kHz speech
    made_up = server.get("made_up_samples")
    if made_up is None:
        # A server from before it counted them (--trees): its padding of each
        # turn to whole frames, and whole concealed frames.
        padded = -(-echo // OUT_FRAME) * OUT_FRAME
        made_up = (padded - echo) * len(turns_all) + server["concealed_frames"] * OUT_FRAME
    return {
        "sessions": n,
        "failed_sessions": n - len(finished),
        "failures": collections.Counter(
            f"{type(s).__name__}: {s}"[:160] for s in sessions if isinstance(s, BaseException)
        ),
        "turns": len(turns_all),
        "server_cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
        # Per session, whatever the run's length (failed sessions stretch it).
        "server_cpu_ms_per_session": 1e3 * (cpu1 - cpu0) / n,
        "client_cpu_pct": 100 * (me1 - me0) / (t1 - t0),
        "endpoint_cpu_pct": 100 * (far1 - far0) / (t1 - t0),
        "in_p50_us": 1e6 * percentile(server["latency_in"], 50),
        "in_p99_us": 1e6 * percentile(server["latency_in"], 99),
        "out_p50_us": 1e6 * percentile(server["latency_out"], 50),
        "out_p99_us": 1e6 * percentile(server["latency_out"], 99),
        "first_audio_p50_ms": 1e3 * percentile(first, 50),
        "first_audio_p99_ms": 1e3 * percentile(first, 99),
        "late_frames": sum(t.late_frames for t in turns_all),
        "frames": sum(t.frames for t in turns_all),
        "server_late_frames": server["late_frames"],
        "concealed_frames": server["concealed_frames"],
        # The echo's samples less those received that are echo: the server
        # counts what it sent that is not (a stall's concealment and
        # fade-out, a turn's padding to a frame).
        "lost_samples": echo * len(turns_all) - sum(t.samples for t in turns_all) + made_up,
        "dropped_input_chunks": server["dropped_input_chunks"],
    }


async def _idle_window(url: str, n: int, seconds: float, pid: int) -> float:
    """N push-to-talk sessions that stream silence in 20 ms frames and never
    take a turn — the input path alone: socket, parser, budgets, resampler,
    the model's request queue. The server's CPU over ``seconds`` once every
    session streams, in µs per client frame."""
    quiet = np.zeros(int(IN_RATE * FRAME_S), np.float32).tobytes()
    start = time.monotonic()
    deadline = start + 1.5 + seconds + 0.5  # 1 s of starts, the window, a margin

    async def one(k: int) -> None:
        await asyncio.sleep(k / n)
        async with websockets.connect(url, max_size=None, compression=None) as ws:
            await ws.send(PUSH_TO_TALK_START)

            async def drain() -> None:
                async for _ in ws:
                    pass

            reader = asyncio.create_task(drain())
            try:
                count = int((deadline - time.monotonic()) / FRAME_S)
                await paced_frames([quiet] * count, ws.send)
            finally:
                reader.cancel()

    sessions = asyncio.gather(*(one(k) for k in range(n)))
    await asyncio.sleep(start + 1.5 - time.monotonic())
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    cpu1, t1 = cpu_seconds(pid), time.monotonic()
    await sessions
    return 1e6 * (cpu1 - cpu0) / (n * (t1 - t0) / FRAME_S)


def idle(n: int, seconds: float, workers: int, tree: Path) -> float:
    stats_path = Path(tempfile.mkdtemp()) / "stats.json"
    with our_server(stats_path, tree, AUDIOCORE_WORKERS=str(workers)) as (url, proc):
        return run_clients(_idle_window(url, n, seconds, proc.pid))


async def _barge_ins(url: str, speech, count: int) -> list[tuple[float, float]]:
    """Push-to-talk turns interrupted 0.5 s into the echo: (interrupt sent →
    data-interrupted received, interrupt sent → last audio frame received)."""
    import websockets

    frames = [c.tobytes() for c in split(speech, IN_RATE)]
    results = []
    async with websockets.connect(url, max_size=None, compression=None) as ws:
        await ws.send(
            json.dumps(
                {
                    "type": "start",
                    "input": {"sampleRate": IN_RATE, "format": "f32"},
                    "output": {"sampleRate": 24000, "binary": True},
                    "turnDetection": "manual",
                }
            )
        )
        for _ in range(count):
            await ws.send('{"type":"activity_start"}')
            await paced_frames(frames, ws.send)
            await ws.send('{"type":"activity_end"}')
            first = None
            while True:  # wait for the echo to be half a second in
                message = await ws.recv()
                if isinstance(message, bytes):
                    first = first or time.monotonic()
                    if time.monotonic() - first > 0.5:
                        break
            sent = time.monotonic()
            await ws.send('{"type":"interrupt"}')
            last_audio, notice = sent, None
            while True:
                message = await ws.recv()
                now = time.monotonic()
                if isinstance(message, bytes):
                    last_audio = now
                elif '"data-interrupted"' in message:
                    notice = now
                elif '"finish"' in message and notice is not None:
                    break
            results.append((notice - sent, last_audio - sent))
    return results


def barge_in(
    speech, count: int = 5, workers: int = 1, model_env: dict[str, str] | None = None
) -> dict:
    stats_path = Path(tempfile.mkdtemp()) / "stats.json"
    env = {"AUDIOCORE_WORKERS": str(workers), **(model_env or {})}
    with our_server(stats_path, **env) as (url, _):
        client = run_clients(_barge_ins(url, speech, count))
    server = server_stats(stats_path)
    return {
        "notice_ms": [1e3 * a for a, _ in client],
        "last_audio_ms": [1e3 * b for _, b in client],
        "server_last_frame_ms": [1e3 * v for v in server["bargein_last_frame_s"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", default="1,10,25,50,100")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument(
        "--stagger", type=float, default=1.0, help="spread session starts over this many seconds"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="start the server with this many worker processes"
    )
    parser.add_argument(
        "--models",
        default="offline,gemini,openai",
        help="comma-separated: offline, gemini, openai (the last two: their local endpoints)",
    )
    parser.add_argument(
        "--barge-ins", type=int, default=5, help="interrupted turns per model (1: a smoke run)"
    )
    parser.add_argument(
        "--trees",
        default=str(REPO),
        help="comma-separated checkouts whose servers to run in turn, each N and model "
        "(a before/after comparison with the same clients; each with its extension built)",
    )
    parser.add_argument(
        "--idle",
        type=float,
        metavar="SECONDS",
        help="instead of turns: N sessions stream silence and never take a turn; the server's "
        "CPU per client frame over SECONDS (the input path alone; offline model)",
    )
    parser.add_argument(
        "--echo-cancellation",
        default="client",
        help="comma-separated: client (none on the server), server (start.echoCancellation "
        '"server": the echo canceller on every session\'s microphone), each N in turn',
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="DIR",
        help="profile the server of every run with py-spy into DIR/<model>-<N>.txt",
    )
    args = parser.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not models or not set(models) <= {"offline", "gemini", "openai"}:
        parser.error(f"--models: expected some of offline, gemini, openai, got {args.models!r}")
    trees = [Path(t).resolve() for t in args.trees.split(",") if t.strip()]
    cancellers = [c.strip() for c in args.echo_cancellation.split(",") if c.strip()]
    if not cancellers or not set(cancellers) <= {"client", "server"}:
        parser.error(
            f"--echo-cancellation: expected client, server, got {args.echo_cancellation!r}"
        )
    if args.idle:
        for n in (int(v) for v in args.sessions.split(",")):
            for tree in trees:
                us = idle(n, args.idle, args.workers, tree)
                print(f"{tree.name}: {n} idle sessions, {us:.1f} µs of server CPU per client frame")
        return
    speech = speech_48k()
    print(
        f"speech: {len(speech) / 48000:.2f} s per turn; turns per session: {args.turns}; "
        f"session starts spread over {args.stagger:g} s; server workers: {args.workers}"
    )
    with contextlib.ExitStack() as stack:
        gemini = stack.enter_context(local_gemini()) if "gemini" in models else None
        openai = stack.enter_context(local_openai()) if "openai" in models else None
        envs = {
            "offline": {},
            "gemini": gemini.server_env() if gemini else {},
            "openai": openai.server_env() if openai else {},
        }
        endpoints = {
            "gemini": gemini.proc.pid if gemini else None,
            "openai": openai.proc.pid if openai else None,
        }
        width = max(len(t.name) for t in trees)
        header = (
            f"{'tree':>{width}} {'N':>4} {'model':>7} {'cpu%':>6} {'ms/ses':>6} "
            f"{'client%':>7} {'endpt%':>6} "
            f"{'in p50/p99 µs':>15} {'out p50/p99 µs':>16} {'first audio p50/p99 ms':>23} "
            f"{'late/frames':>14} {'lost':>6} {'dropped in':>10} {'concealed':>9} {'failed':>6}"
        )
        print(header)
        for n in (int(v) for v in args.sessions.split(",")):
            for model, tree, aec in ((m, t, c) for m in models for t in trees for c in cancellers):
                pid = endpoints.get(model)
                name = f"{tree.name}-{model}-{n}" if len(trees) > 1 else f"{model}-{n}"
                name += "-aec" if aec == "server" else ""
                profile = args.py_spy / f"{name}.txt" if args.py_spy else None
                r = run(
                    n,
                    args.turns,
                    speech,
                    args.stagger,
                    args.workers,
                    envs[model],
                    pid,
                    profile,
                    tree,
                    push_to_talk_start(aec),
                )
                print(
                    f"{tree.name:>{width}} {n:>4} {model + ('+aec' if aec == 'server' else ''):>7} "
                    f"{r['server_cpu_pct']:>6.1f} "
                    f"{r['server_cpu_ms_per_session']:>6.0f} "
                    f"{r['client_cpu_pct']:>7.1f} "
                    f"{r['endpoint_cpu_pct']:>6.1f} "
                    f"{r['in_p50_us']:>7.0f}/{r['in_p99_us']:<7.0f} "
                    f"{r['out_p50_us']:>8.0f}/{r['out_p99_us']:<7.0f} "
                    f"{r['first_audio_p50_ms']:>11.1f}/{r['first_audio_p99_ms']:<11.1f} "
                    f"{r['late_frames']:>6}/{r['frames']:<7} {r['lost_samples']:>6} "
                    f"{r['dropped_input_chunks']:>10} {r['concealed_frames']:>9} "
                    f"{r['failed_sessions']:>6}",
                    flush=True,
                )
                for why, count in r["failures"].most_common(3):
                    print(f"      failed sessions: {count} × {why}")
                assert r["lost_samples"] >= 0, "more echo than was spoken"
        for model in models:
            b = barge_in(speech, args.barge_ins, workers=args.workers, model_env=envs[model])
            print(
                f"barge-in, {model} (client interrupt 0.5 s into the echo, "
                f"{args.barge_ins} times): "
                f"interrupt → data-interrupted max {max(b['notice_ms']):.1f} ms; "
                f"interrupt → last audio frame received max {max(b['last_audio_ms']):.1f} ms; "
                f"server flush → last frame sent max {max(b['server_last_frame_ms']):.2f} ms"
            )


if __name__ == "__main__":
    main()
