"""Soak: one server, many real-time sessions for minutes; is it still the
same server at the end?

    python benchmarks/soak.py --sessions 10 --minutes 1       # a short trial
    python benchmarks/soak.py --sessions 2 --minutes 1 --minute-s 5 --settle 1   # smoke: it runs
    setsid sh -c 'echo -10 > /proc/self/autogroup &&
        exec nice -n -10 python benchmarks/soak.py --json soak.json'   # 100 × 10 min

``python -m server`` (offline model, one worker, a data directory of its
own, uvicorn on 127.0.0.1) in its own process; the sessions in this one.
Each session streams push-to-talk turns of espeak-ng speech (48 kHz
float32, 20 ms frames at real-time pace, silence between turns) and
receives the 24 kHz PCM16 echo, for ``--minutes``; session starts are
spread over ``--stagger`` seconds, so turn ends are spread as independent
users' are. Run it at a higher priority than other work on the machine
(inherited by the server): what it measures is the server, not a machine
that lends its cores to someone else — and the server's wait for a CPU is
reported, so a starved minute shows. With the kernel's autogroup
scheduling (``/proc/sys/kernel/sched_autogroup_enabled``), ``nice`` only
ranks processes within their session's group, and each other login or
service gets a group's fair share whatever its nice: raise the group's
weight as above (a new session, ``/proc/self/autogroup``; root).

Every turn's speech carries a watermark (``watermarked``: low-level noise
keyed to session and turn), and its exact echo through the resampling chain
is computed here (``exact_echo``); every received sample is traced to a
sample of it (``account_samples``). Per minute (turns by the minute they
end in):

* lost, duplicated and foreign samples (0 required);
* first audio (``activity_end`` sent → first echo frame) and per-chunk
  latency (a chunk's arrival beyond its real-time play time counted from
  ``activity_end``), p99, and frames a 100 ms-prebuffer listener would get
  late; server errors and sessions that ended early;
* the server process, from /proc/<pid> at the minute's end: RSS, open file
  descriptors; over the minute: its CPU (utime + stime) and the time its
  threads waited runnable for a CPU (schedstat), as % of wall time; the
  same for this client process.

After every session has closed (and ``--settle`` seconds): RSS and fds
against the baseline, taken with the server warm — after one session of
one turn has come and gone (the server cold, before it, is reported too).
The server inherits this process's environment: ``PYTHONMALLOC=malloc
python soak.py …`` measures it with Python's objects on glibc's allocator.
With ``--again M`` the same load then runs once more for M minutes on new
sessions, and RSS after its close is held to the first close's: what a
load leaves behind must not add up from one load to the next. The server's own
latency timings (AUDIOCORE_COLLECT_TIMINGS) stay off: they keep a list
entry per frame, which would itself grow the RSS being watched.

Criteria (verdicts in the output and the JSON): samples exact in every
minute; no session error; RSS flat after warm-up — every minute from
``--warm-minutes`` on within 10% of that minute's value; fds equal to that
minute's; fds back to baseline after close; RSS after close within 10% of
baseline; no late frame; with ``--again``, RSS after the second close
within 5% of after the first.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import uvloop
from bench_server_client import (
    FRAME_S,
    IN_RATE,
    OUT_FRAME,
    PUSH_TO_TALK_START,
    SampleAccount,
    account_samples,
    exact_echo,
    our_server,
    percentile,
    push_to_talk_turns,
    speech_48k,
    split,
    watermarked,
)

RSS_BOUND = 0.10  # flat: within 10% of the warm-up minute's RSS
AGAIN_BOUND = 0.05  # --again: RSS after the second close within 5% of the first's


@dataclasses.dataclass
class Turn:
    ended: float  # monotonic: the turn's finish received (or the socket closed)
    account: SampleAccount
    first_audio_s: float
    lateness_s: np.ndarray  # per echo chunk (bench_server_client.chunk_lateness)
    late_frames: int
    frames: int


@dataclasses.dataclass
class Load:
    turns: list[Turn] = dataclasses.field(default_factory=list)
    # (monotonic, session, what): server errors and sessions ended early.
    errors: list[tuple[float, int, str]] = dataclasses.field(default_factory=list)


def _pids(pid: int) -> list[int]:
    """The process and its live descendants (uvicorn workers, if any)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *(p for child in children for p in _pids(int(child)))]


