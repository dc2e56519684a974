"""Hostile clients against a live server while real-time sessions stream.

    python benchmarks/bench_hostile.py                       # every class, ~4 minutes
    python benchmarks/bench_hostile.py --classes ping,"REST large read" --sessions 1

For each class, ``python -m server`` (offline model) in its own process
serves ``--sessions`` innocent push-to-talk sessions (real speech, exact
echo) while an attacker, in a process of its own, does the class's thing
for ``--flood-s`` seconds:

* socket floods: a socket sends one message kind as fast as it can
  (``ping``, turn edges, ``audio_control``, ``tool_approval``,
  ``task_cancel``, ``interrupt``), and connects again whenever the server
  closes it, for the whole time; and the same with 4 MB text frames of
  tiny JSON objects (``large frame``);
* stalls: four clients reading a stored session of 7,000 events (6.5 MB)
  over and over (``REST large read``); creating such sessions one after
  another (``REST large create``); 8 MB bodies of tiny JSON objects
  (``large body``); a chat message with 20,000 image parts (``chat
  images``); 150 requests that declare a body and never send it (``slow
  bodies``, over the body timeout); sessions created as fast as the server
  answers (``API sessions``); 200 sockets from one address (``sockets``);
* hostile ACP agents: the server runs tasks on ``tests/server/acp_raw_agent.py``
  (``--task-backend acp``) and the attacker starts one task on ``/ws``, which
  the agent answers with a flood: 3,000,000 short stderr lines (``agent
  stderr``), 300,000 progress updates (``agent progress``), 400 MiB on
  stdout without a newline (``agent endless line``).

Per class it reports:

* the server's RSS growth at its peak during the attack, and after the
  attacker has gone (both against the RSS before);
* the event loop's lag as the server measures it (a timer every 50 ms,
  ``GET /metrics``), over the attack only: p99 and max, as the upper bounds
  of their histogram buckets;
* a ``ping`` on ``/live`` every 250 ms: its round trip, p99 and max (the
  probe shares the innocent sessions' process);
* the innocent sessions' late frames (a listener with a 100 ms prebuffer
  would have run dry) and lost samples;
* what the attacker got: close codes and reasons, statuses, ``error``
  chunks.

Run it from another checkout to measure that checkout's server (the script
starts the server of the tree it lies in).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import concurrent.futures
import contextlib
import http.client
import json
import multiprocessing
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench_server_client import our_server, our_session, percentile, speech_48k

SOCKET_FLOODS: dict[str, list[str]] = {
    "ping": ['{"type":"ping","timestamp":1}'],
    "turn edges": ['{"type":"activity_start"}', '{"type":"activity_end"}'],
    "audio_control": ['{"type":"audio_control","action":"stop"}'],
    "tool_approval": ['{"type":"tool_approval","approvalId":"apr_x","approved":true}'],
    "task_cancel": ['{"type":"task_cancel","taskId":"t_nothing"}'],
    "interrupt": ['{"type":"interrupt"}'],
}
STALLS = (
    "large frame",
    "REST large read",
    "REST large create",
    "large body",
    "chat images",
    "slow bodies",
    "API sessions",
    "sockets",
)
# Hostile ACP agents: the raw agent's flood and its size.
AGENT_FLOODS = {
    "agent stderr": ("stderr-flood", "3000000"),
    "agent progress": ("progress-flood", "300000"),
    "agent endless line": ("endless-line", "400"),
}
CLASSES = [*SOCKET_FLOODS, *STALLS, *AGENT_FLOODS]
RAW_AGENT = Path(__file__).resolve().parent.parent / "tests" / "server" / "acp_raw_agent.py"
START = json.dumps({"type": "start", "turnDetection": "manual"})
APP = "audiocore"
LARGE_EVENTS = 7000
# The attacker's own address (all of 127/8 is this machine): the server's
# per-address bounds are the attacker's, not the innocent sessions'.
ATTACKER = ("127.0.0.2", 0)


# ------------------------------------------------------------------ attackers
# Each runs in a process of its own (the innocent sessions' process must not
# pay for building 8 MB bodies), from ``attack(name, base, seconds)``.


def _tiny_objects(size: int) -> str:
    """A JSON array of tiny objects: the costliest JSON to parse per byte."""
    return "[" + ",".join(['{"a":[1]}'] * (size // 10)) + "]"


def _events(count: int, prefix: str) -> list[dict[str, Any]]:
    text = "a turn of an ordinary voice conversation, transcribed " * 16
    return [
        {
            "id": f"{prefix}{i}",
            "author": "user" if i % 2 == 0 else "agent",
            "invocationId": f"inv{i // 2}",
            "timestamp": 1_700_000_000.0 + i,
            "content": {"role": "user" if i % 2 == 0 else "model", "parts": [{"text": text}]},
        }
        for i in range(count)
    ]


def _request(
    host: str, port: int, method: str, path: str, body: bytes | None = None
) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(host, port, timeout=60, source_address=ATTACKER)
    try:
        headers = {"content-type": "application/json"} if body is not None else {}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _repeat(seconds: float, clients: int, call) -> dict[str, Any]:
    """``call()`` over and over from ``clients`` threads; the statuses."""
    statuses: collections.Counter[str] = collections.Counter()
    ends = time.monotonic() + seconds
    lock = threading.Lock()

    def loop() -> None:
        while time.monotonic() < ends:
            try:
                status = str(call())
            except OSError as exc:
                status = type(exc).__name__
            with lock:
                statuses[status] += 1

    threads = [threading.Thread(target=loop) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"sent": sum(statuses.values()), "got": dict(statuses)}


async def _socket_flood(base: str, messages: list[str], seconds: float, limit: int) -> dict:
    """One socket at a time floods for ``seconds``; when the server closes
    it, the attacker connects again (sockets the server refuses count too)."""
    import websockets

    sent = errors = 0
    closes: collections.Counter[str] = collections.Counter()
    ends = time.monotonic() + seconds
    while sent < limit and time.monotonic() < ends:
        try:
            ws = await websockets.connect(
                f"{base}/ws", max_size=None, compression=None, local_addr=ATTACKER
            )
        except websockets.InvalidStatus as exc:
            closes[f"refused {exc.response.status_code}"] += 1
            await asyncio.sleep(0.05)
            continue
        async with ws:
            await ws.send(START)

            async def read(ws: Any) -> int:
                told = 0
                with contextlib.suppress(websockets.ConnectionClosed):
                    async for message in ws:
                        if isinstance(message, str) and '"type":"error"' in message:
                            told += 1
                return told

            reader = asyncio.create_task(read(ws))
            with contextlib.suppress(websockets.ConnectionClosed):
                while sent < limit and time.monotonic() < ends:
                    await ws.send(messages[sent % len(messages)])
                    sent += 1
                    if sent % 100 == 0:
                        await asyncio.sleep(0)  # let the reader see a close
                        if reader.done():
                            break
            await ws.close()
            errors += await reader
            closes[f"{ws.close_code} {ws.close_reason or ''}".strip()] += 1
    return {"sent": sent, "got": f"{errors} errors; closes {dict(closes)}"}


async def _sockets(base: str, seconds: float) -> dict:
    """200 sockets from one address, held for ``seconds``: how many the
    server kept, and how it closed or refused the others."""
    import websockets

    opened: list[Any] = []
    refused: collections.Counter[str] = collections.Counter()
    for _ in range(200):
        try:
            opened.append(
                await websockets.connect(f"{base}/ws", compression=None, local_addr=ATTACKER)
            )
        except websockets.InvalidStatus as exc:
            refused[f"refused {exc.response.status_code}"] += 1
    await asyncio.sleep(seconds)
    for ws in opened:
        if ws.close_code is not None:
            refused[f"{ws.close_code} {ws.close_reason or ''}".strip()] += 1
    kept = sum(1 for ws in opened if ws.close_code is None)
    for ws in opened:
        await ws.close()
    return {"sent": 200, "got": f"{kept} kept; {dict(refused)}"}


def _slow_bodies(host: str, port: int, seconds: float) -> dict:
    """150 requests that declare 1 kB and send nothing; what they get back."""
    statuses: collections.Counter[str] = collections.Counter()
    sockets = []
    for _ in range(150):
        s = socket.create_connection((host, port), source_address=ATTACKER)
        s.sendall(
            f"POST /apps/{APP}/users/mallory/sessions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1024\r\n\r\n".encode()
        )
        sockets.append(s)
    ends = time.monotonic() + seconds
    for s in sockets:
        s.settimeout(max(0.1, ends - time.monotonic()))
        try:
            line = s.recv(64).split(b"\r\n")[0].decode()
            statuses[line.split(" ")[1] if " " in line else "closed"] += 1
        except OSError:
            statuses["held"] += 1
        s.close()
    return {"sent": 150, "got": dict(statuses)}


async def _agent_task(base: str, seconds: float) -> dict:
    """One task started on ``/ws`` (the agent answers it with its flood);
    what the task's cards said by the end of ``seconds``."""
    import websockets

    cards: list[dict[str, Any]] = []
    async with websockets.connect(
        f"{base}/ws", max_size=None, compression=None, local_addr=ATTACKER
    ) as ws:
        await ws.send(
            json.dumps(
                {"type": "start", "userKey": "mallory-key-0123456789ab", "turnDetection": "manual"}
            )
        )
        await ws.send(json.dumps({"type": "text", "text": "start a task to flood the server"}))
        ends = time.monotonic() + seconds
        with contextlib.suppress(asyncio.TimeoutError, websockets.ConnectionClosed):
            while (left := ends - time.monotonic()) > 0:
                message = await asyncio.wait_for(ws.recv(), left)
                if isinstance(message, str) and '"data-task"' in message:
                    cards.append(json.loads(message)["data"])
    last = cards[-1] if cards else {}
    outcome = last.get("error") or last.get("result") or last.get("state")
    return {"sent": 1, "got": f"{len(cards)} task cards; last: {outcome}"}


