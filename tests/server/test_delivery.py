"""Background tasks in a live conversation: the outcome is told at a safe
moment, exactly once (audiocore_server/live/outcomes.py over audiocore_server/tasks/).

Real app, runner, SQLite session store and offline models: the live model
starts tasks on cues, the offline backend does the work, and the live model
reads a handed-over outcome out as "Your background task <id> <state>: …"
with a second of audio. Every wait is on a message or on a task record
changing, never a sleep.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from server_helpers import receive_until, start
from starlette.testclient import TestClient

from audiocore_server import Settings, create_app
from audiocore_server.tasks import TaskRecord

KEY = "delivery-test-user-key-0001"
SUM = "sum the amount column of sales.csv"
OWNER = f"key:{KEY}"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        model="offline",
        task_offline_delay_s=0.0,
        hello_timeout_s=0.5,
        allowed_hosts=("testserver",),
    )


class Reader:
    """Reads a socket, keeping every message with the time it came."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.seen: list[tuple[float, dict[str, Any]]] = []

    def until(self, predicate: Any, limit: int = 5000) -> dict[str, Any]:
        for _ in range(limit):
            message = self.ws.receive_json()
            self.seen.append((time.monotonic(), message))
            if predicate(message):
                return message
        raise AssertionError(f"not within {limit} messages: {self.kinds()[-30:]}")

    def first(self, predicate: Any) -> dict[str, Any]:
        """The first message (already read, or still to come) that matches."""
        for _, message in self.seen:
            if predicate(message):
                return message
        return self.until(predicate)

    def kinds(self) -> list[str]:
        return [m["type"] for _, m in self.seen]

    def index(self, predicate: Any) -> int:
        return next(i for i, (_, m) in enumerate(self.seen) if predicate(m))

    def deliveries(self, task_id: str | None = None) -> list[int]:
        """Where a task's outcome was read out (the answer's text-delta)."""
        prefix = "Your background task" + (f" {task_id}" if task_id else "")
        return [
            i
            for i, (_, m) in enumerate(self.seen)
            if m["type"] == "text-delta" and m["delta"].startswith(prefix)
        ]


def is_task(task_id: str | None, *states: str) -> Any:
    return lambda m: (
        m["type"] == "data-task"
        and (task_id is None or m["id"] == task_id)
        and m["data"]["state"] in states
    )


def is_delivery(task_id: str) -> Any:
    return lambda m: (
        m["type"] == "text-delta" and m["delta"].startswith(f"Your background task {task_id}")
    )


def start_task(reader: Reader, objective: str) -> str:
    reader.ws.send_text(json.dumps({"type": "text", "text": f"start a task to {objective}"}))
    output = reader.until(
        lambda m: m["type"] == "tool-output-available" and "taskId" in m.get("output", {})
    )
    reader.until(lambda m: m["type"] == "finish")
    return str(output["output"]["taskId"])


def record(client: TestClient, task_id: str) -> TaskRecord:
    tasks = client.app.state.runtime.tasks  # type: ignore[attr-defined]
    found = client.portal.call(tasks.status, OWNER, task_id)  # type: ignore[union-attr]
    assert found is not None
    return found  # type: ignore[no-any-return]


def wait_delivered(client: TestClient, task_id: str) -> TaskRecord:
    """Until the record says delivered (the answer has played)."""
    tasks = client.app.state.runtime.tasks  # type: ignore[attr-defined]

    async def settled() -> TaskRecord:
        import anyio

        changed = anyio.Event()

        def seen(rec: TaskRecord) -> None:
            if rec.id == task_id:
                changed.set()

        unsubscribe = tasks.subscribe(OWNER, seen)
        try:
            with anyio.fail_after(30):
                while True:
                    current = await tasks.status(OWNER, task_id)
                    if current.delivery in ("delivered", "failed"):
                        return current  # type: ignore[no-any-return]
                    await changed.wait()
                    changed = anyio.Event()
        finally:
            unsubscribe()

    return client.portal.call(settled)  # type: ignore[union-attr,no-any-return]


