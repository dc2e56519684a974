"""Hostile ACP agents' floods in one process: the loop's lag and memory.

    python benchmarks/bench_acp_floods.py
    python benchmarks/bench_acp_floods.py --tree /tmp/before   # another checkout's server
    python benchmarks/bench_acp_floods.py --smoke              # smaller floods: it runs

For each flood, the task manager on the ACP backend (``running()`` of
``tests/server/test_tasks.py``, a real SQLite ledger) runs one task on
``tests/server/acp_raw_agent.py`` (always this checkout's), which answers
it with the flood: 1,000,000 short stderr lines, 100,000 progress updates,
400 MiB on stdout without a newline. Meanwhile a 10 ms timer in the same
loop measures how late it wakes (the lag), and this process's RSS is read
at each wake; over the flood, at most ``--seconds``. It reports the lag's
p50 / p99 / max, the RSS growth at its peak, the task's state, and how many
times its card changed. ``bench_hostile.py``'s agent classes measure the
same floods against a whole server with innocent sessions streaming.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RAW_AGENT = REPO / "tests" / "server" / "acp_raw_agent.py"
FLOODS = [("stderr-flood", "1000000"), ("progress-flood", "100000"), ("endless-line", "400")]
# Smaller floods that still cross every bound (the endless line passes the
# 32 MiB that stops the agent): that it runs, in tests/test_benchmarks.py.
SMOKE_FLOODS = [("stderr-flood", "20000"), ("progress-flood", "2000"), ("endless-line", "40")]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def one(flood: str, size: str, seconds: float) -> str:
    from test_tasks import running

    from audiocore_server import Settings  # the tree's, as sys.path says

    command = shlex.join([sys.executable, str(RAW_AGENT), flood, size])
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp()) / "data",
        model="offline",
        task_backend="acp",
        acp_command=command,
        acp_prompt_timeout_s=120.0,
    )
    lags: list[float] = []
    cards: list[object] = []
    async with running(settings) as manager:
        manager.subscribe("alice", cards.append)
        base = peak = rss_mb()
        started = time.perf_counter()
        record = await manager.submit("alice", "flood")
        state = "?"
        while time.perf_counter() - started < seconds:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - before - 0.01)
            peak = max(peak, rss_mb())
            found = (await manager.store.read("alice")).get(record.id)
            state = found.state if found is not None else "?"
            if found is not None and found.final:
                break
        took = time.perf_counter() - started
    lags.sort()
    ms = [1e3 * lags[len(lags) // 2], 1e3 * lags[int(len(lags) * 0.99)], 1e3 * lags[-1]]
    return (
        f"| {flood} {size} | {ms[0]:.1f} / {ms[1]:.1f} / {ms[2]:.1f} ({len(lags)} samples) "
        f"| {peak - base:+.0f} | {state} after {took:.1f} s | {len(cards)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose server runs")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--smoke", action="store_true", help="smaller floods: that it runs")
    args = parser.parse_args()
    sys.path[:0] = [str(args.tree), str(args.tree / "tests" / "server")]
    os.chdir(args.tree)
    print(f"server of {args.tree}; load average {os.getloadavg()[0]:.1f}")
    print("| flood | timer lag p50 / p99 / max, ms | RSS peak, MB | task | card changes |")
    print("|---|---|---|---|---|")
    for flood, size in SMOKE_FLOODS if args.smoke else FLOODS:
        print(asyncio.run(one(flood, size, args.seconds)), flush=True)


if __name__ == "__main__":
    main()