def attack(name: str, base: str, seconds: float, limit: int) -> dict:
    host, port_text = base.removeprefix("ws://").split(":")
    port = int(port_text)
    sessions = f"/apps/{APP}/users/mallory/sessions"
    if name in SOCKET_FLOODS:
        return asyncio.run(_socket_flood(base, SOCKET_FLOODS[name], seconds, limit))
    if name in AGENT_FLOODS:
        return asyncio.run(_agent_task(base, seconds))
    if name == "large frame":
        frame = '{"type":"text","text":"hi","pad":' + _tiny_objects(4 * 1024 * 1024 - 64) + "}"
        return asyncio.run(_socket_flood(base, [frame], seconds, limit))
    if name == "sockets":
        return asyncio.run(_sockets(base, seconds))
    if name == "slow bodies":
        return _slow_bodies(host, port, seconds)
    if name == "REST large read":
        return _repeat(seconds, 4, lambda: _request(host, port, "GET", f"{sessions}/large")[0])
    if name == "REST large create":
        counter = iter(range(1_000_000))

        def create() -> int:
            n = next(counter)
            body = json.dumps({"sessionId": f"c{n}", "events": _events(LARGE_EVENTS, f"c{n}-")})
            return _request(host, port, "POST", sessions, body.encode())[0]

        return _repeat(seconds, 1, create)
    if name == "large body":
        body = '{"sessionId":"x","state":{"pad":' + _tiny_objects(8 * 1024 * 1024 - 64) + "}}"
        return _repeat(seconds, 1, lambda: _request(host, port, "POST", sessions, body.encode())[0])
    if name == "chat images":
        image = "data:image/png;base64," + base64.b64encode(b"\x89PNG....").decode()
        parts = [{"type": "file", "mediaType": "image/png", "url": image}] * 20_000
        message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}, *parts]}
        counter = iter(range(1_000_000))

        def chat() -> int:
            body = json.dumps({"id": f"chat{next(counter)}", "messages": [message]})
            return _request(host, port, "POST", "/api/chat", body.encode())[0]

        return _repeat(seconds, 1, chat)
    if name == "API sessions":
        return _repeat(seconds, 2, lambda: _request(host, port, "POST", sessions, b"{}")[0])
    raise ValueError(name)


