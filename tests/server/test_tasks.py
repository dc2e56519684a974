"""Background tasks: the engine (queues, backend runs, records, delivery) and
the live tools.

Real parts throughout: ADK's runner and its ``run_async``/``run_live``, the
session store on a real SQLite file (the server's own), the offline backend
model doing real work with its tools, the offline live model calling the
task tools. Tests wait on the manager's change notifications (``until``),
never on time; every wait is bounded. A task that must stay running while
something else happens waits on a 120 s timer that the test always cancels
or closes long before.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import dataclasses
import json
import re
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from google.adk.events import Event
from google.genai import types
from postgres_helpers import postgres_url  # noqa: F401 (a fixture)
from server_helpers import receive_until, start
from starlette.testclient import TestClient

from audiocore_server import Settings, create_app
from audiocore_server.agent.definition import build_task_model
from audiocore_server.gate.owners import session_owner
from audiocore_server.live.outcomes import TaskDelivery
from audiocore_server.offline.model import _answer_text
from audiocore_server.offline.task_model import offline_plan
from audiocore_server.runtime import Runtime
from audiocore_server.storage.leases import LeaseStore, SessionLeases
from audiocore_server.storage.session_access import build_session_service
from audiocore_server.storage.users import USER_ID
from audiocore_server.tasks import TaskManager, TaskRecord, TooManyTasks
from audiocore_server.tasks.adk_backend import SAMPLE_FILES, TaskFiles
from audiocore_server.tasks.ledger import TASKS_USER, TaskStore, backend_session_id, tasks_app_name
from audiocore_server.tasks.manager import RESTARTED, STOPPED

SUM = "sum the amount column of sales.csv"
SUM_UNITS = "sum the units column of sales.csv"
WORDS = "count the words in notes.txt"
LONG = "wait 120 seconds"  # always cancelled (or closed) by the test
TIMEOUT = 30.0


@pytest.fixture
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    store = getattr(request, "param", "sqlite")
    url = f"sqlite+aiosqlite:///{tmp_path / 'sessions.db'}"
    if store == "postgres":  # a fresh database (postgres_helpers)
        url = request.getfixturevalue("postgres_url")
    return Settings(
        data_dir=tmp_path / "data",
        model="offline",
        database_url=url if store in ("database_url", "postgres") else None,
        task_offline_delay_s=0.0,
        hello_timeout_s=0.5,
        allowed_hosts=("testserver",),
    )


# On the server's own SQLite store, and on ADK's SQLAlchemy one (as for PostgreSQL).
any_store = pytest.mark.parametrize("settings", ["sqlite", "database_url"], indirect=True)
# Processes that share a store: on one machine's files, and on PostgreSQL
# (skipped without a server, postgres_helpers).
shared_store = pytest.mark.parametrize("settings", ["sqlite", "postgres"], indirect=True)


def lease_store(settings: Settings, ttl_s: float) -> LeaseStore:
    """A process's lease store (whose heartbeat says it is alive), as the
    runtime would build it for ``settings``, with its own ``ttl_s``."""
    if settings.database_url:
        from audiocore_server.storage.pg_leases import PostgresLeases

        return PostgresLeases(settings.database_url, ttl_s=ttl_s)
    return SessionLeases(settings.data_dir / "leases.db", ttl_s=ttl_s)


# ---------------------------------------------------------------- helpers


@contextlib.asynccontextmanager
async def running(settings: Settings, **options: Any) -> AsyncIterator[TaskManager]:
    """A started manager on the server's session store (a real SQLite file)."""
    service = build_session_service(settings)
    manager = TaskManager(settings, service, build_task_model(settings), **options)
    await manager.start()
    try:
        yield manager
    finally:
        await manager.close()
        await service.close()  # type: ignore[attr-defined]


async def until(
    manager: TaskManager,
    owner: str,
    predicate: Callable[[dict[str, TaskRecord]], bool],
    timeout: float = TIMEOUT,
) -> dict[str, TaskRecord]:
    """The owner's records (by id) once ``predicate`` holds; re-checked on
    every change the manager reports."""
    changed = asyncio.Event()
    unsubscribe = manager.subscribe(owner, lambda _: changed.set())
    try:
        async with asyncio.timeout(timeout):
            while True:
                changed.clear()  # before the read: a change after it wakes us
                records = {r.id: r for r in await manager.tasks(owner)}
                if predicate(records):
                    return records
                await changed.wait()
    except TimeoutError:
        states = {r.id: (r.state, r.progress) for r in await manager.tasks(owner)}
        raise AssertionError(f"not within {timeout}s; tasks of {owner!r}: {states}") from None
    finally:
        unsubscribe()


def all_final(*ids: str) -> Callable[[dict[str, TaskRecord]], bool]:
    return lambda records: all(records[i].final for i in ids)


def waiting_on_timer(task_id: str) -> Callable[[dict[str, TaskRecord]], bool]:
    """The task's backend run is inside its ``wait`` tool."""
    return lambda records: (records[task_id].progress or {}).get("tool") == "wait"


class ChangeLog:
    """Every change the manager reports for one owner, in order."""

    def __init__(self, manager: TaskManager, owner: str) -> None:
        self.records: list[TaskRecord] = []
        self.unsubscribe = manager.subscribe(owner, self.records.append)

    def states(self, task_id: str) -> list[str]:
        states = [r.state for r in self.records if r.id == task_id]
        return [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s]


async def backend_events(manager: TaskManager, owner: str) -> list[Event]:
    session = await manager.store.session_service.get_session(
        app_name=tasks_app_name(manager.settings.app_name),
        user_id=TASKS_USER,
        session_id=backend_session_id(owner),
    )
    assert session is not None
    return session.events


def function_responses(events: list[Event], name: str) -> list[dict[str, Any]]:
    return [r.response or {} for e in events for r in e.get_function_responses() if r.name == name]


