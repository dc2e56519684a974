"""From an ACP agent's final answer to the user hearing it.

One real server (``python -m server``, offline live model, uvicorn on
127.0.0.1) with ``--task-backend acp`` on the tests' ACP agent
(``tests/server/acp_agent.py``, a real process on the package's agent
side), and one client over ``/ws`` that starts tasks one after another and
listens. The agent writes the ``time.monotonic()`` at which each answer
left it (``--times``); the client stamps arrivals with the same clock (one
machine):

* answered: the agent sent its ``session/prompt`` response;
* completed: the ``data-task`` card whose state is ``completed`` arrived;
* told: the first ``text-delta`` of the answer that tells the outcome;
* heard: the first audio of that answer (``data-pcm``), when the user
  starts hearing it.

Each task starts once the previous answer has played (its card says
``delivered``), and the agent works ``--work`` seconds on it, longer than
the answer "task started" plays: the line is free when the agent's answer
comes, so the figures are the path's own, not a wait behind audio (which
``bench_delivery.py`` measures).

    python benchmarks/bench_acp.py --tasks 10

Prints one Markdown table of medians (and min–max) over the tasks.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

from bench_delivery import Reader, delivered, load, task_state, told
from bench_server_client import REPO, our_server

AGENT = REPO / "tests" / "server" / "acp_agent.py"


def measure(url: str, times: Path, tasks: int, work: float) -> dict[str, list[float]]:
    r = Reader(url, "bench-acp-key-0000000000")
    results: dict[str, list[float]] = {}
    for n in range(tasks):
        objective = f"tidy note {n} and work {work:g} seconds"
        task_id = r.start_task(f"start a task to {objective}")
        completed = r.first(task_state(task_id, "completed"))
        said = r.until(told(task_id))
        heard = r.until(lambda m: m["type"] == "data-pcm")
        # Played to the end before the next task: a free line for each.
        r.until(delivered(task_id))
        answered = next(
            line["at"]
            for line in map(json.loads, times.read_text().splitlines())
            if line["objective"] == objective
        )
        for label, seconds in (
            ("answered → completed card", completed - answered),
            ("answered → told (first words)", said - answered),
            ("answered → heard (first audio)", heard - answered),
        ):
            results.setdefault(label, []).append(seconds)
    r.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument(
        "--work",
        type=float,
        default=0.5,
        help="seconds the agent works on each task (0: it answers while the answer "
        "that started it still plays, and the outcome waits for that)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        times = Path(folder) / "times.jsonl"
        command = shlex.join([sys.executable, str(AGENT), "--times", str(times)])
        env = {
            "AUDIOCORE_TASK_BACKEND": "acp",
            "AUDIOCORE_ACP_COMMAND": command,
            "AUDIOCORE_PUSH_TO_TALK": "1",
        }
        with our_server(Path(folder) / "stats.json", **env) as (url, _proc):
            results = measure(url, times, args.tasks, args.work)
    print(f"tasks: {args.tasks}, agent work {args.work:g} s, load {load()}")
    print("| interval | median ms | min–max ms |")
    print("|---|---|---|")
    for label, values in results.items():
        ms = [1000 * v for v in values]
        print(f"| {label} | {statistics.median(ms):.1f} | {min(ms):.1f}–{max(ms):.1f} |")


if __name__ == "__main__":
    main()