def prepare(name: str, base: str) -> None:
    """What a class needs stored before it starts."""
    if name == "REST large read":
        host, port = base.removeprefix("ws://").split(":")
        body = json.dumps({"sessionId": "large", "events": _events(LARGE_EVENTS, "e")})
        status, _ = _request(
            host, int(port), "POST", f"/apps/{APP}/users/mallory/sessions", body.encode()
        )
        assert status == 200, status


# ------------------------------------------------------------------ measures


def lag_buckets(base: str) -> dict[float, float] | None:
    """The server's loop-lag histogram (cumulative counts by upper bound)."""
    url = base.replace("ws://", "http://") + "/metrics"
    try:
        text = urllib.request.urlopen(url, timeout=30).read().decode()
    except (OSError, ValueError):
        return None
    buckets = {}
    for line in text.splitlines():
        if line.startswith("audiocore_event_loop_lag_seconds_bucket{"):
            bound = line.split('le="')[1].split('"')[0]
            buckets[float(bound)] = float(line.split()[-1])
    return buckets or None


def lag_over(before: dict[float, float] | None, after: dict[float, float] | None) -> str:
    """p99 and max of the lag between two scrapes, as bucket upper bounds."""
    if before is None or after is None:
        return "n/a"
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1]
    if total <= 0:
        return "n/a"
    p99 = next(b for b, c in zip(bounds, counts, strict=True) if c >= 0.99 * total)
    worst = next(b for b, c in zip(bounds, counts, strict=True) if c >= total)

    def ms(bound: float) -> str:
        return "> 2500" if bound == float("inf") else f"≤ {1e3 * bound:g}"

    return f"{ms(p99)} / {ms(worst)} ({int(total)} samples)"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


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


