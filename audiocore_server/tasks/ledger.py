"""Task records in the ADK session database: one ledger session per owner.

The records live in the state of a session of their own (app
``<app_name>-tasks``, user ``tasks``, id ``ledger-<hash of the owner>``), so
they are stored by whatever ``BaseSessionService`` the server runs on —
SQLite or any ADK database URL — and the session REST routes, which serve
only the live app, never reach them. Each record is one state key
(``task:<id>``), so a change writes that record only.

There is one writer per owner in this process: every change takes the
owner's lock, reads the ledger fresh, applies a pure function to it and
appends one event carrying the state delta. A write that still finds the
ledger changed under it (another process) is retried on a fresh read.

Every write is also an event row; after ``compact_every`` writes the ledger
is recreated with its current state alone, which keeps a long-lived owner's
ledger from growing without bound.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import hashlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from google.adk.errors import StaleSessionError
from google.adk.events import Event, EventActions
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig

from .records import TaskRecord

TASKS_USER = "tasks"
LEDGER_PREFIX = "ledger-"
BACKEND_PREFIX = "backend-"
_RECORD_PREFIX = "task:"
_OWNER_KEY = "owner"
_SEQ_KEY = "next_seq"
# The owner's sessions on ACP agents, by agent (``acp_backend.py``):
# {agent key: {"session": id, "untold": [cancelled task not yet told]}}.
# (``acp_session``, one id whatever the agent, is no longer read.)
_ACP_KEY = "acp_sessions"
MAX_UNTOLD_CANCELS = 10  # cancelled tasks kept to tell an agent (the latest)
_STALE_RETRIES = 3
_T = TypeVar("_T")

log = logging.getLogger(__name__)


def tasks_app_name(app_name: str) -> str:
    """The app the task sessions live under: never the live app's."""
    return f"{app_name}-tasks"


def _digest(owner: str) -> str:
    # Owners are arbitrary strings (a user key, "session:<id>"); session ids
    # are not. A hash gives a stable id of a safe shape for both sessions.
    return hashlib.sha256(owner.encode()).hexdigest()[:40]


def ledger_session_id(owner: str) -> str:
    return LEDGER_PREFIX + _digest(owner)


def backend_session_id(owner: str) -> str:
    """The owner's persistent backend session (the backend agent's context)."""
    return BACKEND_PREFIX + _digest(owner)


@dataclasses.dataclass
class Ledger:
    """An owner's records as read at one moment; changes are collected."""

    owner: str
    next_seq: int
    records: dict[str, TaskRecord]
    acp: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    _changed: dict[str, TaskRecord | None] = dataclasses.field(default_factory=dict)
    _acp_changed: bool = False

    @classmethod
    def from_state(cls, owner: str, state: dict[str, Any]) -> Ledger:
        records = {}
        for key, value in state.items():
            if not key.startswith(_RECORD_PREFIX) or value is None:
                continue  # None: a record dropped since the last compaction
            try:
                record = TaskRecord.from_state(value)
            except ValueError as exc:
                log.warning("task ledger of %r: skipping %s: %s", owner, key, exc)
                continue
            records[record.id] = record
        next_seq = state.get(_SEQ_KEY)
        if not isinstance(next_seq, int):
            next_seq = max((r.seq for r in records.values()), default=-1) + 1
        acp = state.get(_ACP_KEY)
        if not isinstance(acp, dict):
            acp = {}
        # A copy: the session service's own state is never changed in place.
        agents = {
            k: copy.deepcopy(v)
            for k, v in acp.items()
            if isinstance(k, str) and isinstance(v, dict)
        }
        return cls(owner, next_seq, records, agents)

    def ordered(self) -> list[TaskRecord]:
        """Oldest first (submission order)."""
        return sorted(self.records.values(), key=lambda r: r.seq)

    def latest(self) -> TaskRecord | None:
        return max(self.records.values(), key=lambda r: r.seq, default=None)

    def get(self, task_id: str) -> TaskRecord | None:
        return self.records.get(task_id)

    def take_seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def put(self, record: TaskRecord) -> TaskRecord:
        self.records[record.id] = record
        self._changed[record.id] = record
        return record

    def drop(self, task_id: str) -> None:
        if self.records.pop(task_id, None) is not None:
            self._changed[task_id] = None

    def make_room(self, max_records: int) -> None:
        """Make room for one more record: drop the oldest settled ones
        (cancelled, or delivered or given up), then the oldest unheard ones."""
        excess = len(self.records) + 1 - max_records
        if excess <= 0:
            return
        finished = [r for r in self.ordered() if r.final]
        settled = [
            r for r in finished if r.state == "cancelled" or r.delivery in ("delivered", "failed")
        ]
        unheard = [r for r in finished if r not in settled]
        for record in (settled + unheard)[:excess]:
            if record in unheard:
                log.warning(
                    "task %s of %r dropped before it was delivered", record.id, record.owner
                )
            self.drop(record.id)

    def acp_session(self, agent: str) -> str | None:
        """The owner's session on the ACP agent ``agent`` (its key), if any."""
        session = self.acp.get(agent, {}).get("session")
        return session if isinstance(session, str) else None

    def set_acp_session(self, agent: str, session_id: str) -> None:
        self._acp_entry(agent)["session"] = session_id

    def untold_cancels(self, agent: str) -> list[dict[str, str]]:
        """The tasks cancelled while ``agent`` worked on them that it was
        not told of yet ({id, objective}), oldest first."""
        untold = self.acp.get(agent, {}).get("untold")
        if not isinstance(untold, list):
            return []
        return [
            {"id": str(u.get("id")), "objective": str(u.get("objective"))}
            for u in untold
            if isinstance(u, dict)
        ]

    def add_untold_cancel(self, agent: str, task_id: str, objective: str) -> None:
        untold = [u for u in self.untold_cancels(agent) if u["id"] != task_id]
        untold.append({"id": task_id, "objective": objective})
        self._acp_entry(agent)["untold"] = untold[-MAX_UNTOLD_CANCELS:]

    def mark_told(self, agent: str, task_ids: list[str]) -> None:
        """The agent was told of these cancellations: never again."""
        untold = self.untold_cancels(agent)
        if any(u["id"] in task_ids for u in untold):
            self._acp_entry(agent)["untold"] = [u for u in untold if u["id"] not in task_ids]

    def _acp_entry(self, agent: str) -> dict[str, Any]:
        self._acp_changed = True
        return self.acp.setdefault(agent, {})

    @property
    def changed(self) -> list[TaskRecord]:
        return [r for r in self._changed.values() if r is not None]

    def delta(self) -> dict[str, Any]:
        if not self._changed and not self._acp_changed:
            return {}
        delta: dict[str, Any] = {
            _RECORD_PREFIX + task_id: None if record is None else record.to_state()
            for task_id, record in self._changed.items()
        }
        delta[_SEQ_KEY] = self.next_seq
        if self._acp_changed:
            delta[_ACP_KEY] = copy.deepcopy(self.acp)
        return delta

    def full_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {_OWNER_KEY: self.owner, _SEQ_KEY: self.next_seq}
        if self.acp:
            state[_ACP_KEY] = copy.deepcopy(self.acp)
        for record in self.records.values():
            state[_RECORD_PREFIX + record.id] = record.to_state()
        return state