def tone(seconds: float, rate: int = 16_000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return np.rint(0.3 * 32767 * np.sin(2 * np.pi * 300 * t)).astype("<i2").tobytes()


def test_outcome_told_once_when_the_line_is_free(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        start(ws, userKey=KEY)
        reader = Reader(ws)
        task_id = start_task(reader, SUM)
        reader.first(is_task(task_id, "completed"))
        reader.until(is_delivery(task_id))
        reader.until(lambda m: m["type"] == "finish")
        done = wait_delivered(client, task_id)
        assert done.delivery == "delivered" and done.state == "completed"
        completed_at = reader.seen[reader.index(is_task(task_id, "completed"))][0]
        told_at = reader.seen[reader.deliveries(task_id)[0]][0]
        print(f"completed -> told: {1000 * (told_at - completed_at):.0f} ms (line free)")
        # The answer carries the computed result.
        said = reader.seen[reader.deliveries(task_id)[0]][1]["delta"]
        assert task_id in said and "completed" in said
        # Never twice: the next turn is the user's own.
        ws.send_text(json.dumps({"type": "text", "text": "anything else"}))
        reader.until(lambda m: m["type"] == "text-delta" and "anything else" in m["delta"])
        assert len(reader.deliveries()) == 1


def test_delivery_waits_while_the_user_speaks(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        start(ws, userKey=KEY)
        reader = Reader(ws)
        ws.send_text(json.dumps({"type": "activity_start"}))  # push-to-talk held
        task_id = start_task(reader, SUM)
        reader.first(is_task(task_id, "completed"))
        assert reader.deliveries() == []
        ws.send_text(json.dumps({"type": "activity_end"}))
        reader.until(is_delivery(task_id))
        completed = reader.index(is_task(task_id, "completed"))
        assert reader.deliveries(task_id)[0] > completed
        assert wait_delivered(client, task_id).delivery == "delivered"


def test_delivery_waits_until_an_answer_has_played(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        start(ws, userKey=KEY)
        reader = Reader(ws)
        ws.send_text(json.dumps({"type": "activity_start"}))
        ws.send_bytes(tone(3.0))
        # The task is started while the user holds the line; released, the
        # 3 s echo plays, and the task (no work time) completes meanwhile.
        task_id = start_task(reader, SUM)
        ws.send_text(json.dumps({"type": "activity_end"}))
        reader.until(lambda m: m["type"] == "data-transcript")
        reader.until(is_delivery(task_id))
        transcript = reader.index(lambda m: m["type"] == "data-transcript")
        finishes = [
            i for i, (_, m) in enumerate(reader.seen) if m["type"] == "finish" and i > transcript
        ]
        completed = reader.index(is_task(task_id, "completed"))
        told = reader.deliveries(task_id)[0]
        assert completed < finishes[0] < told  # completed during the echo, told after it


def test_a_barge_in_postpones_the_delivery_and_it_is_told_again(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        start(ws, userKey=KEY)
        reader = Reader(ws)
        task_id = start_task(reader, SUM)
        reader.until(is_delivery(task_id))
        ws.send_text(json.dumps({"type": "interrupt"}))  # over the second of audio
        reader.until(lambda m: m["type"] == "data-interrupted")
        reader.until(is_delivery(task_id))  # told again
        done = wait_delivered(client, task_id)
        assert done.delivery == "delivered"
        assert len(reader.deliveries(task_id)) == 2


def test_disconnected_before_delivery_then_told_on_the_next_connection(
    settings: Settings,
) -> None:
    with TestClient(create_app(settings)) as client:
        with client.websocket_connect("/ws") as ws:
            start(ws, userKey=KEY)
            reader = Reader(ws)
            ws.send_text(json.dumps({"type": "activity_start"}))  # the line stays busy
            task_id = start_task(reader, SUM)
            reader.first(is_task(task_id, "completed"))
        assert record(client, task_id).delivery == "pending"
        with client.websocket_connect("/ws") as ws:  # a new session, the same user
            start(ws, userKey=KEY)
            reader = Reader(ws)
            reader.until(is_delivery(task_id))
            assert wait_delivered(client, task_id).delivery == "delivered"


def test_after_a_restart_the_running_task_fails_and_the_completed_one_is_told_once(
    settings: Settings,
) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        start(ws, userKey=KEY)
        reader = Reader(ws)
        ws.send_text(json.dumps({"type": "activity_start"}))  # nothing is told now
        done_id = start_task(reader, SUM)
        reader.first(is_task(done_id, "completed"))
        long_id = start_task(reader, "wait 120 seconds")
        reader.first(is_task(long_id, "running"))
    # The server stops and starts again on the same data directory.
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        start(ws, userKey=KEY)
        reader = Reader(ws)
        failed = record(client, long_id)
        assert failed.state == "failed" and "server" in (failed.error or "")
        reader.until(is_delivery(done_id))
        reader.until(is_delivery(long_id))  # the failure is told too
        assert wait_delivered(client, done_id).delivery == "delivered"
        assert wait_delivered(client, long_id).delivery == "delivered"
        assert len(reader.deliveries(done_id)) == 1 and len(reader.deliveries(long_id)) == 1


def test_two_connections_of_one_user_present_it_once(settings: Settings) -> None:
    with (
        TestClient(create_app(settings)) as client,
        client.websocket_connect("/ws") as one,
        client.websocket_connect("/ws") as two,
    ):
        start(one, userKey=KEY)
        start(two, userKey=KEY)
        first, second = Reader(one), Reader(two)
        task_id = start_task(first, SUM)
        assert wait_delivered(client, task_id).delivery == "delivered"
        # Both saw the card; afterwards each reads on to its own next answer.
        for reader, ws in ((first, one), (second, two)):
            ws.send_text(json.dumps({"type": "text", "text": "next"}))
            reader.until(lambda m: m["type"] == "text-delta" and "next" in m["delta"])
        assert len(first.deliveries(task_id)) + len(second.deliveries(task_id)) == 1


def test_the_conversation_goes_on_while_tasks_run_and_queue(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        start(ws, userKey=KEY)
        reader = Reader(ws)
        ids = [start_task(reader, "wait 120 seconds") for _ in range(3)]
        reader.first(is_task(ids[0], "running"))
        states = {r.id: r.state for r in [record(client, i) for i in ids]}
        assert states == {ids[0]: "running", ids[1]: "queued", ids[2]: "queued"}
        # A spoken turn is answered meanwhile.
        ws.send_text(json.dumps({"type": "activity_start"}))
        ws.send_bytes(tone(0.5))
        ws.send_text(json.dumps({"type": "activity_end"}))
        transcript = reader.until(lambda m: m["type"] == "data-transcript")
        assert "8000 samples" in transcript["data"]["text"]
        reader.until(lambda m: m["type"] == "finish")
        # The page's cancel button: confirmed by the card.
        ws.send_text(json.dumps({"type": "task_cancel", "taskId": ids[0]}))
        reader.first(is_task(ids[0], "cancelled"))
        ws.send_text(json.dumps({"type": "task_cancel", "taskId": "task_nope"}))
        assert "no task" in reader.until(lambda m: m["type"] == "error")["errorText"]


def test_a_user_key_must_be_a_random_key(settings: Settings) -> None:
    with TestClient(create_app(replace(settings))) as client, client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "start", "userKey": "short"}))
        messages = receive_until(ws, "error")
        assert "userKey" in messages[-1]["errorText"]