def reference_sum(path: Path, column: str) -> tuple[Decimal, int]:
    """The column's exact sum and its count of non-empty cells."""
    with path.open(newline="") as f:
        cells = [row[column].strip() for row in csv.DictReader(f) if row[column].strip()]
    return sum((Decimal(c) for c in cells), Decimal(0)), len(cells)


def task_files(settings: Settings) -> Path:
    return settings.data_dir / "task_files"


def make_record(task_id: str, seq: int, **fields: Any) -> TaskRecord:
    base = TaskRecord(
        id=task_id,
        owner="alice",
        objective=SUM,
        state="queued",
        created_at=1.0,
        started_at=None,
        finished_at=None,
        result=None,
        error=None,
        progress=None,
        delivery="none",
        seq=seq,
    )
    return dataclasses.replace(base, **fields)


# ---------------------------------------------------------------- the backend's work


def test_the_offline_backend_computes_what_the_files_say(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            total = await manager.submit("alice", SUM)
            words = await manager.submit("alice", WORDS)
            records = await until(manager, "alice", all_final(total.id, words.id))
            events = await backend_events(manager, "alice")

        expected, rows = reference_sum(task_files(settings) / "sales.csv", "amount")
        done = records[total.id]
        assert done.state == "completed" and done.error is None and done.delivery == "pending"
        assert done.result is not None
        said = re.search(r"sales\.csv is (-?[\d.]+) \((\d+) rows\)", done.result)
        assert said, done.result
        assert Decimal(said[1]) == expected and int(said[2]) == rows
        # The tool's own figure, as the backend session recorded it.
        (computed,) = function_responses(events, "sum_column")
        assert abs(Decimal(repr(computed["sum"])) - expected) < Decimal("1e-9")
        assert computed["rows"] == rows
        assert done.progress == {
            "tool": "sum_column",
            "detail": json.dumps({"column": "amount", "file": "sales.csv"}, sort_keys=True),
        }

        text = (task_files(settings) / "notes.txt").read_text()
        counted = records[words.id]
        assert counted.state == "completed"
        assert counted.result == (
            f"notes.txt has {len(text.split())} words on {len(text.splitlines())} lines."
        )

    asyncio.run(scenario())


def test_the_task_files_are_seeded_and_kept(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(settings):
            pass
        assert sorted(p.name for p in task_files(settings).iterdir()) == ["notes.txt", "sales.csv"]
        assert (task_files(settings) / "sales.csv").read_bytes() == (
            SAMPLE_FILES / "sales.csv"
        ).read_bytes()
        (task_files(settings) / "sales.csv").write_text("amount\n1.5\n2.25\n")
        async with running(settings) as manager:  # a user's edit survives a restart
            task = await manager.submit("alice", SUM)
            records = await until(manager, "alice", all_final(task.id))
        assert (
            records[task.id].result == "The sum of the amount column in sales.csv is 3.75 (2 rows)."
        )

    asyncio.run(scenario())


def test_the_offline_backend_plans_the_cues_in_the_order_written() -> None:
    plan = offline_plan(
        "Wait 2 seconds, then sum the units column of sales.csv and count words in notes.txt."
    )
    assert plan == [
        ("wait", {"seconds": 2.0}),
        ("sum_column", {"file": "sales.csv", "column": "units"}),
        ("count_words", {"file": "notes.txt"}),
    ]
    assert offline_plan("make me a sandwich") == []


def test_a_task_of_several_steps_runs_them_in_order(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            log = ChangeLog(manager, "alice")
            task = await manager.submit("alice", f"{WORDS}, then {SUM_UNITS}")
            records = await until(manager, "alice", all_final(task.id))
        units, rows = reference_sum(task_files(settings) / "sales.csv", "units")
        text = (task_files(settings) / "notes.txt").read_text()
        assert records[task.id].result == (
            f"notes.txt has {len(text.split())} words on {len(text.splitlines())} lines. "
            f"The sum of the units column in sales.csv is {units} ({rows} rows)."
        )
        tools = [r.progress["tool"] for r in log.records if r.progress]
        assert tools[0] == "count_words" and tools[-1] == "sum_column"

    asyncio.run(scenario())


# ---------------------------------------------------------------- queues


@any_store
def test_fifo_per_owner_and_parallel_across_owners(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            alice = ChangeLog(manager, "alice")
            blocker = await manager.submit("bob", LONG)
            await until(manager, "bob", waiting_on_timer(blocker.id))
            ids = [(await manager.submit("alice", o)).id for o in (WORDS, SUM, SUM_UNITS)]
            records = await until(manager, "alice", all_final(*ids))
            # Alice's three ran to the end while Bob's one was running.
            bob = await manager.status("bob", blocker.id)
            assert bob is not None and bob.state == "running"
            events = await backend_events(manager, "alice")
            bob_events = await backend_events(manager, "bob")
            cancelled = await manager.cancel("bob", blocker.id)
        assert cancelled is not None and cancelled.state == "cancelled"

        assert all(records[i].state == "completed" for i in ids)
        # One at a time, in submission order.
        transitions = [
            (r.id, r.state) for r in alice.records if r.state in ("running", "completed")
        ]
        deduped = [t for k, t in enumerate(transitions) if k == 0 or transitions[k - 1] != t]
        assert deduped == [(i, s) for i in ids for s in ("running", "completed")]
        ordered = [records[i] for i in ids]
        for earlier, later in zip(ordered, ordered[1:], strict=False):
            assert earlier.finished_at is not None and later.started_at is not None
            assert earlier.finished_at <= later.started_at
        # One persistent backend session per owner: Alice's holds her three
        # tasks in order, each one's tool call before the next task.
        steps = []
        for event in events:
            for part in event.content.parts or [] if event.content else []:
                if event.author == "user" and part.text:
                    steps.append(("task", part.text.split(":")[0].removeprefix("Task ")))
                elif part.function_call:
                    steps.append(("call", part.function_call.name))
        assert steps == [
            ("task", ids[0]),
            ("call", "count_words"),
            ("task", ids[1]),
            ("call", "sum_column"),
            ("task", ids[2]),
            ("call", "sum_column"),
        ]
        assert not any(f"Task {i}" in str(e.content) for e in bob_events for i in ids)

    asyncio.run(scenario())


def test_a_new_owner_session_is_not_anyone_elses(settings: Settings) -> None:
    assert backend_session_id("alice") != backend_session_id("bob")
    assert backend_session_id("alice") == backend_session_id("alice")
    assert tasks_app_name(settings.app_name) != settings.app_name


# ---------------------------------------------------------------- status and cancel


def test_status_of_the_latest_task_and_by_id(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            assert await manager.status("alice") is None
            assert await manager.tasks("alice") == []
            first = await manager.submit("alice", WORDS)
            second = await manager.submit("alice", SUM)
            assert second.state == "queued" and second.objective == SUM
            latest = await manager.status("alice")
            assert latest is not None and latest.id == second.id
            by_id = await manager.status("alice", first.id)
            assert by_id is not None and by_id.objective == WORDS
            assert await manager.status("alice", "task_00000000") is None
            assert await manager.status("bob", first.id) is None  # not Bob's
            await until(manager, "alice", all_final(first.id, second.id))
            done = await manager.status("alice", first.id)
            assert done is not None and done.state == "completed"
            assert done.card().data() == {
                "id": first.id,
                "state": "completed",
                "status": "completed",
                "stage": None,
                "permission": None,
                "objective": WORDS,
                "progress": done.progress,
                "result": done.result,
                "error": None,
                "delivery": "pending",
            }
            # Cancelling a finished task leaves it as it is.
            assert await manager.cancel("alice", first.id) == done

    asyncio.run(scenario())


def test_cancelling_a_queued_task_is_immediate_and_it_never_runs(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            log = ChangeLog(manager, "alice")
            blocker = await manager.submit("alice", LONG)
            await until(manager, "alice", waiting_on_timer(blocker.id))
            queued = await manager.submit("alice", SUM)
            cancelled = await manager.cancel("alice", queued.id)
            assert cancelled is not None
            assert cancelled.state == "cancelled" and cancelled.started_at is None
            assert cancelled.delivery == "none" and cancelled.result is None
            # The blocker is untouched; after it, the next task runs, not the
            # cancelled one.
            still = await manager.status("alice", blocker.id)
            assert still is not None and still.state == "running"
            await manager.cancel("alice", blocker.id)
            after = await manager.submit("alice", WORDS)
            await until(manager, "alice", all_final(after.id))
            events = await backend_events(manager, "alice")
        assert log.states(queued.id) == ["queued", "cancelled"]
        assert not any(f"Task {queued.id}" in str(e.content) for e in events)

    asyncio.run(scenario())


@any_store
def test_cancelling_a_running_task_is_confirmed_after_its_run_stopped(
    settings: Settings,
) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            log = ChangeLog(manager, "alice")
            task = await manager.submit("alice", LONG)
            await until(manager, "alice", waiting_on_timer(task.id))
            cancelled = await manager.cancel("alice")  # no id: the latest active task
            events = await backend_events(manager, "alice")
            # The backend session is left consistent: the next task works.
            after = await manager.submit("alice", SUM)
            records = await until(manager, "alice", all_final(after.id))
        assert cancelled is not None and cancelled.id == task.id
        assert cancelled.state == "cancelled" and cancelled.result is None
        assert cancelled.error is None and cancelled.delivery == "none"
        assert cancelled.finished_at is not None
        assert log.states(task.id) == ["queued", "running", "cancelling", "cancelled"]
        # The timer never ran out: its call was answered by ADK's abort.
        (answer,) = function_responses(events, "wait")
        assert "waited" not in answer and "aborted" in answer["error"]
        assert records[after.id].state == "completed"

    asyncio.run(scenario())


def test_a_task_past_its_time_limit_fails(settings: Settings) -> None:
    async def scenario() -> None:
        limited = dataclasses.replace(settings, task_timeout_s=0.2)
        async with running(limited) as manager:
            task = await manager.submit("alice", LONG)
            records = await until(manager, "alice", all_final(task.id))
        assert records[task.id].state == "failed"
        assert records[task.id].error == "the task took longer than 0.2 seconds"
        assert records[task.id].delivery == "pending"  # the user hears it failed

    asyncio.run(scenario())


def test_a_task_past_its_steps_fails_with_the_reason(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(dataclasses.replace(settings, max_task_steps=1)) as manager:
            task = await manager.submit("alice", SUM)  # a tool call, then the answer
            records = await until(manager, "alice", all_final(task.id))
        assert records[task.id].state == "failed"
        assert records[task.id].error == "the task needed more than 1 model steps"

    asyncio.run(scenario())


# ---------------------------------------------------------------- restart


@any_store
def test_a_restart_fails_the_running_task_runs_the_queued_and_keeps_the_rest(
    settings: Settings,
) -> None:
    async def before() -> dict[str, TaskRecord]:
        async with running(settings) as manager:
            heard = await manager.submit("alice", SUM)
            unheard = await manager.submit("alice", WORDS)
            await until(manager, "alice", all_final(heard.id, unheard.id))
            claim = await manager.deliveries.claim("alice", "conn-1", ttl_s=60)
            assert claim is not None and claim.id == heard.id
            assert await manager.deliveries.delivered("alice", heard.id, "conn-1")
            claim = await manager.deliveries.claim("alice", "conn-1", ttl_s=60)
            assert claim is not None and claim.id == unheard.id
            long = await manager.submit("alice", LONG)
            await until(manager, "alice", waiting_on_timer(long.id))
            await manager.submit("alice", SUM_UNITS)
        # As the store holds them after the close.
        service = build_session_service(settings)
        ledger = await TaskStore(service, settings.app_name).read("alice")
        await service.close()  # type: ignore[attr-defined]
        return {r.objective: r for r in ledger.ordered()}

    async def after(old: dict[str, TaskRecord]) -> dict[str, TaskRecord]:
        async with running(settings) as manager:
            records = await until(manager, "alice", all_final(old[SUM_UNITS].id))
            events = await backend_events(manager, "alice")
        # The stopped task was not run again.
        asked = [p.text for e in events for p in (e.content.parts or [] if e.content else [])]
        assert sum(f"Task {old[LONG].id}:" in (text or "") for text in asked) == 1
        return {r.objective: r for r in records.values()}

    old = asyncio.run(before())
    # Closed while running: failed now, with the reason.
    assert old[LONG].state == "failed" and old[LONG].error == STOPPED
    assert old[SUM_UNITS].state == "queued"
    new = asyncio.run(after(old))
    assert new[LONG] == old[LONG]
    assert new[SUM_UNITS].state == "completed"  # the queued one ran after the restart
    assert new[SUM].result == old[SUM].result and new[SUM].delivery == "delivered"
    assert new[WORDS].result == old[WORDS].result
    # A claim of the old process is given back: pending, the attempt counted.
    assert old[WORDS].delivery == "claimed"
    assert new[WORDS].delivery == "pending" and new[WORDS].attempts == 1


@any_store
def test_a_crashed_process_leaves_records_that_the_next_start_repairs(
    settings: Settings,
) -> None:
    claimed = {"claimant": "gone", "claim_expires_at": 1e12, "attempts": 1}
    left = [
        make_record(
            "task_0000000a", 0, state="completed", result="r", delivery="claimed", **claimed
        ),
        make_record("task_0000000b", 1, state="running", started_at=2.0),
        make_record("task_0000000c", 2, state="cancelling", started_at=2.0),
        make_record("task_0000000d", 3),
    ]

    async def scenario() -> dict[str, TaskRecord]:
        service = build_session_service(settings)
        store = TaskStore(service, settings.app_name)

        def put_all(ledger: Any) -> None:
            for r in left:
                ledger.put(r)
            ledger.next_seq = len(left)

        await store.update("alice", put_all)
        await service.close()  # type: ignore[attr-defined]
        async with running(settings) as manager:
            return await until(manager, "alice", all_final("task_0000000d"))

    records = asyncio.run(scenario())
    claimed, was_running, was_cancelling, queued = (records[r.id] for r in left)
    assert claimed.delivery == "pending" and claimed.claimant is None
    assert was_running.state == "failed" and was_running.error == RESTARTED
    assert was_running.delivery == "pending"
    assert was_cancelling.state == "cancelled" and was_cancelling.delivery == "none"
    assert queued.state == "completed"


@shared_store
def test_a_start_leaves_a_live_process_s_task_alone_and_its_queue_waits_for_it(
    settings: Settings,
) -> None:
    async def scenario() -> tuple[str, str, dict[str, TaskRecord]]:
        leases = lease_store(settings, ttl_s=600), lease_store(settings, ttl_s=600)
        for store in leases:
            await store.heartbeat()  # both alive for the whole test
        async with running(settings, leases=leases[0]) as a:
            long = await a.submit("alice", LONG)
            await until(a, "alice", waiting_on_timer(long.id))
            async with running(settings, leases=leases[1]) as b:
                found = await b.status("alice", long.id)
                assert found is not None and found.state == "running"
                later = await b.submit("alice", SUM)
                worker = b._owners["alice"].worker
                assert worker is not None
                await asyncio.wait_for(worker, TIMEOUT)  # ended: nothing it may run
                found = await b.status("alice", later.id)
                assert found is not None and found.state == "queued"
            # a's worker goes on with the queue once its own task is over.
            await a.cancel("alice", long.id)
            records = await until(a, "alice", all_final(later.id))
        for store in leases:
            await store.close()
        return long.id, later.id, records

    long, later, records = asyncio.run(scenario())
    assert records[long].state == "cancelled"
    assert records[later].state == "completed"
    assert records[later].runner == records[long].runner is not None


@shared_store
def test_a_live_process_recovers_the_tasks_of_one_that_died(settings: Settings) -> None:
    async def scenario() -> tuple[str, str, dict[str, TaskRecord], str]:
        # a beats once and never again: dead once its short ttl is over.
        dying, alive = lease_store(settings, ttl_s=0.3), lease_store(settings, ttl_s=600)
        await dying.heartbeat()
        await alive.heartbeat()
        async with running(settings, leases=dying) as a:
            long = await a.submit("alice", LONG)
            await until(a, "alice", waiting_on_timer(long.id))
            async with running(settings, leases=alive) as b:
                later = await b.submit("alice", SUM)
                records = await until(b, "alice", all_final(long.id, later.id))
        for store in (dying, alive):
            await store.close()
        return long.id, later.id, records, alive.owner

    long, later, records, alive = asyncio.run(scenario())
    assert records[long].state == "failed" and records[long].error == RESTARTED
    assert records[later].state == "completed" and records[later].runner == alive


@shared_store
def test_a_user_back_on_a_live_process_gets_the_task_of_a_dead_one_settled(
    settings: Settings,
) -> None:
    async def scenario() -> tuple[str, str, dict[str, TaskRecord], str]:
        dying, alive = lease_store(settings, ttl_s=0.3), lease_store(settings, ttl_s=600)
        await dying.heartbeat()
        await alive.heartbeat()
        # b started before the task did: its start saw nothing to recover.
        async with running(settings, leases=alive) as b, running(settings, leases=dying) as a:
            long = await a.submit("alice", LONG)
            later = await a.submit("alice", SUM)
            await until(a, "alice", waiting_on_timer(long.id))
            # alice comes back on b (a subscription, as a connection's).
            records = await until(b, "alice", all_final(long.id, later.id))
        for store in (dying, alive):
            await store.close()
        return long.id, later.id, records, alive.owner

    long, later, records, alive = asyncio.run(scenario())
    assert records[long].state == "failed" and records[long].error == RESTARTED
    assert records[later].state == "completed" and records[later].runner == alive


# ---------------------------------------------------------------- delivery


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def finished(manager: TaskManager, *objectives: str) -> list[TaskRecord]:
    ids = [(await manager.submit("alice", o)).id for o in objectives]
    records = await until(manager, "alice", all_final(*ids))
    return [records[i] for i in ids]


@any_store
def test_two_claimants_get_one_task_once(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            (task,) = await finished(manager, SUM)
            claims = await asyncio.gather(
                manager.deliveries.claim("alice", "conn-1", ttl_s=30),
                manager.deliveries.claim("alice", "conn-2", ttl_s=30),
            )
            got = [c for c in claims if c is not None]
            assert len(got) == 1 and got[0].id == task.id and got[0].delivery == "claimed"
            holder = got[0].claimant
            other = "conn-2" if holder == "conn-1" else "conn-1"
            assert holder is not None
            assert await manager.deliveries.claim("alice", other, ttl_s=30) is None
            assert not await manager.deliveries.renew("alice", task.id, other, ttl_s=30)
            assert not await manager.deliveries.postpone("alice", task.id, other)
            # The holder asking again gets its own claim back, renewed.
            again = await manager.deliveries.claim("alice", holder, ttl_s=30)
            assert again is not None and again.id == task.id and again.attempts == 1
            assert await manager.deliveries.renew("alice", task.id, holder, ttl_s=30)
            assert await manager.deliveries.claim("bob", other, ttl_s=30) is None

    asyncio.run(scenario())


def test_an_expired_claim_is_taken_over(settings: Settings) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        async with running(settings, clock=clock) as manager:
            (task,) = await finished(manager, SUM)
            first = await manager.deliveries.claim("alice", "conn-1", ttl_s=10)
            assert first is not None and first.claim_expires_at == clock.now + 10
            clock.now += 5
            assert await manager.deliveries.renew("alice", task.id, "conn-1", ttl_s=10)
            clock.now += 9  # within the renewed claim
            assert await manager.deliveries.claim("alice", "conn-2", ttl_s=10) is None
            clock.now += 2  # past it: conn-1 is gone
            taken = await manager.deliveries.claim("alice", "conn-2", ttl_s=10)
            assert taken is not None and taken.id == task.id
            assert taken.claimant == "conn-2" and taken.attempts == 2
            assert not await manager.deliveries.renew("alice", task.id, "conn-1", ttl_s=10)
            assert await manager.deliveries.delivered("alice", task.id, "conn-2")

    asyncio.run(scenario())


def test_delivered_is_idempotent_and_final(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            (task,) = await finished(manager, SUM)
            log = ChangeLog(manager, "alice")
            claim = await manager.deliveries.claim("alice", "conn-1", ttl_s=30)
            assert claim is not None
            assert await manager.deliveries.delivered("alice", task.id, "conn-1")
            assert await manager.deliveries.delivered("alice", task.id, "conn-1")
            assert await manager.deliveries.delivered("alice", task.id, "conn-2")
            assert await manager.deliveries.claim("alice", "conn-1", ttl_s=30) is None
            assert await manager.deliveries.claim("alice", "conn-2", ttl_s=30) is None
            assert not await manager.deliveries.renew("alice", task.id, "conn-1", ttl_s=30)
            assert not await manager.deliveries.postpone("alice", task.id, "conn-1")
            record = await manager.status("alice", task.id)
            assert record is not None and record.delivery == "delivered"
            assert record.result == task.result
            assert [r.delivery for r in log.records] == ["claimed", "delivered"]
            # Nothing to deliver for a task without an outcome.
            assert not await manager.deliveries.delivered("alice", "task_00000000", "conn-1")

    asyncio.run(scenario())


def test_a_line_taken_while_the_claim_is_made_is_waited_for(settings: Settings) -> None:
    """The line is free, the delivery claims the outcome, and during that
    claim the user types: the outcome is handed to the model only once the
    line is free again (a typed turn and the outcome must not cross)."""

    async def scenario() -> None:
        async with running(settings) as manager:
            (task,) = await finished(manager, SUM)
            line: dict[str, float | None] = {"free_at": 0.0}
            handed: list[str] = []
            claim = manager.deliveries.claim

            async def claim_while_the_user_types(*args: Any, **kwargs: Any) -> Any:
                line["free_at"] = None  # the typed turn arrives meanwhile
                return await claim(*args, **kwargs)

            manager.deliveries.claim = claim_while_the_user_types  # type: ignore[method-assign]
            delivery = TaskDelivery(
                manager,
                "alice",
                "conn-1",
                line_free_at=lambda: line["free_at"],
                playback_ends_at=lambda: 0.0,
                hand_to_model=handed.append,
            )
            claimed = asyncio.Event()
            unsubscribe = manager.subscribe(
                "alice", lambda r: claimed.set() if r.delivery == "claimed" else None
            )
            runner = asyncio.create_task(delivery.run())
            try:
                await claimed.wait()
                for _ in range(10):  # the loop gets every chance to hand it over
                    await asyncio.sleep(0)
                assert handed == []
                line["free_at"] = 0.0  # the typed turn has been answered
                answered = asyncio.Event()
                unsubscribe_answer = manager.subscribe(
                    "alice", lambda r: answered.set() if r.delivery == "delivered" else None
                )
                delivery.wake()
                while not handed:
                    await asyncio.sleep(0)
                assert handed[0].startswith(f"[background task {task.id} completed]")
                delivery.turn_ended()
                await answered.wait()
                unsubscribe_answer()
            finally:
                unsubscribe()
                runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await runner

    asyncio.run(scenario())


def test_postponing_past_the_attempts_fails_the_delivery_and_frees_the_next(
    settings: Settings,
) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        bounded = dataclasses.replace(settings, max_delivery_attempts=2)
        async with running(bounded, clock=clock) as manager:
            bad, good, third = await finished(manager, SUM, WORDS, SUM_UNITS)
            for attempt in (1, 2):
                claim = await manager.deliveries.claim("alice", "conn-1", ttl_s=30)
                assert claim is not None and claim.id == bad.id and claim.attempts == attempt
                assert await manager.deliveries.postpone("alice", bad.id, "conn-1")
            gave_up = await manager.status("alice", bad.id)
            assert gave_up is not None and gave_up.delivery == "failed"
            assert gave_up.state == "completed" and gave_up.result == bad.result
            nxt = await manager.deliveries.claim("alice", "conn-1", ttl_s=30)
            assert nxt is not None and nxt.id == good.id
            assert await manager.deliveries.postpone("alice", good.id, "conn-1")
            # A claimant that vanishes on the last attempt: its claim expires,
            # the delivery fails, and the next task is claimed instead.
            last = await manager.deliveries.claim("alice", "conn-2", ttl_s=30)
            assert last is not None and last.id == good.id and last.attempts == 2
            clock.now += 31
            taken = await manager.deliveries.claim("alice", "conn-3", ttl_s=30)
            assert taken is not None and taken.id == third.id
            dropped = await manager.status("alice", good.id)
            assert dropped is not None and dropped.delivery == "failed"

    asyncio.run(scenario())


def test_a_failed_task_is_delivered_too(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(settings) as manager:
            (task,) = await finished(manager, "count the words in missing.txt")
            claim = await manager.deliveries.claim("alice", "conn-1", ttl_s=30)
        assert task.state == "failed" and task.delivery == "pending"
        assert claim is not None and claim.id == task.id
        assert claim.error is not None and "no file 'missing.txt'" in claim.error

    asyncio.run(scenario())


def test_old_records_make_room_settled_ones_first(settings: Settings) -> None:
    async def scenario() -> None:
        async with running(dataclasses.replace(settings, max_task_records=3)) as manager:
            one, two, three = await finished(manager, SUM, WORDS, SUM_UNITS)
            for task in (one, two):
                claim = await manager.deliveries.claim("alice", "conn-1", ttl_s=30)
                assert claim is not None and claim.id == task.id
                await manager.deliveries.delivered("alice", task.id, "conn-1")
            (four,) = await finished(manager, WORDS)
            assert [r.id for r in await manager.tasks("alice")] == [two.id, three.id, four.id]
            five, six = await finished(manager, SUM, SUM)
            # Then the oldest unheard one goes.
            assert [r.id for r in await manager.tasks("alice")] == [four.id, five.id, six.id]

    asyncio.run(scenario())


# ---------------------------------------------------------------- the store


@any_store
def test_the_ledger_is_compacted_and_keeps_its_records(settings: Settings) -> None:
    async def scenario() -> None:
        service = build_session_service(settings)
        store = TaskStore(service, settings.app_name, compact_every=3)
        for n in range(8):

            def add(ledger: Any, n: int = n) -> None:
                task_id = f"task_{n:08x}"
                ledger.put(make_record(task_id, ledger.take_seq(), objective=f"objective {n}"))

            await store.update("alice", add)
        ledger = await store.read("alice")
        assert [r.objective for r in ledger.ordered()] == [f"objective {n}" for n in range(8)]
        assert ledger.next_seq == 8
        assert await store.owners() == ["alice"]
        (listed,) = (
            await service.list_sessions(app_name=store.app_name, user_id=TASKS_USER)
        ).sessions
        full = await service.get_session(
            app_name=store.app_name, user_id=TASKS_USER, session_id=listed.id
        )
        assert full is not None and len(full.events) < 3
        await service.close()  # type: ignore[attr-defined]

    asyncio.run(scenario())


# ---------------------------------------------------------------- bad input


def test_bad_objectives_and_limits_are_refused_clearly(settings: Settings) -> None:
    async def scenario() -> None:
        bounded = dataclasses.replace(settings, max_queued_tasks=2, max_task_objective_chars=50)
        async with running(bounded) as manager:
            with pytest.raises(ValueError, match="objective: expected a description"):
                await manager.submit("alice", "   ")
            with pytest.raises(ValueError, match="expected at most 50 characters, got 51"):
                await manager.submit("alice", "x" * 51)
            with pytest.raises(TypeError, match="objective: expected a string, got int"):
                await manager.submit("alice", 5)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="owner: expected 1 to 512 characters"):
                await manager.submit("", SUM)
            with pytest.raises(ValueError, match="ttl_s: expected a number of seconds"):
                await manager.deliveries.claim("alice", "conn-1", ttl_s=0)
            blocker = await manager.submit("alice", LONG)
            await until(manager, "alice", waiting_on_timer(blocker.id))
            await manager.submit("alice", SUM)
            await manager.submit("alice", SUM)
            with pytest.raises(TooManyTasks, match="2 tasks are already waiting"):
                await manager.submit("alice", SUM)
            assert await manager.cancel("alice", "task_00000000") is None
            assert await manager.cancel("bob") is None
            assert len(await manager.tasks("alice")) == 3  # nothing half-written
            await manager.cancel("alice", blocker.id)
            records = await until(manager, "alice", lambda rs: all(r.final for r in rs.values()))
        assert sorted(r.state for r in records.values()) == ["cancelled", "completed", "completed"]

    asyncio.run(scenario())


def test_the_backend_tools_refuse_paths_outside_their_directory(
    settings: Settings, tmp_path: Path
) -> None:
    files = TaskFiles(task_files(settings))
    files.seed()
    (tmp_path / "secret.txt").write_text("secret")
    (task_files(settings) / "escape.txt").symlink_to(tmp_path / "secret.txt")
    expected_a_name = "file: expected the name of a file in the task files directory"
    for name in ("../secret.txt", "/etc/passwd", "sub/notes.txt", "..", ".hidden", "", "a" * 101):
        with pytest.raises(ValueError, match=expected_a_name):
            files.resolve(name)
    with pytest.raises(ValueError, match=expected_a_name + r".*got 5"):
        files.resolve(5)
    with pytest.raises(ValueError, match="'escape.txt' is outside the task files directory"):
        files.resolve("escape.txt")
    with pytest.raises(ValueError, match=r"no file 'nope.csv'; the files are .*sales\.csv"):
        files.resolve("nope.csv")
    assert files.resolve("notes.txt") == (task_files(settings) / "notes.txt").resolve()

    async def tools() -> list[dict[str, Any]]:
        return [
            await files.sum_column("../secret.txt", "amount"),
            await files.count_words("escape.txt"),
            await files.sum_column("sales.csv", "price"),
            await files.sum_column("sales.csv", "region"),
            await files.wait(-1),
            await files.wait("soon"),  # type: ignore[arg-type]
        ]

    traversal, link, column, text, negative, word = asyncio.run(tools())
    assert traversal["error"].startswith(expected_a_name)
    assert "outside" in link["error"]
    assert column["error"].startswith("column: no column 'price' in sales.csv; the columns are")
    assert text["error"] == "sales.csv line 2: region is not a number: 'north'"
    assert negative["error"] == "seconds: expected more than 0 and at most 600, got -1"
    assert word["error"] == "seconds: expected a number, got 'soon'"


def test_a_task_the_backend_cannot_do_fails_with_a_clear_reason(settings: Settings) -> None:
    async def scenario() -> dict[str, TaskRecord]:
        async with running(settings) as manager:
            traversal = await manager.submit("alice", "count the words in ../../etc/passwd")
            nonsense = await manager.submit("alice", "make me a sandwich")
            column = await manager.submit("alice", "sum the price column of sales.csv")
            records = await until(manager, "alice", all_final(traversal.id, nonsense.id, column.id))
            works = await manager.submit("alice", SUM)  # and nothing is broken
            records |= await until(manager, "alice", all_final(works.id))
        return {r.objective: r for r in records.values()}

    records = asyncio.run(scenario())
    failed = records["count the words in ../../etc/passwd"]
    assert failed.state == "failed" and failed.result is None
    assert failed.error is not None and "got '../../etc/passwd'" in failed.error
    confused = records["make me a sandwich"]
    assert confused.state == "failed" and confused.error is not None
    assert confused.error.startswith("I did not understand the task; the offline backend can")
    wrong = records["sum the price column of sales.csv"]
    assert wrong.error is not None and "no column 'price'" in wrong.error
    assert records[SUM].state == "completed"


def test_settings_for_tasks(tmp_path: Path) -> None:
    problems = Settings(
        data_dir=tmp_path, task_offline_delay_s=-1, max_queued_tasks=0, task_timeout_s=0
    ).problems()
    assert "task_offline_delay_s: expected 0 or more, got -1" in problems
    assert "max_queued_tasks: expected more than 0, got 0" in problems
    assert "task_timeout_s: expected more than 0, got 0" in problems
    assert Settings(model="offline").task_model_name == "offline"
    env = {"AUDIOCORE_TASK_OFFLINE_DELAY_S": "0.25", "AUDIOCORE_MAX_QUEUED_TASKS": "7"}
    loaded = Settings.from_env(env)
    assert loaded.task_offline_delay_s == 0.25 and loaded.max_queued_tasks == 7


# ---------------------------------------------------------------- the live tools


def test_the_offline_live_model_calls_the_task_tools_on_cues() -> None:
    tools = {"start_task", "get_task_status", "cancel_task", "change_bgm"}

    def call(text: str) -> tuple[str | None, dict[str, Any] | None]:
        (response,) = _answer_text(text, tools, 1)
        assert response.content is not None and response.content.parts
        function_call = response.content.parts[0].function_call
        assert function_call is not None, text
        return function_call.name, function_call.args

    assert call("Start a task to sum the amount column of sales.csv") == (
        "start_task",
        {"objective": "sum the amount column of sales.csv"},
    )
    assert call("please start a background task: count the words in notes.txt") == (
        "start_task",
        {"objective": "count the words in notes.txt"},
    )
    assert call("what's the status of my task") == ("get_task_status", {})
    assert call("how is task task_0a1b2c3d going?") == (
        "get_task_status",
        {"task_id": "task_0a1b2c3d"},
    )
    assert call("cancel my task") == ("cancel_task", {})
    assert call("stop the task task_0a1b2c3d") == ("cancel_task", {"task_id": "task_0a1b2c3d"})
    assert call("stop the music") == ("change_bgm", {"track": "off"})


def ask(ws: Any, text: str) -> list[dict[str, Any]]:
    """The answer to a typed turn. A finished task's outcome may be told
    meanwhile, in a turn of its own (audiocore_server/live/outcomes.py): that one is skipped."""
    ws.send_text(json.dumps({"type": "text", "text": text}))
    while True:
        turn = receive_until(ws, "finish")
        deltas = [m["delta"] for m in turn if m["type"] == "text-delta"]
        if not (deltas and deltas[0].startswith("Your background task")):
            return turn


def tool_output(chunks: list[dict[str, Any]], name: str) -> tuple[dict[str, Any], Any]:
    call = next(m for m in chunks if m["type"] == "tool-input-available")
    assert call["toolName"] == name, call
    output = next(m for m in chunks if m["type"] == "tool-output-available")
    assert output["toolCallId"] == call["toolCallId"]
    return call["input"], output["output"]


@any_store
def test_the_live_tools_in_a_live_conversation(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        tasks: TaskManager = client.app.state.runtime.tasks  # type: ignore[attr-defined]
        portal = client.portal
        assert portal is not None
        session_id = start(ws)["data"]["sessionId"]
        owner = session_owner(USER_ID, session_id)  # the connection wrote no task_owner

        chunks = ask(ws, f"start a task to {SUM}")
        args, started = tool_output(chunks, "start_task")
        assert args == {"objective": SUM}
        task_id = started["taskId"]
        assert started["state"] == "queued" and started["objective"] == SUM
        assert started["message"].startswith(f"Task {task_id} started")
        answer = "".join(m["delta"] for m in chunks if m["type"] == "text-delta")
        assert task_id in answer  # the model answered at once, the task runs on
        records = portal.call(until, tasks, owner, all_final(task_id))
        assert records[task_id].state == "completed"

        args, status = tool_output(ask(ws, "what's the status of my task?"), "get_task_status")
        assert args == {}
        assert status["taskId"] == task_id and status["state"] == "completed"
        assert status["result"] == records[task_id].result

        _, waiting = tool_output(ask(ws, f"start a task to {LONG}"), "start_task")
        portal.call(until, tasks, owner, waiting_on_timer(waiting["taskId"]))
        args, status = tool_output(ask(ws, f"how is task {waiting['taskId']}"), "get_task_status")
        assert args == {"task_id": waiting["taskId"]}
        assert status["state"] == "running" and status["progress"]["tool"] == "wait"
        args, cancelled = tool_output(ask(ws, "cancel my task"), "cancel_task")
        assert args == {} and cancelled["taskId"] == waiting["taskId"]
        assert cancelled["state"] == "cancelled"  # confirmed before the tool answered

        _, refused = tool_output(ask(ws, 'call start_task {"objective": " "}'), "start_task")
        assert refused == {
            "error": "objective: expected a description of the work, got an empty one"
        }
        _, unknown = tool_output(
            ask(ws, 'call get_task_status {"task_id": "task_deadbeef"}'), "get_task_status"
        )
        assert unknown["error"].startswith("no task 'task_deadbeef'; the latest tasks are: ")
        states = [r.state for r in portal.call(tasks.tasks, owner)]
        assert states == ["completed", "cancelled"]


def test_the_users_key_carries_tasks_across_sessions(settings: Settings) -> None:
    """The client's userKey (start) names the task owner: a new session of
    the same user sees, and is told, the tasks of the earlier one."""
    key = "k" * 24
    with TestClient(create_app(settings)) as client:
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        portal = client.portal
        assert portal is not None
        ids, session_ids = [], []
        for objective in (SUM, WORDS):
            with client.websocket_connect("/ws") as ws:
                session_ids.append(start(ws, userKey=key)["data"]["sessionId"])
                turn = ask(ws, f"start a task to {objective}")
                # The earlier task's outcome may be told first, in a turn of its own.
                while not any(m["type"] == "tool-input-available" for m in turn):
                    turn = receive_until(ws, "finish")
                _, started = tool_output(turn, "start_task")
                ids.append(started["taskId"])
        records = portal.call(until, runtime.tasks, f"key:{key}", all_final(*ids))
        assert [records[i].objective for i in ids] == [SUM, WORDS]
        assert session_ids[0] != session_ids[1]
        for session_id in session_ids:
            assert portal.call(runtime.tasks.tasks, session_owner(USER_ID, session_id)) == []


def test_sessions_of_two_users_with_one_id_do_not_share_tasks(settings: Settings) -> None:
    """Clients of ADK's API name their sessions: ids repeat across users."""

    async def say(runtime: Runtime, user: str, text: str) -> dict[str, Any]:
        events = runtime.agents.select(None).chat_runner.run_async(
            user_id=user,
            session_id="shared-id",
            new_message=types.Content(role="user", parts=[types.Part(text=text)]),
        )
        async with contextlib.aclosing(events):
            responses = [r.response or {} async for e in events for r in e.get_function_responses()]
        (response,) = responses
        return response

    async def scenario() -> None:
        runtime = Runtime(settings)
        await runtime.start()
        try:
            for user in ("u1", "u2"):
                await runtime.sessions.service.create_session(
                    app_name=settings.app_name, user_id=user, session_id="shared-id"
                )
            started = await say(runtime, "u1", f"start a task to {SUM}")
            assert started["state"] == "queued"
            assert await say(runtime, "u2", "what's the status of my task") == {
                "error": "there are no tasks yet"
            }
            mine = await say(runtime, "u1", "what's the status of my task")
            assert mine["taskId"] == started["taskId"]
            owner = session_owner("u1", "shared-id")
            await until(runtime.tasks, owner, all_final(started["taskId"]))
        finally:
            await runtime.close()

    asyncio.run(scenario())


def test_the_process_runs_at_most_max_running_tasks_and_serves_max_task_owners(
    settings: Settings,
) -> None:
    """150 chat ids once started 150 runs at once: a cost amplifier with a
    paid model. Runs past the bound wait queued; owners past theirs are told."""
    bounded = dataclasses.replace(settings, max_running_tasks=2, max_task_owners=3)

    async def scenario() -> None:
        async with running(bounded) as manager:
            owners = ["a", "b", "c"]
            first = {o: await manager.submit(o, LONG) for o in owners}
            await until(manager, "a", waiting_on_timer(first["a"].id))
            await until(manager, "b", waiting_on_timer(first["b"].id))
            third = await manager.status("c", first["c"].id)
            assert third is not None and third.state == "queued"  # no slot for it
            with pytest.raises(TooManyTasks, match="background work for 3 users"):
                await manager.submit("d", SUM)
            await manager.submit("a", SUM)  # an owner with work may queue more
            await manager.cancel("a", first["a"].id)
            # A slot is free: the queued run of c (or a's next) takes it.
            records = await until(manager, "c", lambda r: r[first["c"].id].state == "running")
            assert records[first["c"].id].started_at is not None
            for owner in owners:
                await manager.cancel(owner, first[owner].id)

    asyncio.run(scenario())
