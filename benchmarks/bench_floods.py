"""Hostile clients against a live server while real-time sessions stream.

    python benchmarks/bench_floods.py                       # every class, ~2 minutes
    python benchmarks/bench_floods.py --classes ping --sessions 1 --turns 1

For each flood class, ``python -m server`` (offline model) in its own
process serves ``--sessions`` innocent push-to-talk sessions (real speech,
exact echo) while one attacker socket sends the class's message as fast as
it can for ``--flood-s`` seconds (at most ``--max-messages``), reading
whatever comes back. Per class it reports:

* the server's RSS growth at its peak during the flood, and after the
  attacker has gone (both against the RSS before the flood);
* the event loop's lag as another socket sees it: a ``ping`` on ``/live``
  every 250 ms (within every rate), its pong's round trip, p99 and max —
  an upper bound: the probe shares this process's event loop with the
  attacker, whose sends hold it too; and the server's own maximum lag
  from ``GET /metrics``, where the server has it;
* the innocent sessions' late frames (a listener with a 100 ms prebuffer
  would have run dry) and lost samples;
* what the attacker got: its close code and reason, and how many ``error``
  chunks.

Run it from another checkout to measure that checkout's server (the script
starts the server of the tree it lies in).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_server_client import our_server, our_session, percentile, speech_48k

CLASSES: dict[str, list[str]] = {
    "ping": ['{"type":"ping","timestamp":1}'],
    "turn edges": ['{"type":"activity_start"}', '{"type":"activity_end"}'],
    "audio_control": ['{"type":"audio_control","action":"stop"}'],
    "tool_approval": ['{"type":"tool_approval","approvalId":"apr_x","approved":true}'],
    "task_cancel": ['{"type":"task_cancel","taskId":"t_nothing"}'],
    "interrupt": ['{"type":"interrupt"}'],
}
START = json.dumps({"type": "start", "turnDetection": "manual"})


def server_lag_max_ms(base: str) -> str:
    """The server's own figure, where it has one (``GET /metrics``)."""
    url = base.replace("ws://", "http://") + "/metrics"
    try:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
    except (OSError, ValueError):
        return "n/a"
    for line in text.splitlines():
        if line.startswith("audiocore_event_loop_lag_max_seconds "):
            return f"{1e3 * float(line.split()[1]):.1f}"
    return "n/a"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


async def attack(url: str, messages: list[str], seconds: float, limit: int) -> dict:
    import websockets

    got = {"sent": 0, "errors": 0, "close": None}
    async with websockets.connect(url, max_size=None, compression=None) as ws:
        await ws.send(START)

        async def read() -> None:
            with contextlib.suppress(websockets.ConnectionClosed):
                async for message in ws:
                    if isinstance(message, str) and '"type":"error"' in message:
                        got["errors"] += 1

        reader = asyncio.create_task(read())
        ends = time.monotonic() + seconds
        with contextlib.suppress(websockets.ConnectionClosed):
            while got["sent"] < limit and time.monotonic() < ends:
                await ws.send(messages[got["sent"] % len(messages)])
                got["sent"] += 1
                if got["sent"] % 100 == 0:
                    await asyncio.sleep(0)  # let the reader see a close
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(reader, 5)
        reader.cancel()
        if ws.close_code is not None:
            got["close"] = f"{ws.close_code} {ws.close_reason or ''}".strip()
    return got


async def probe(base: str, stop: asyncio.Event) -> list[float]:
    """Round trips of a ping on /live every 250 ms until ``stop``."""
    import websockets

    trips: list[float] = []
    async with websockets.connect(f"{base}/live", max_size=None, compression=None) as ws:
        # No Nagle: a small ping must not wait for the last one's ACK.
        ws.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while not stop.is_set():
            sent = time.monotonic()
            await ws.send(json.dumps({"type": "ping", "timestamp": sent}))
            while True:
                message = await ws.recv()
                if isinstance(message, str) and message.startswith('{"type":"pong"'):
                    break
            trips.append(time.monotonic() - sent)
            await asyncio.sleep(max(0.0, 0.25 - (time.monotonic() - sent)))
    return trips


async def one_class(url: str, pid: int, messages: list[str], args, speech) -> dict:
    base = url.removesuffix("/ws")
    stop = asyncio.Event()
    prober = asyncio.create_task(probe(base, stop))
    sessions = [
        asyncio.create_task(our_session(url, speech, args.turns)) for _ in range(args.sessions)
    ]
    await asyncio.sleep(1.0)  # the sessions are streaming
    before = peak = rss_mb(pid)
    attacker = asyncio.create_task(attack(url, messages, args.flood_s, args.max_messages))
    while not attacker.done():
        peak = max(peak, rss_mb(pid))
        await asyncio.sleep(0.1)
    got = attacker.result()
    results = [turn for s in await asyncio.gather(*sessions) for turn in s]
    await asyncio.sleep(1.0)  # the attacker's socket is gone: what stays?
    after = rss_mb(pid)
    stop.set()
    trips = await prober
    return {
        "server_lag_max_ms": server_lag_max_ms(base),
        "rss_peak_mb": peak - before,
        "rss_after_mb": after - before,
        "lag_p99_ms": 1e3 * percentile(trips, 99),
        "lag_max_ms": 1e3 * max(trips),
        "late": sum(r.late_frames for r in results),
        "frames": sum(r.frames for r in results),
        "lost": sum(r.expected - r.samples for r in results),
        **got,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default=",".join(CLASSES))
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--flood-s", type=float, default=5.0)
    parser.add_argument("--max-messages", type=int, default=50_000)
    args = parser.parse_args()
    names = [c.strip() for c in args.classes.split(",") if c.strip()]
    unknown = set(names) - set(CLASSES)
    if unknown:
        parser.error(f"--classes: unknown {sorted(unknown)}; expected some of {list(CLASSES)}")
    speech = speech_48k()
    print(
        f"{args.sessions} innocent sessions x {args.turns} turns; one attacker socket, "
        f"{args.flood_s:g} s or {args.max_messages} messages"
    )
    print(
        "| class | RSS peak / after, MB | ping round trip p99 / max, ms | server loop lag max, ms "
        "| innocent late / frames | lost | attacker sent | attacker got |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        stats = Path(tempfile.mkdtemp()) / "stats.json"
        with our_server(stats) as (url, proc):
            r = asyncio.run(one_class(url, proc.pid, CLASSES[name], args, speech))
        print(
            f"| {name} | {r['rss_peak_mb']:+.1f} / {r['rss_after_mb']:+.1f} "
            f"| {r['lag_p99_ms']:.1f} / {r['lag_max_ms']:.1f} | {r['server_lag_max_ms']} "
            f"| {r['late']} / {r['frames']} "
            f"| {r['lost']} | {r['sent']} | {r['errors']} errors, close {r['close']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