class TaskStore:
    def __init__(
        self, session_service: BaseSessionService, app_name: str, *, compact_every: int = 500
    ) -> None:
        self.session_service = session_service
        self.app_name = tasks_app_name(app_name)
        self.compact_every = compact_every
        self._locks: dict[str, asyncio.Lock] = {}
        self._writes: dict[str, int] = {}  # per owner, since the last compaction

    async def read(self, owner: str) -> Ledger:
        """The owner's ledger now (empty if it has none)."""
        async with self._lock(owner):  # not in the middle of a compaction
            session = await self._get(owner)
        return Ledger.from_state(owner, session.state if session else {})

    async def update(
        self, owner: str, change: Callable[[Ledger], _T]
    ) -> tuple[_T, list[TaskRecord]]:
        """Apply ``change`` to the owner's ledger as it is now and store what
        it changed. Returns ``change``'s value and the changed records.

        ``change`` must only read and change the ledger: it runs again on a
        fresh read if another writer got there first.
        """
        async with self._lock(owner):
            for _ in range(_STALE_RETRIES):
                session = await self._get(owner) or await self._create(owner)
                ledger = Ledger.from_state(owner, session.state)
                value = change(ledger)
                delta = ledger.delta()
                if not delta:
                    return value, []
                event = Event(author=TASKS_USER, actions=EventActions(state_delta=delta))
                try:
                    await self.session_service.append_event(session, event)
                except StaleSessionError:
                    continue
                await self._count_write(owner, ledger)
                return value, ledger.changed
        raise RuntimeError(
            f"the task ledger of {owner!r} kept changing under this writer "
            f"({_STALE_RETRIES} attempts): is another server process running its tasks?"
        )

    async def set_acp_session(self, owner: str, agent: str, session_id: str) -> None:
        """Keep the owner's session id on the agent ``agent`` (its later
        tasks there continue it)."""
        await self.update(owner, lambda ledger: ledger.set_acp_session(agent, session_id))

    async def owners(self) -> list[str]:
        """Every owner with a ledger."""
        found = await self.session_service.list_sessions(app_name=self.app_name, user_id=TASKS_USER)
        owners = []
        for session in found.sessions:
            owner = session.state.get(_OWNER_KEY)
            if session.id.startswith(LEDGER_PREFIX) and isinstance(owner, str):
                owners.append(owner)
        return owners

    def _lock(self, owner: str) -> asyncio.Lock:
        return self._locks.setdefault(owner, asyncio.Lock())

    async def _get(self, owner: str) -> Session | None:
        # The state is all we need: no events (they are the ledger's history).
        return await self.session_service.get_session(
            app_name=self.app_name,
            user_id=TASKS_USER,
            session_id=ledger_session_id(owner),
            config=GetSessionConfig(num_recent_events=0),
        )

    async def _create(self, owner: str, state: dict[str, Any] | None = None) -> Session:
        return await self.session_service.create_session(
            app_name=self.app_name,
            user_id=TASKS_USER,
            session_id=ledger_session_id(owner),
            state=state or {_OWNER_KEY: owner, _SEQ_KEY: 0},
        )

    async def _count_write(self, owner: str, ledger: Ledger) -> None:
        writes = self._writes.get(owner, 0) + 1
        if writes < self.compact_every:
            self._writes[owner] = writes
            return
        self._writes[owner] = 0
        # Recreate the ledger with its state alone. Between the two calls the
        # ledger does not exist: the caller holds the owner's lock, which
        # keeps this process's readers and writers out.
        await self.session_service.delete_session(
            app_name=self.app_name, user_id=TASKS_USER, session_id=ledger_session_id(owner)
        )
        await self._create(owner, ledger.full_state())
