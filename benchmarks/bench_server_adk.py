"""Our /ws against ADK's own ``adk api_server`` ``/run_live``, same offline model.

    python benchmarks/bench_server_adk.py                 # N = 1, 10, 50
    python benchmarks/bench_server_adk.py --sessions 1,10 --turns 2

The same push-to-talk turns of espeak-ng speech go to both servers, each in
its native protocol, from the same client code:

* ours: binary frames of 48 kHz float32 (what a browser captures; the server
  resamples), echo back as binary 24 kHz PCM16, paced to real time;
* ADK's: JSON ``LiveRequest``s with base64 16 kHz PCM16 (the client has to
  resample; done before the timed part), echo back as ``Event`` JSON with
  URL-safe base64 audio, sent as fast as the model produces it.

Per server and N: server CPU, first-audio latency (activity_end sent → first
audio received), lost samples (the echo is exact), bytes on the wire per
second of input, and late frames for a listener with a 100 ms prebuffer.
Both servers run the identical ``OfflineLiveModel`` and agent.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
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
from pathlib import Path

from bench_server_client import (
    FRAME_S,
    IN_RATE,
    REPO,
    cpu_seconds,
    free_port,
    our_server,
    our_session,
    percentile,
    push_to_talk_turns,
    speech_48k,
    wait_http,
)

AGENT_PY = """
from google.adk.agents import Agent
from server.agent import get_current_time
from server.offline_model import OfflineLiveModel

root_agent = Agent(
    name="voice_agent", model=OfflineLiveModel(), instruction="Answer briefly.",
    tools=[get_current_time],
)
"""


def adk_server(agents: Path):
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "google.adk.cli",
            "api_server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log_level",
            "warning",
            str(agents),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_http(f"http://127.0.0.1:{port}/list-apps")
    return port, proc


def create_session(port: int, user: str, session: str) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/apps/offline_agent/users/{user}/sessions",
        data=json.dumps({"sessionId": session, "state": {}}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(request).read()


async def adk_session(port: int, k: int, speech16: bytes, turns: int, counter: dict):
    import websockets

    user, session = f"u{k}", f"s{k}-{uuid.uuid4().hex}"
    await asyncio.to_thread(create_session, port, user, session)
    step = int(16000 * FRAME_S) * 2
    frames = [
        json.dumps(
            {
                "blob": {
                    "mime_type": "audio/pcm;rate=16000",
                    "data": base64.b64encode(speech16[i : i + step]).decode(),
                }
            }
        )
        for i in range(0, len(speech16), step)
    ]
    quiet = json.dumps(
        {
            "blob": {
                "mime_type": "audio/pcm;rate=16000",
                "data": base64.b64encode(bytes(step)).decode(),
            }
        }
    )
    gap = int((len(speech16) / 32000 + 0.6) / FRAME_S)
    url = (
        f"ws://127.0.0.1:{port}/run_live?app_name=offline_agent&user_id={user}"
        f"&session_id={session}&modalities=AUDIO"
    )
    async with websockets.connect(url, max_size=None, compression=None) as ws:
        arrivals: list[tuple[float, int]] = []
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
                if event.get("turnComplete"):
                    finished.put_nowait(time.monotonic())

        reader = asyncio.create_task(receive())
        results = await push_to_talk_turns(
            send,
            arrivals,
            finished,
            turns=turns,
            frames=frames,
            quiet=quiet,
            gap=gap,
            edges=('{"activity_start": {}}', '{"activity_end": {}}'),
            expected=len(speech16) // 2 * 3 // 2,
            prebuffer_s=0.1,
        )
        reader.cancel()
    return results


def summarise(name, n, sessions, cpu, wall, up=None, down=None, seconds=None) -> str:
    turns = [t for s in sessions for t in s]
    first = [t.first_audio_s * 1000 for t in turns]
    wire = (
        f"{up / seconds / 1000:7.1f}/{down / seconds / 1000:<7.1f}" if up else f"{'-':>7}/{'-':<7}"
    )
    return (
        f"{name:<6} {n:>4} {100 * cpu / wall:>6.1f} {percentile(first, 50):>8.1f}/"
        f"{percentile(first, 99):<8.1f} {sum(t.expected - t.samples for t in turns):>6} "
        f"{sum(t.late_frames for t in turns):>5}/{sum(t.frames for t in turns):<6} {wire}"
    )


async def _ours(url, speech, n, turns, counter):
    async def one(k):
        await asyncio.sleep(k / max(1, n))
        return await our_session(url, speech, turns, counter=counter)

    return await asyncio.gather(*(one(k) for k in range(n)))


async def _adk(port, speech16, n, turns, counter):
    async def one(k):
        await asyncio.sleep(k / max(1, n))
        return await adk_session(port, k, speech16, turns, counter)

    return await asyncio.gather(*(one(k) for k in range(n)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", default="1,10,50")
    parser.add_argument("--turns", type=int, default=2)
    args = parser.parse_args()
    import audiocore

    speech = speech_48k()
    speech16 = audiocore.resample(speech, IN_RATE, 16000, input="f32", output="s16")
    agents = Path(tempfile.mkdtemp())
    (agents / "offline_agent").mkdir()
    (agents / "offline_agent" / "__init__.py").write_text("from . import agent\n")
    (agents / "offline_agent" / "agent.py").write_text(AGENT_PY)
    print(
        f"{'server':<6} {'N':>4} {'cpu%':>6} {'first audio p50/p99 ms':>17} {'lost':>6} "
        f"{'late/frames':>12} {'wire kB/s up/down per session':>30}"
    )
    try:
        for n in (int(v) for v in args.sessions.split(",")):
            stats = Path(tempfile.mkdtemp()) / "stats.json"
            with our_server(stats) as (url, proc):
                counter = {"up": 0, "down": 0}
                c0, t0 = cpu_seconds(proc.pid), time.monotonic()
                ours = asyncio.run(_ours(url, speech, n, args.turns, counter))
                c1, t1 = cpu_seconds(proc.pid), time.monotonic()
            print(
                summarise(
                    "ours",
                    n,
                    ours,
                    c1 - c0,
                    t1 - t0,
                    counter["up"] / n,
                    counter["down"] / n,
                    t1 - t0,
                ),
                flush=True,
            )
            port, proc = adk_server(agents)
            try:
                counter = {"up": 0, "down": 0}
                c0, t0 = cpu_seconds(proc.pid), time.monotonic()
                theirs = asyncio.run(_adk(port, speech16, n, args.turns, counter))
                c1, t1 = cpu_seconds(proc.pid), time.monotonic()
            finally:
                proc.send_signal(signal.SIGINT)
                proc.wait(30)
            print(
                summarise(
                    "adk",
                    n,
                    theirs,
                    c1 - c0,
                    t1 - t0,
                    counter["up"] / n,
                    counter["down"] / n,
                    t1 - t0,
                ),
                flush=True,
            )
    finally:
        shutil.rmtree(agents, ignore_errors=True)


if __name__ == "__main__":
    main()