def proc_sample(pid: int, children: bool = True) -> dict:
    """RSS, open fds, CPU time and schedstat run/wait time of a process (and
    its descendants), summed over their threads (the thread pools too)."""
    out = {"at": time.monotonic(), "rss_kb": 0, "fds": 0, "cpu_s": 0.0, "run_ns": 0, "wait_ns": 0}
    for p in _pids(pid) if children else [pid]:
        status = Path(f"/proc/{p}/status").read_text()
        out["rss_kb"] += int(status.split("VmRSS:")[1].split()[0])
        out["fds"] += len(os.listdir(f"/proc/{p}/fd"))
        stat = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        out["cpu_s"] += (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
        for task in os.listdir(f"/proc/{p}/task"):
            try:
                run, wait, _ = Path(f"/proc/{p}/task/{task}/schedstat").read_text().split()
            except FileNotFoundError:  # a thread that just ended
                continue
            out["run_ns"] += int(run)
            out["wait_ns"] += int(wait)
    return out


def _rates(a: dict, b: dict) -> dict:
    wall = b["at"] - a["at"]
    return {
        "cpu_pct": 100 * (b["cpu_s"] - a["cpu_s"]) / wall,
        "wait_pct": 100 * (b["wait_ns"] - a["wait_ns"]) / 1e9 / wall,
    }


@dataclasses.dataclass
class _InFlight:
    """The turn a session is in: what it expects and what came so far."""

    expected: bytes = b""
    received: list[bytes] = dataclasses.field(default_factory=list)


async def _session(url: str, speech: np.ndarray, k: int, end: float, load: Load) -> None:
    """Session ``k``: turn after turn until ``end``; reconnects if the server
    ends it, so the load stays at N."""
    turn = 0
    while time.monotonic() < end:
        flight = _InFlight()
        try:
            turn = await _connection(url, speech, k, turn, end, load, flight)
        except Exception as error:  # noqa: BLE001 — recorded, and the session goes on
            load.errors.append((time.monotonic(), k, f"session ended: {error!r}"))
            if flight.expected:  # the turn in flight: what came of it
                account = account_samples(b"".join(flight.received), flight.expected)
                load.turns.append(Turn(time.monotonic(), account, float("nan"), np.zeros(0), 0, 0))
            await asyncio.sleep(1)


async def _connection(
    url: str, speech: np.ndarray, k: int, turn: int, end: float, load: Load, flight: _InFlight
) -> int:
    """One connection of session ``k``, from turn ``turn`` until ``end``;
    returns the next turn's number."""
    import websockets

    quiet = np.zeros(int(IN_RATE * FRAME_S), np.float32).tobytes()
    gap = int((len(speech) / IN_RATE + 0.6) / FRAME_S)
    arrivals: list[tuple[float, int]] = []
    finished: asyncio.Queue[float] = asyncio.Queue()
    async with websockets.connect(url, max_size=None, compression=None) as ws:
        await ws.send(PUSH_TO_TALK_START)

        async def receive() -> None:
            try:
                async for message in ws:
                    if isinstance(message, bytes):
                        arrivals.append((time.monotonic(), len(message) // 2))
                        flight.received.append(message)
                    elif '"finish"' in message:
                        finished.put_nowait(time.monotonic())
                    elif '"type":"error"' in message:
                        text = json.loads(message)["errorText"]
                        load.errors.append((time.monotonic(), k, text))
            finally:  # closed: end the turn in flight with what came
                finished.put_nowait(time.monotonic())

        reader = asyncio.create_task(receive())
        try:
            while time.monotonic() < end:
                x = watermarked(speech, k, turn)
                turn += 1
                echo = exact_echo(x)
                flight.expected = echo + bytes(-len(echo) % (2 * OUT_FRAME))  # whole frames
                [result] = await push_to_talk_turns(
                    ws.send,
                    arrivals,
                    finished,
                    turns=1,
                    frames=[c.tobytes() for c in split(x, IN_RATE)],
                    quiet=quiet,
                    gap=gap,
                    edges=('{"type":"activity_start"}', '{"type":"activity_end"}'),
                    expected=len(flight.expected) // 2,
                    prebuffer_s=0.1,
                    received=flight.received,
                )
                load.turns.append(
                    Turn(
                        time.monotonic(),
                        account_samples(result.audio, flight.expected),
                        result.first_audio_s,
                        np.asarray(result.lateness_s, np.float32),
                        result.late_frames,
                        result.frames,
                    )
                )
                flight.expected = b""
        finally:
            reader.cancel()
    return turn


async def _sample(
    pid: int, t0: float, minutes: int, every_s: float, samples: list[dict], minute_s: int = 60
) -> None:
    """A sample of the server and of this process at every ``every_s``;
    exactly at each minute's end too."""
    ends = range(minute_s, minute_s * minutes + 1, minute_s)
    ticks = sorted({*np.arange(every_s, minute_s * minutes + every_s / 2, every_s), *ends})
    for tick in ticks:
        await asyncio.sleep(max(0.0, t0 + tick - time.monotonic()))
        samples.append(_snapshot(pid, float(tick)))


def _snapshot(pid: int, t: float) -> dict:
    return {
        "t": t,
        "server": proc_sample(pid),
        "client": proc_sample(os.getpid(), children=False),
        "loadavg": os.getloadavg()[0],
    }


async def _soak(url: str, pid: int, speech, args, first: int = 0) -> tuple[Load, list[dict], float]:
    """``args.sessions`` sessions, numbered from ``first``, for ``args.minutes``."""
    load, samples = Load(), []
    t0 = time.monotonic()
    samples.append(_snapshot(pid, 0.0))
    end = t0 + args.minute_s * args.minutes

    async def start(k: int) -> None:
        await asyncio.sleep(args.stagger * k / args.sessions)
        await _session(url, speech, first + k, end, load)

    sampler = asyncio.create_task(
        _sample(pid, t0, args.minutes, args.sample_every, samples, args.minute_s)
    )
    await asyncio.gather(*(start(k) for k in range(args.sessions)))
    await sampler
    return load, samples, t0


def minute_rows(
    load: Load, samples: list[dict], t0: float, minutes: int, minute_s: int = 60
) -> list[dict]:
    at_minute = {round(s["t"]): s for s in samples if s["t"] % minute_s == 0}
    rows = []
    for m in range(1, minutes + 1):
        # Turns that end after the last minute (the turn in flight) count in it.
        turns = [
            t
            for t in load.turns
            if m - 1 <= (t.ended - t0) / minute_s < m
            or (m == minutes and (t.ended - t0) / minute_s >= m)
        ]
        errors = [
            e
            for e in load.errors
            if m - 1 <= (e[0] - t0) / minute_s < m or (m == minutes and (e[0] - t0) / minute_s >= m)
        ]
        lateness = np.concatenate([t.lateness_s for t in turns]) if turns else np.zeros(0)
        first = [t.first_audio_s for t in turns if t.first_audio_s == t.first_audio_s]
        a, b = at_minute[minute_s * (m - 1)], at_minute[minute_s * m]
        rows.append(
            {
                "minute": m,
                "turns": len(turns),
                "expected": sum(t.account.expected for t in turns),
                "lost": sum(t.account.lost for t in turns),
                "duplicated": sum(t.account.duplicated for t in turns),
                "foreign": sum(t.account.foreign for t in turns),
                "late_frames": sum(t.late_frames for t in turns),
                "frames": sum(t.frames for t in turns),
                "first_audio_p99_ms": 1e3 * percentile(first, 99),
                "chunk_p99_ms": 1e3 * percentile(list(lateness), 99),
                "errors": len(errors),
                "rss_mb": b["server"]["rss_kb"] / 1024,
                "fds": b["server"]["fds"],
                "server": _rates(a["server"], b["server"]),
                "client": _rates(a["client"], b["client"]),
                "loadavg": b["loadavg"],
            }
        )
    return rows


def verdicts(
    rows: list[dict], baseline: dict, after: dict, warm: int, errors: int, again: dict | None = None
) -> dict:
    def verdict(ok: bool | None, detail: str) -> dict:
        return {"pass": ok, "detail": detail}

    bad = [r["minute"] for r in rows if r["lost"] or r["duplicated"] or r["foreign"]]
    total = {
        key: sum(r[key] for r in rows) for key in ("lost", "duplicated", "foreign", "expected")
    }
    out = {
        "samples_exact": verdict(
            not bad,
            "lost {lost}, duplicated {duplicated}, foreign {foreign} of {expected}; ".format(
                **total
            )
            + f"minutes not exact: {bad or 'none'}",
        ),
        "no_session_errors": verdict(errors == 0, f"{errors} errors"),
        "no_late_frames": verdict(
            not any(r["late_frames"] for r in rows),
            f"{sum(r['late_frames'] for r in rows)} of {sum(r['frames'] for r in rows)} frames",
        ),
    }
    steady = [r for r in rows if r["minute"] >= warm]
    if len(steady) >= 2:
        ref = steady[0]
        spread = [r["rss_mb"] / ref["rss_mb"] - 1 for r in steady]
        out["rss_flat"] = verdict(
            max(abs(s) for s in spread) <= RSS_BOUND,
            f"minutes {warm}–{rows[-1]['minute']} within {100 * min(spread):+.1f}% … "
            f"{100 * max(spread):+.1f}% of minute {warm}'s {ref['rss_mb']:.1f} MB "
            f"(bound ±{100 * RSS_BOUND:.0f}%)",
        )
        fds = sorted({r["fds"] for r in steady})
        out["fds_flat"] = verdict(
            fds == [ref["fds"]], f"minutes {warm}–{rows[-1]['minute']}: {fds}"
        )
    else:
        out["rss_flat"] = out["fds_flat"] = verdict(None, f"needs {warm + 1} minutes or more")
    base, end = baseline["rss_kb"] / 1024, after["rss_kb"] / 1024
    out["fds_back_to_baseline"] = verdict(
        after["fds"] == baseline["fds"], f"{after['fds']} after close, {baseline['fds']} before"
    )
    out["rss_back_to_baseline"] = verdict(
        end <= base * (1 + RSS_BOUND),
        f"{end:.1f} MB after close, {base:.1f} MB before ({100 * (end / base - 1):+.1f}%)",
    )
    if again is not None:
        second = again["after_close"]["rss_kb"] / 1024
        out["rss_same_after_another_load"] = verdict(
            second <= end * (1 + AGAIN_BOUND) and again["errors"] == 0,
            f"{second:.1f} MB after the second load's close, {end:.1f} MB after the first's "
            f"({100 * (second / end - 1):+.1f}%; bound +{100 * AGAIN_BOUND:.0f}%; "
            f"{again['errors']} errors)",
        )
    return out


def _autogroup() -> str | None:
    """This process's scheduling group and its nice ("/autogroup-N nice -10")."""
    try:
        return Path("/proc/self/autogroup").read_text().strip()
    except OSError:
        return None


def _gdb_call(pid: int, *calls: str) -> None:
    """Run ``calls`` (C expressions) in the stopped process ``pid`` with gdb."""
    command = ["gdb", "-p", str(pid), "-batch", "-nx"]
    for call in calls:
        command += ["-ex", f"call {call}"]
    subprocess.run(command, capture_output=True, check=True, timeout=120)


def _collect_and_trim(pid: int) -> dict:
    """RSS after the server's ``gc.collect()``, then after glibc's
    ``malloc_trim(0)`` (free heap pages handed back to the kernel): how much
    of what stays after close is garbage, and how much the allocator keeps."""
    _gdb_call(
        pid,
        "(int)PyGILState_Ensure()",
        '(int)PyRun_SimpleString("import gc; gc.collect()")',
        "(void)PyGILState_Release($1)",
    )
    collected = proc_sample(pid)
    _gdb_call(pid, "(int)malloc_trim(0)")
    return {"after_gc": collected, "after_malloc_trim": proc_sample(pid)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument(
        "--workers", type=int, default=1, help="server worker processes (RSS, fds, CPU: their sum)"
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--stagger", type=float, default=5.0, help="spread starts over this many s")
    parser.add_argument("--warm-minutes", type=int, default=2, help="the minute RSS is held to")
    parser.add_argument("--settle", type=float, default=10.0, help="s after close before sampling")
    parser.add_argument(
        "--trim",
        action="store_true",
        help="after close, make the server gc.collect() then malloc_trim(0) (through gdb)",
    )
    parser.add_argument("--sample-every", type=float, default=10.0, help="s between samples")
    parser.add_argument(
        "--minute-s",
        type=int,
        default=60,
        help="how long a 'minute' (a row, the load's unit) is: shorter only for a smoke run "
        "(tests/test_benchmarks.py), whose figures mean nothing",
    )
    parser.add_argument(
        "--again",
        type=int,
        default=0,
        metavar="MINUTES",
        help="after close, run the same load again for this long on new sessions, and "
        "compare RSS after that close with after the first (nothing kept per load)",
    )
    args = parser.parse_args()
    speech = speech_48k()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(
        f"{date}: {args.sessions} sessions × {args.minutes} min on {args.workers} worker(s), "
        f"starts over {args.stagger:g} s; "
        f"speech {len(speech) / IN_RATE:.2f} s per turn; "
        f"nice {os.getpriority(os.PRIO_PROCESS, 0)} ({_autogroup()}); "
        f"load average {os.getloadavg()[0]:.2f}; "
        f"PYTHONMALLOC={os.environ.get('PYTHONMALLOC', '(unset: pymalloc)')}",
        flush=True,
    )
    stats = Path(tempfile.mkdtemp()) / "stats.json"
    workers = str(args.workers)
    with our_server(stats, AUDIOCORE_COLLECT_TIMINGS="0", AUDIOCORE_WORKERS=workers) as (url, proc):
        time.sleep(1)
        cold = proc_sample(proc.pid)
        # The baseline is the server warm: after one session of one turn,
        # closed. A server that has never served has not yet imported or
        # built what the first conversation needs (ADK's live flow, genai's
        # types, SQLite's page cache): that growth happens once, not per load.
        warm_up = Load()
        uvloop.run(_session(url, speech, args.sessions, time.monotonic() + 0.1, warm_up))
        if warm_up.errors or not warm_up.turns:
            raise SystemExit(f"the warm-up session failed: {warm_up.errors}")
        time.sleep(args.settle)
        baseline = proc_sample(proc.pid)
        # uvloop: the clients cost less CPU, which the server shares.
        load, samples, t0 = uvloop.run(_soak(url, proc.pid, speech, args))
        time.sleep(args.settle)
        after = proc_sample(proc.pid)
        trimmed = _collect_and_trim(proc.pid) if args.trim else None
        again = None
        if args.again:
            # New sessions (numbered after the first load's), the same load.
            second = argparse.Namespace(**{**vars(args), "minutes": args.again})
            load2, _, _ = uvloop.run(_soak(url, proc.pid, speech, second, first=args.sessions + 1))
            time.sleep(args.settle)
            again = {"after_close": proc_sample(proc.pid), "errors": len(load2.errors)}
        server_nice = os.getpriority(os.PRIO_PROCESS, proc.pid)
    totals = json.loads(stats.read_text()) if stats.exists() else {}
    rows = minute_rows(load, samples, t0, args.minutes, args.minute_s)
    print(
        f"{'min':>3} {'turns':>5} {'lost':>5} {'dup':>4} {'forgn':>5} {'late':>4} "
        f"{'1st p99':>7} {'chunk p99':>9} {'err':>3} {'RSS MB':>7} {'fds':>4} "
        f"{'cpu%':>5} {'wait%':>5} {'cl cpu%':>7} {'cl wait%':>8} {'load':>5}"
    )
    for r in rows:
        print(
            f"{r['minute']:>3} {r['turns']:>5} {r['lost']:>5} {r['duplicated']:>4} "
            f"{r['foreign']:>5} {r['late_frames']:>4} {r['first_audio_p99_ms']:>7.1f} "
            f"{r['chunk_p99_ms']:>9.1f} {r['errors']:>3} {r['rss_mb']:>7.1f} {r['fds']:>4} "
            f"{r['server']['cpu_pct']:>5.1f} {r['server']['wait_pct']:>5.1f} "
            f"{r['client']['cpu_pct']:>7.1f} {r['client']['wait_pct']:>8.1f} {r['loadavg']:>5.2f}"
        )
    print(
        f"cold: {cold['rss_kb'] / 1024:.1f} MB, {cold['fds']} fds; "
        f"baseline (warm): {baseline['rss_kb'] / 1024:.1f} MB, {baseline['fds']} fds; after close "
        f"(+{args.settle:g} s): {after['rss_kb'] / 1024:.1f} MB, {after['fds']} fds; "
        f"server nice {server_nice}; server totals: " + json.dumps(
            {k: totals.get(k) for k in ("connections", "frames_sent", "late_frames",
                                        "concealed_frames", "dropped_input_chunks")}
        )
    )  # fmt: skip
    if trimmed:
        print(
            "after gc.collect(): {:.1f} MB; then after malloc_trim(0): {:.1f} MB".format(
                trimmed["after_gc"]["rss_kb"] / 1024, trimmed["after_malloc_trim"]["rss_kb"] / 1024
            )
        )
    errors = sorted({e[2] for e in load.errors})
    for text in errors[:10]:
        print(f"error: {text}")
    if again is not None:
        print(
            f"again ({args.again} min, new sessions, {again['errors']} errors): after close "
            f"{again['after_close']['rss_kb'] / 1024:.1f} MB, {again['after_close']['fds']} fds"
        )
    result = verdicts(rows, baseline, after, args.warm_minutes, len(load.errors), again)
    for name, v in result.items():
        flag = {True: "PASS", False: "FAIL", None: "n/a"}[v["pass"]]
        print(f"{flag:>4}  {name}: {v['detail']}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "date": date,
                    "command": " ".join([Path(sys.executable).name, *sys.argv]),
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "nice": {"client": os.getpriority(os.PRIO_PROCESS, 0), "server": server_nice},
                    "autogroup": _autogroup(),
                    "cpus": os.cpu_count(),
                    "pythonmalloc": os.environ.get("PYTHONMALLOC"),
                    "cold": cold,
                    "baseline": baseline,
                    "after_close": after,
                    "after_close_trimmed": trimmed,
                    "again": again,
                    "minutes": rows,
                    "samples": samples,
                    "server_totals": {k: v for k, v in totals.items() if not isinstance(v, list)},
                    "errors": [
                        {"t": e[0] - t0, "session": e[1], "text": e[2]} for e in load.errors
                    ],
                    "verdicts": result,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
