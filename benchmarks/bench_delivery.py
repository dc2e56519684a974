"""When a background task's outcome is told: on a free line, and how long
delivery waits in each case where it must not speak.

One real server (``python -m server``, offline model, uvicorn on
127.0.0.1) and one client per scenario over ``/ws``. The offline backend
model does each task step in ``--work`` seconds; the live model tells an
outcome as "Your background task <id> <state>: …" with a second of audio.
Times are arrivals at the client (``time.monotonic``):

* completed: the ``data-task`` chunk whose state is ``completed``;
* told: the first ``text-delta`` of the answer that tells the outcome;
* delivered: the ``data-task`` chunk whose delivery is ``delivered``,
  sent once that answer has played;
* released: when the client ended what blocked delivery (sent
  ``activity_end``, the approval, the reconnect's ``start``), or when the
  blocking answer's ``finish`` arrived.

    python benchmarks/bench_delivery.py --repeat 5

Prints one Markdown table of medians (and min–max) over the repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from bench_server_client import our_server
from websockets.sync.client import ClientConnection, connect

HOLD = 1.0  # how long a blocking case lasts after the task has completed, s
SUM = "start a task to sum the amount column of sales.csv"
Message = dict[str, Any]


class Reader:
    """One socket; every text message kept with its arrival time."""

    def __init__(self, url: str, user_key: str) -> None:
        self.ws: ClientConnection = connect(url, max_size=None)
        self.seen: list[tuple[float, Message]] = []
        self.send({"type": "start", "userKey": user_key, "turnDetection": "manual"})
        self.start_sent = time.monotonic()
        self.until(lambda m: m["type"] == "data-session")

    def send(self, message: Message) -> None:
        self.ws.send(json.dumps(message))

    def until(self, predicate: Callable[[Message], bool]) -> float:
        """Reads until a message matches; returns its arrival time."""
        while True:
            frame = self.ws.recv(timeout=60)
            if isinstance(frame, bytes):
                continue
            message = json.loads(frame)
            now = time.monotonic()
            self.seen.append((now, message))
            if predicate(message):
                return now

    def first(self, predicate: Callable[[Message], bool]) -> float:
        for at, message in self.seen:
            if predicate(message):
                return at
        return self.until(predicate)

    def start_task(self, text: str = SUM) -> str:
        self.send({"type": "text", "text": text})
        self.until(lambda m: m["type"] == "tool-output-available" and "taskId" in m["output"])
        output = self.seen[-1][1]["output"]
        return str(output["taskId"])

    def close(self) -> None:
        self.ws.close()


def task_state(task_id: str, state: str) -> Callable[[Message], bool]:
    return lambda m: m["type"] == "data-task" and m["id"] == task_id and m["data"]["state"] == state


def delivered(task_id: str) -> Callable[[Message], bool]:
    return lambda m: (
        m["type"] == "data-task" and m["id"] == task_id and m["data"]["delivery"] == "delivered"
    )


def told(task_id: str) -> Callable[[Message], bool]:
    return lambda m: (
        m["type"] == "text-delta" and m["delta"].startswith(f"Your background task {task_id}")
    )


def tone(seconds: float, rate: int = 16_000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return np.rint(0.3 * 32767 * np.sin(2 * np.pi * 300 * t)).astype("<i2").tobytes()


def line_free(url: str, key: str, work: float) -> dict[str, float]:
    r = Reader(url, key)
    task_id = r.start_task()
    completed = r.first(task_state(task_id, "completed"))
    said = r.until(told(task_id))
    done = r.until(delivered(task_id))
    r.close()
    return {"completed → told": said - completed, "completed → delivered": done - completed}


def user_speaking(url: str, key: str, work: float) -> dict[str, float]:
    r = Reader(url, key)
    r.send({"type": "activity_start"})  # push-to-talk held
    task_id = r.start_task()
    completed = r.first(task_state(task_id, "completed"))
    time.sleep(HOLD)  # the user goes on talking
    r.send({"type": "activity_end"})
    released = time.monotonic()
    said = r.until(told(task_id))
    r.until(delivered(task_id))
    r.close()
    assert said > released
    return {"completed → told": said - completed, "released → told": said - released}


def answer_playing(url: str, key: str, work: float) -> dict[str, float]:
    r = Reader(url, key)
    r.send({"type": "activity_start"})
    r.ws.send(tone(2.0))  # within the queue to the model (about 2 s of audio)
    task_id = r.start_task()
    r.send({"type": "activity_end"})  # a 2 s echo plays; the task completes meanwhile
    turn_ended = time.monotonic()
    r.until(lambda m: m["type"] == "data-transcript")
    echo_finished = r.until(lambda m: m["type"] == "finish")
    said = r.until(told(task_id))
    r.until(delivered(task_id))
    r.close()
    # The card is sent in order behind the echo's audio, so it arrives with
    # or just after the echo's last chunk: the wait is counted from the end
    # of the user's turn, when the task (one 0.2 s step) was nearly done.
    assert echo_finished <= said
    return {
        "user's turn ended → told": said - turn_ended,
        "answer finished → told": said - echo_finished,
    }


def barge_in(url: str, key: str, work: float) -> dict[str, float]:
    r = Reader(url, key)
    task_id = r.start_task()
    r.until(told(task_id))
    r.send({"type": "activity_start"})  # the user speaks over the answer that tells it
    interrupted = time.monotonic()
    r.until(lambda m: m["type"] == "data-interrupted")
    time.sleep(HOLD)
    r.send({"type": "activity_end"})
    released = time.monotonic()
    again = r.until(told(task_id))
    r.until(delivered(task_id))
    r.close()
    return {"barge-in → told again": again - interrupted, "released → told again": again - released}


def approval_open(url: str, key: str, work: float) -> dict[str, float]:
    r = Reader(url, key)
    # A task that takes 2 s, so the approval is open before it completes.
    task_id = r.start_task("start a task to wait 2 seconds")
    r.until(lambda m: m["type"] == "finish")
    r.send({"type": "text", "text": "pay 5 EUR to Alice"})
    r.until(lambda m: m["type"] == "tool-approval-request")
    approval = r.seen[-1][1]
    assert not any(task_state(task_id, "completed")(m) for _, m in r.seen)
    completed = r.until(task_state(task_id, "completed"))
    time.sleep(HOLD)  # the user thinks it over
    r.send({"type": "tool_approval", "approvalId": approval["approvalId"], "approved": True})
    answered = time.monotonic()
    r.until(lambda m: m["type"] == "finish")  # the payment's answer
    payment_finished = r.seen[-1][0]
    said = r.until(told(task_id))
    r.until(delivered(task_id))
    r.close()
    return {
        "completed → told": said - completed,
        "approved → told": said - answered,
        "payment answer finished → told": said - payment_finished,
    }


def disconnected(url: str, key: str, work: float) -> dict[str, float]:
    r = Reader(url, key)
    r.send({"type": "activity_start"})  # the line stays busy, so nothing is told
    task_id = r.start_task()
    r.first(task_state(task_id, "completed"))
    r.close()
    again = Reader(url, key)
    said = again.until(told(task_id))
    again.until(delivered(task_id))
    again.close()
    return {"reconnect start → told": said - again.start_sent}


SCENARIOS = {
    "line free": line_free,
    "user speaking (push-to-talk held)": user_speaking,
    "an answer playing (2 s echo)": answer_playing,
    "barge-in over the telling (speech)": barge_in,
    "a tool approval open": approval_open,
    "disconnected, then a new connection": disconnected,
}


@contextmanager
def server(work: float) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        stats = Path(folder) / "stats.json"
        env = {"AUDIOCORE_TASK_OFFLINE_DELAY_S": str(work), "AUDIOCORE_PUSH_TO_TALK": "1"}
        with our_server(stats, **env) as (url, _proc):
            yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", type=float, default=0.2, help="offline backend step, s")
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {}
    with server(args.work) as url:
        for n in range(args.repeat):
            for k, (name, scenario) in enumerate(SCENARIOS.items()):
                key = f"bench-delivery-{n:04d}-{k:02d}"
                for label, seconds in scenario(url, key, args.work).items():
                    results.setdefault(name, {}).setdefault(label, []).append(seconds)
    print(f"repeats: {args.repeat}, backend step {args.work} s, load {load()}")
    print("| case | interval | median ms | min–max ms |")
    print("|---|---|---|---|")
    for name, intervals in results.items():
        for label, values in intervals.items():
            ms = [1000 * v for v in values]
            print(
                f"| {name} | {label} | {statistics.median(ms):.0f} | {min(ms):.0f}–{max(ms):.0f} |"
            )


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


if __name__ == "__main__":
    main()
