"""The task engine: a FIFO queue per owner, and the backend runs.

An *owner* is whoever a task belongs to: a stable per-user key, so a new
voice connection continues the same tasks and backend context (see
``live_tools.owner_from_context``). Per owner, one task runs in the backend
at a time and the others wait in submission order; owners run in parallel.

Every change is a write to the owner's ledger (``store.py``) followed by a
call to the owner's subscribers with the changed record. The worker of an
owner exists only while it has queued work.

Cancellation is confirmed: a queued task is cancelled at once; a running one
becomes ``cancelling``, its backend run is aborted (``run_async``'s
``abort_signal``; cancelled outright if it does not stop within
``task_cancel_grace_s``), and only then is it ``cancelled``. ``cancel``
returns after that.

A task whose run ended (completed or failed) is delivered once, through
the renewable claims of ``deliveries`` (``outcome_claims.py``); at start, the
manager frees the claims of connections that are gone.

Several server processes may share one database (``--workers``, hosts on
one PostgreSQL). A running task records its process (``runner``: the lease
owner id, ``leases.py``), which is alive while its heartbeat is. A task
whose runner is dead was cut off: ``start`` (and a worker about to take the
owner's next task) fails it, or confirms its cancellation; a task whose
runner is alive is that process's, and the owner's next task waits for it,
so an owner's tasks still run one at a time whichever process took them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.sessions import BaseSessionService

from ..settings import Settings
from ..storage.leases import LeaseStore
from .acp_permissions import PermissionDesk, PermissionRequest
from .backends import build_backend
from .ledger import Ledger, TaskStore
from .outcome_claims import DeliveryClaims
from .projects import project_dir
from .records import (
    DELIVERABLE_STATES,
    MAX_OWNER_CHARS,
    TaskRecord,
    TaskState,
    check_objective,
    check_text,
)
from .runs import STOPPED as STOPPED  # what the tests and callers name it by
from .runs import Outcome, Run, run_to_outcome

RESTARTED = "the server restarted while this task was running"
_RUNNING = ("running", "cancelling")  # a process runs it (or is stopping it)

log = logging.getLogger(__name__)


class TooManyTasks(RuntimeError):
    """The owner already has as many tasks waiting as allowed."""


def new_task_id() -> str:
    return "task_" + secrets.token_hex(4)  # short enough for a model to repeat


def fresh(ledger: Ledger, owner: str, objective: str, now: float, **fields: Any) -> TaskRecord:
    """A new record of ``owner``'s, the next in its ledger's order."""
    blank: dict[str, Any] = dict(started_at=None, finished_at=None, result=None, error=None)
    return TaskRecord(
        id=new_task_id(),
        owner=owner,
        objective=objective,
        created_at=now,
        progress=None,
        delivery="none",
        seq=ledger.take_seq(),
        **(blank | fields),
    )


@dataclasses.dataclass(eq=False)
class _Owner:
    worker: asyncio.Task[None] | None = None
    run: Run | None = None
    delegation: Run | None = None  # a delegation its running task waits for
    subscribers: list[Callable[[TaskRecord], None]] = dataclasses.field(default_factory=list)


class TaskManager:
    def __init__(
        self,
        settings: Settings,
        session_service: BaseSessionService,
        model: BaseLlm,
        *,
        clock: Callable[[], float] = time.time,
        leases: LeaseStore | None = None,
    ) -> None:
        """``model``: the ADK backend's text model; ``leases``: whose
        heartbeat tells which processes are alive; without, this process
        takes itself for the only one."""
        self.settings = settings
        self._leases = leases
        self._runner = leases.owner if leases is not None else None
        self.store = TaskStore(session_service, settings.app_name)
        # An external agent's permission requests, asked by voice.
        self.permissions = PermissionDesk(
            settings.acp_permission_timeout_s, self._permission_changed
        )
        self.backend = build_backend(
            settings, session_service, self.store, self.permissions, model, coordinator=self
        )
        # Wall-clock seconds: timestamps and claim expiry outlive the process.
        self._clock = clock
        self._owners: dict[str, _Owner] = {}
        self.deliveries = DeliveryClaims(settings, self.store, self._notify, clock)
        self._closing = False
        # Owners with a task that another live process runs: looked at again
        # every few heartbeats, so that process's death does not leave the
        # task running and the owner's queue stuck.
        self._watched: set[str] = set()
        self._watch: asyncio.Task[None] | None = None
        # Tasks this process runs at once, whoever owns them: the others
        # stay queued until a run ends (a cost bound with a paid model).
        self._slots = asyncio.Semaphore(settings.max_running_tasks)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Seed the task files; fail the tasks that a process which is gone
        left running, finish its cancellations, free its delivery claims,
        and start the work still queued."""
        self.backend.files.seed()
        for owner in await self.store.owners():
            await self._recover_owner(owner, starting=True)
        if self._leases is not None:
            self._watch = asyncio.create_task(self._watch_others(4 * self._leases.heartbeat_s))

    async def _watch_others(self, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s)
            for owner in list(self._watched):
                try:
                    await self._recover_owner(owner)
                except Exception:  # the store is down: try again later
                    log.warning("recovering the tasks of %r failed", owner, exc_info=True)

    async def _recover_owner(self, owner: str, *, starting: bool = False) -> None:
        """Settle the owner's tasks whose runner is gone; start its queued
        work. ``starting``: also free the delivery claims of connections
        that are gone (later, expired claims are freed as they are met)."""
        self._watched.discard(owner)
        runners, dead, others_alive = await self._runners(owner, starting=starting)
        if not starting and not dead:  # nothing to settle (the usual case)
            if runners - {self._runner}:
                self._watched.add(owner)
            return
        now = self._clock()

        def recover(ledger: Ledger) -> bool:
            self._recover(ledger, dead, now)
            for record in ledger.ordered():
                if not starting or record.delivery != "claimed":
                    continue
                # Alone, its claimant was a connection of the old process;
                # else it may be a live process's, whose claim is left to
                # expire.
                if not others_alive or (record.claim_expires_at or 0) <= now:
                    ledger.put(self.deliveries.released(record))
            if self._run_elsewhere(ledger):
                self._watched.add(owner)
            return any(r.state == "queued" for r in ledger.records.values())

        queued, changed = await self.store.update(owner, recover)
        self._notify(owner, changed)
        if queued:
            self._ensure_worker(owner)

    async def _runners(
        self, owner: str, *, starting: bool = False
    ) -> tuple[set[str | None], set[str | None], bool]:
        """The runners of ``owner``'s running tasks, those of them whose
        process is gone, and (``starting``) whether any process but this
        one is alive.

        The ledger is read before the heartbeats: a runner seen in it had
        beaten before it wrote the record, so it is not taken for dead
        however new it is."""
        ledger = await self.store.read(owner)
        runners = {r.runner for r in ledger.records.values() if r.state in _RUNNING}
        if self._leases is None:
            return runners, runners, False
        if not runners and not starting:
            return runners, set(), False
        live = await self._leases.live_owners() | {self._runner}  # late beats or not, we live
        return runners, runners - live, bool(live - {self._runner})

    def _run_elsewhere(self, ledger: Ledger) -> bool:
        """A task of the ledger runs in another process (as far as we know)."""
        return any(
            r.state in _RUNNING and r.runner != self._runner for r in ledger.records.values()
        )

    @staticmethod
    def _recover(ledger: Ledger, dead: set[str | None], now: float) -> None:
        """Settle the tasks whose runner is in ``dead``."""
        for record in ledger.ordered():
            if record.state not in _RUNNING or record.runner not in dead:
                continue
            if record.state == "running":
                ledger.put(
                    dataclasses.replace(
                        record,
                        state="failed",
                        error=RESTARTED,
                        finished_at=now,
                        delivery="pending" if record.parent is None else "none",
                    )
                )
            else:
                ledger.put(dataclasses.replace(record, state="cancelled", finished_at=now))

    async def close(self) -> None:
        """Stop the workers. A running task is aborted and failed ("the
        server stopped…"); queued tasks stay queued for the next start."""
        self._closing = True
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
        owners = list(self._owners.values())
        for state in owners:
            if state.run is not None:
                state.run.abort.set()
        workers = [s.worker for s in owners if s.worker is not None]
        if workers:
            grace = self.settings.task_cancel_grace_s
            _, late = await asyncio.wait(workers, timeout=2 * grace + 5)
            for state in owners:
                if state.run is not None and state.run.task is not None:
                    state.run.task.cancel()
            for worker in late:
                worker.cancel()
            if late:
                await asyncio.wait(late, timeout=grace)
        await self.backend.close()

    # ------------------------------------------------------------ tasks

    async def submit(
        self,
        owner: str,
        objective: str,
        context: dict[str, Any] | None = None,
        project: str | None = None,
    ) -> TaskRecord:
        """Queue ``objective`` as a new task of ``owner``; returns at once.
        ``context``: the conversation it comes from (``envelope.voice_context``);
        ``project``: the project it works in (``projects.py``).

        ``ValueError`` for an empty or too long objective or a project that
        is not one, ``TooManyTasks`` when ``max_queued_tasks`` already wait.
        """
        text = self._checked(owner, objective, project)
        now = self._clock()

        busy = sum(1 for o, state in self._owners.items() if state.worker and o != owner)
        if busy >= self.settings.max_task_owners:
            raise TooManyTasks(
                f"the server has background work for {busy} users (at most "
                f"{self.settings.max_task_owners}); try again later"
            )

        def add(ledger: Ledger) -> TaskRecord:
            waiting = sum(1 for r in ledger.records.values() if r.state == "queued")
            if waiting >= self.settings.max_queued_tasks:
                raise TooManyTasks(
                    f"{waiting} tasks are already waiting (at most "
                    f"{self.settings.max_queued_tasks}); cancel one or wait for one to finish"
                )
            ledger.make_room(self.settings.max_task_records)
            new = fresh(ledger, owner, text, now, state="queued", context=context, project=project)
            return ledger.put(new)

        record, changed = await self.store.update(owner, add)
        self._notify(owner, changed)
        self._ensure_worker(owner)
        return record

    def _checked(self, owner: str, objective: object, project: str | None) -> str:
        """The objective, stripped, once owner, objective and project are good."""
        check_text("owner", owner, MAX_OWNER_CHARS)
        text = check_objective(objective, self.settings.max_task_objective_chars)
        if project is not None:
            project_dir(self.settings.acp_projects_root, project)
        if self._closing:
            raise RuntimeError("the task manager is closed")
        return text

    async def delegate(
        self, owner: str, parent_id: str, objective: str, project: str | None = None
    ) -> TaskRecord:
        """Run ``objective`` for ``owner`` now, for its task ``parent_id``
        running here, in another session (``project``'s, or the main one);
        its final record, under a correlation id. The asking task lends it
        its turn: it runs beside it, not behind it in the owner's queue (the
        asking task waits for it), and it is stopped if the asking task is."""
        text = self._checked(owner, objective, project)
        state = self._owners.get(owner)
        parent = state.run if state is not None else None
        if state is not None and state.delegation and state.delegation.record.id == parent_id:
            raise RuntimeError("a delegated task cannot delegate in turn")
        if state is None or parent is None or parent.record.id != parent_id:
            raise RuntimeError(f"task {parent_id} is not running here: only it may delegate")
        if state.delegation is not None:
            raise RuntimeError(f"task {parent_id} already waits for a delegation")
        if project == parent.record.project:
            where = f"project {project!r}" if project else "the main session"
            raise ValueError(
                f"project: the asking task works in {where}; delegate to another session"
            )
        now = self._clock()

        def add(ledger: Ledger) -> TaskRecord:
            ledger.make_room(self.settings.max_task_records)
            started = fresh(ledger, owner, text, now, state="running", started_at=now)
            return ledger.put(
                dataclasses.replace(
                    started,
                    runner=self._runner,
                    project=project,
                    parent=parent_id,
                    correlation="corr_" + secrets.token_hex(6),
                )
            )

        record, changed = await self.store.update(owner, add)
        run = state.delegation = Run(record)
        self._notify(owner, changed)
        # Stopped with its asking task, or its caller: nobody would wait for it.
        follow = asyncio.create_task(parent.abort.wait())
        follow.add_done_callback(lambda _: run.abort.set())

        async def child() -> None:
            try:
                await self._finish(owner, record.id, *await self._run_backend(run))
            finally:
                follow.cancel()
                state.delegation = None
                run.stopped.set()

        try:
            await asyncio.shield(asyncio.create_task(child()))
        except asyncio.CancelledError:
            run.abort.set()  # the child's own task writes its outcome
            raise
        return await self.status(owner, record.id) or record

    async def status(self, owner: str, task_id: str | None = None) -> TaskRecord | None:
        """The task ``task_id`` of ``owner`` (the latest one without an id), or None."""
        ledger = await self.store.read(owner)
        return ledger.get(task_id) if task_id else ledger.latest()

    async def agent_status(self, record: TaskRecord) -> dict[str, str] | None:
        """What the backend itself says of ``record`` while it runs here
        (``acp_status.py``); None: nothing beyond the record."""
        if record.state != "running":
            return None
        return await self.backend.ask_status(record)

    async def tasks(self, owner: str) -> list[TaskRecord]:
        """The owner's tasks, oldest first."""
        return (await self.store.read(owner)).ordered()

    async def cancel(self, owner: str, task_id: str | None = None) -> TaskRecord | None:
        """Cancel ``task_id`` (without an id: the latest task still queued or
        running, else the latest task). Returns the record once the
        cancellation is confirmed; a task already finished is returned as it
        is; None if there is no such task."""
        now = self._clock()

        def mark(ledger: Ledger) -> TaskRecord | None:
            if task_id:
                record = ledger.get(task_id)
            else:
                active = [r for r in ledger.ordered() if not r.final]
                record = active[-1] if active else ledger.latest()
            if record is None or record.final:
                return record
            if record.state == "queued":
                return ledger.put(dataclasses.replace(record, state="cancelled", finished_at=now))
            if record.state == "running":
                return ledger.put(dataclasses.replace(record, state="cancelling"))
            return record  # cancelling already

        record, changed = await self.store.update(owner, mark)
        self._notify(owner, changed)
        if record is None or record.state != "cancelling":
            return record
        state = self._owners.get(owner)
        runs = (state.run, state.delegation) if state is not None else ()
        run = next((r for r in runs if r is not None and r.record.id == record.id), None)
        if run is not None:
            run.abort.set()
            # The worker escalates (abort, then cancel) within two graces and
            # writes the outcome; waiting longer than that means it is stuck.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    run.stopped.wait(), 2 * self.settings.task_cancel_grace_s + 5
                )
        else:
            # Not running here (its process is gone): nothing left to stop.
            await self._finish(owner, record.id, "cancelled", None, None)
        return await self.status(owner, record.id)

    def subscribe(self, owner: str, callback: Callable[[TaskRecord], None]) -> Callable[[], None]:
        """Call ``callback`` with every changed record of ``owner``, after it
        is stored and in the order stored (a claim's renewal, which changes
        nothing shown, is not reported). Returns the function that
        unsubscribes."""
        state = self._owners.setdefault(owner, _Owner())
        state.subscribers.append(callback)
        if self._leases is not None:
            # The owner is back, maybe from a host that died running its
            # task: the watch settles that task and restarts the queue.
            self._watched.add(owner)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                state.subscribers.remove(callback)
            self._forget_if_idle(owner, state)

        return unsubscribe

    # ------------------------------------------------------------ workers

    def _ensure_worker(self, owner: str) -> None:
        state = self._owners.setdefault(owner, _Owner())
        if state.worker is None and not self._closing:
            state.worker = asyncio.create_task(self._work(owner, state), name=f"tasks {owner}")

    async def _work(self, owner: str, state: _Owner) -> None:
        try:
            while not self._closing:
                async with self._slots:  # queued until a slot is free
                    if self._closing:
                        return
                    run = await self._take_next(owner, state)
                    if run is None:
                        return
                    await self._execute(owner, state, run)
        except Exception:
            log.exception("the task worker of %r failed; the next submit restarts it", owner)
        finally:
            # Reached without an await since the ledger showed nothing queued:
            # a submit stored after that read sees no worker and starts one.
            state.worker = None
            self._forget_if_idle(owner, state)

    async def _take_next(self, owner: str, state: _Owner) -> Run | None:
        _, dead, _ = await self._runners(owner)
        now = self._clock()

        def take(ledger: Ledger) -> TaskRecord | None:
            self._recover(ledger, dead, now)
            if self._run_elsewhere(ledger):
                # Its worker goes on with the queue; if it dies, ours does.
                self._watched.add(owner)
                return None
            queued = next((r for r in ledger.ordered() if r.state == "queued"), None)
            if queued is None:
                return None
            return ledger.put(
                dataclasses.replace(queued, state="running", started_at=now, runner=self._runner)
            )

        record, changed = await self.store.update(owner, take)
        if record is None:
            return None
        # Set before any await: a cancel stored after this write finds the run.
        state.run = Run(record)
        self._notify(owner, changed)
        return state.run

    async def _execute(self, owner: str, state: _Owner, run: Run) -> None:
        try:
            outcome = await self._run_backend(run)
            await self._finish(owner, run.record.id, *outcome)
        finally:
            state.run = None
            run.stopped.set()

    async def _run_backend(self, run: Run) -> Outcome:
        async def progress(shown: dict[str, str], stage: str | None) -> None:
            try:
                await self._progress(run.record, shown, stage)
            except Exception:  # progress is a courtesy: never the run's failure
                log.exception("could not record the progress of task %s", run.record.id)

        return await run_to_outcome(
            self.settings, self.backend, run, progress, lambda: self._closing
        )

    async def _progress(
        self, record: TaskRecord, progress: dict[str, str], stage: str | None
    ) -> None:
        def change(ledger: Ledger) -> None:
            current = ledger.get(record.id)
            if current is not None and current.state == "running":
                ledger.put(dataclasses.replace(current, progress=dict(progress), stage=stage))

        _, changed = await self.store.update(record.owner, change)
        self._notify(record.owner, changed)

    async def _permission_changed(self, request: PermissionRequest, pending: bool) -> None:
        """Show (or clear) the agent's permission request on its task's card."""

        def change(ledger: Ledger) -> None:
            current = ledger.get(request.task_id)
            if current is None or current.final:
                return
            shown = current.permission is not None and current.permission.get("id") == request.id
            if pending:
                ledger.put(dataclasses.replace(current, permission=request.card()))
            elif shown:
                ledger.put(dataclasses.replace(current, permission=None))

        _, changed = await self.store.update(request.owner, change)
        self._notify(request.owner, changed)

    async def _finish(
        self,
        owner: str,
        task_id: str,
        outcome: TaskState,
        result: str | None,
        error: str | None,
        inline: str | None = None,
    ) -> None:
        now = self._clock()

        def finish(ledger: Ledger) -> None:
            record = ledger.get(task_id)
            if record is None or record.final:
                return
            if record.state == "cancelling" or outcome == "cancelled":
                # Asked to cancel: whatever the run came to, it is cancelled.
                ledger.put(
                    dataclasses.replace(record, state="cancelled", finished_at=now, permission=None)
                )
                return
            ledger.put(
                dataclasses.replace(
                    record,
                    permission=None,
                    state=outcome,
                    result=result,
                    inline=inline,
                    error=error,
                    finished_at=now,
                    # A delegation's outcome is its asker's to tell.
                    delivery="pending"
                    if outcome in DELIVERABLE_STATES and record.parent is None
                    else "none",
                )
            )

        _, changed = await self.store.update(owner, finish)
        self._notify(owner, changed)

    # ------------------------------------------------------------ subscribers

    def _notify(self, owner: str, records: list[TaskRecord]) -> None:
        state = self._owners.get(owner)
        if state is None:
            return
        for record in records:
            for callback in list(state.subscribers):
                try:
                    callback(record)
                except Exception:
                    log.exception("a task subscriber of %r failed", owner)

    def _forget_if_idle(self, owner: str, state: _Owner) -> None:
        idle = state.worker is None and state.run is None and not state.subscribers
        if idle and self._owners.get(owner) is state:
            del self._owners[owner]