async def one_class(name: str, url: str, pid: int, args, speech, pool) -> dict:
    base = url.removesuffix("/ws")
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(pool, prepare, name, base)
    stop = asyncio.Event()
    prober = asyncio.create_task(probe(base, stop))
    sessions = [
        asyncio.create_task(our_session(url, speech, args.turns)) for _ in range(args.sessions)
    ]
    await asyncio.sleep(1.0)  # the sessions are streaming
    seconds = args.flood_s + (12.0 if name == "slow bodies" else 0.0)  # past the body timeout
    lag_before = await loop.run_in_executor(None, lag_buckets, base)
    before = peak = rss_mb(pid)
    attacker = loop.run_in_executor(pool, attack, name, base, seconds, args.max_messages)
    while not attacker.done():
        peak = max(peak, rss_mb(pid))
        await asyncio.sleep(0.1)
    got = attacker.result()
    lag_after = await loop.run_in_executor(None, lag_buckets, base)
    finished = await asyncio.gather(*sessions, return_exceptions=True)
    # A session the server stalled past its 30 s bound: counted, not fatal.
    failed = [f for f in finished if isinstance(f, BaseException)]
    results = [turn for s in finished if not isinstance(s, BaseException) for turn in s]
    await asyncio.sleep(1.0)  # the attacker has gone: what stays?
    after = rss_mb(pid)
    stop.set()
    trips = await prober
    return {
        "server_lag": lag_over(lag_before, lag_after),
        "rss_peak_mb": peak - before,
        "rss_after_mb": after - before,
        "trip_p99_ms": 1e3 * percentile(trips, 99),
        "trip_max_ms": 1e3 * max(trips),
        "late": sum(r.late_frames for r in results),
        "frames": sum(r.frames for r in results),
        "lost": sum(r.expected - r.samples for r in results),
        **got,
        "got": got["got"]
        + (f"; {len(failed)} innocent sessions failed ({failed[0]})" if failed else ""),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default=",".join(CLASSES))
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--flood-s", type=float, default=5.0)
    parser.add_argument("--max-messages", type=int, default=10_000_000)
    args = parser.parse_args()
    names = [c.strip() for c in args.classes.split(",") if c.strip()]
    unknown = set(names) - set(CLASSES)
    if unknown:
        parser.error(f"--classes: unknown {sorted(unknown)}; expected some of {CLASSES}")
    speech = speech_48k()
    print(
        f"{args.sessions} innocent sessions x {args.turns} turns; one attacker, "
        f"{args.flood_s:g} s (slow bodies: +12 s) or {args.max_messages} messages"
    )
    print(
        "| class | RSS peak / after, MB | server loop lag p99 / max, ms "
        "| ping round trip p99 / max, ms | innocent late / frames | lost "
        "| attacker sent | attacker got |"
    )
    print("|---|---|---|---|---|---|---|---|")
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        for name in names:
            stats = Path(tempfile.mkdtemp()) / "stats.json"
            # The server's own cap of sockets per address (the other
            # benchmarks raise it: all their sessions come from 127.0.0.1).
            env = {"AUDIOCORE_MAX_CONNECTIONS_PER_CLIENT": "50"}
            if name in AGENT_FLOODS:
                env |= {
                    "AUDIOCORE_TASK_BACKEND": "acp",
                    "AUDIOCORE_ACP_COMMAND": shlex.join(
                        [sys.executable, str(RAW_AGENT), *AGENT_FLOODS[name]]
                    ),
                }
            try:
                with our_server(stats, **env) as (url, proc):
                    r = asyncio.run(one_class(name, url, proc.pid, args, speech, pool))
                    print(
                        f"| {name} | {r['rss_peak_mb']:+.1f} / {r['rss_after_mb']:+.1f} "
                        f"| {r['server_lag']} | {r['trip_p99_ms']:.1f} / {r['trip_max_ms']:.1f} "
                        f"| {r['late']} / {r['frames']} | {r['lost']} | {r['sent']} "
                        f"| {r['got']} |",
                        flush=True,
                    )
            except subprocess.TimeoutExpired:  # a server stalled past its stop
                proc.kill()
                proc.wait()
                print(f"({name}: the server did not stop within 30 s of SIGINT: killed)")


if __name__ == "__main__":
    main()
