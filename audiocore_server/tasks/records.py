"""A background task's record: what it is, where it stands, and whether the
user has heard its outcome.

States::

    queued ──► running ──► completed | failed
       │          │
       │          └──► cancelling ──► cancelled    (the run stopped, then confirmed)
       └──► cancelled                              (never ran)

Delivery (of a completed or failed task's outcome to the user)::

    none ──► pending ──► claimed ──► delivered
                ▲           │
                └───────────┤ postponed, or the claim expired
                            └──► failed            (past the attempts allowed)

``none`` is every task that has nothing to deliver (yet): queued, running,
cancelling, cancelled. Records are plain JSON in the ledger's session state
(``store.py``), so they read back the same from any ADK session database.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, cast, get_args

from ..wire import chunks

TaskState = Literal["queued", "running", "completed", "failed", "cancelling", "cancelled"]
Delivery = Literal["none", "pending", "claimed", "delivered", "failed"]

TASK_STATES: tuple[TaskState, ...] = get_args(TaskState)
DELIVERIES: tuple[Delivery, ...] = get_args(Delivery)
# A task in one of these will not change state again.
FINAL_STATES: frozenset[TaskState] = frozenset({"completed", "failed", "cancelled"})
# Work that is still to do or being done.
ACTIVE_STATES: frozenset[TaskState] = frozenset({"queued", "running", "cancelling"})
# Outcomes the user should hear.
DELIVERABLE_STATES: frozenset[TaskState] = frozenset({"completed", "failed"})

MAX_PROGRESS_DETAIL = 160  # characters of a progress detail (a tool's arguments)
MAX_INLINE_CHARS = 8000  # a result's part shown on the timeline (Markdown)
MAX_OWNER_CHARS = 512
MAX_CLAIMANT_CHARS = 256


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, marked with "…" when cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def check_text(name: str, value: object, limit: int) -> str:
    """``value``, a string of 1 to ``limit`` characters (an owner, a claimant)."""
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a string, got {type(value).__name__}")
    if not value or len(value) > limit:
        raise ValueError(f"{name}: expected 1 to {limit} characters, got {len(value)}")
    return value


def check_objective(objective: object, limit: int) -> str:
    """``objective`` stripped, if it describes some work in 1 to ``limit`` characters."""
    if not isinstance(objective, str):
        raise TypeError(f"objective: expected a string, got {type(objective).__name__}")
    text = objective.strip()
    if not text:
        raise ValueError("objective: expected a description of the work, got an empty one")
    if len(text) > limit:
        raise ValueError(f"objective: expected at most {limit} characters, got {len(text)}")
    return text


@dataclasses.dataclass(frozen=True)
class TaskRecord:
    id: str
    owner: str
    objective: str
    state: TaskState
    created_at: float
    started_at: float | None
    finished_at: float | None
    result: str | None
    error: str | None
    progress: dict[str, str] | None  # {"tool": name, "detail": bounded, user-safe text}
    delivery: Delivery
    # Beyond the public shape: the FIFO order within the owner, the
    # delivery bookkeeping (a claim is held by ``claimant`` until
    # ``claim_expires_at``, wall-clock seconds; ``attempts`` counts claims).
    seq: int = 0
    attempts: int = 0
    claimant: str | None = None
    claim_expires_at: float | None = None
    # The server process running it (its lease owner id, ``leases.py``),
    # set when it starts: alive while that process's heartbeat is.
    runner: str | None = None
    # The finer stage of a running task ("delegated": an external agent
    # works on it; "finalizing": its answer is in), and the agent's
    # permission request waiting for the user ({id, title}), if any.
    stage: str | None = None
    permission: dict[str, str] | None = None
    # What the backend is told besides the objective (``envelope.py``):
    # the recent voice turns, the user's time zone and language.
    context: dict[str, Any] | None = None
    # A completed task's part to show rather than say: Markdown (code,
    # links, lists) from an external agent, redacted and bounded; the live
    # connection puts it on the client's timeline when the outcome is told.
    inline: str | None = None
    # The project it works in (a directory under ``acp_projects_root``,
    # ``projects.py``); a delegation's asking task and the correlation id
    # its result goes back under (``coordination.py``).
    project: str | None = None
    parent: str | None = None
    correlation: str | None = None

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    def card(self) -> chunks.TaskCard:
        """The ``data-task`` chunk the client sees (reconciled by ``id``)."""
        return chunks.TaskCard(
            id=self.id,
            state=self.state,
            objective=self.objective,
            stage=self.stage,
            permission=self.permission,
            progress=self.progress,
            result=self.result,
            error=self.error,
            delivery=self.delivery,
        )

    def to_state(self) -> dict[str, Any]:
        """The record as JSON for the session state."""
        return dataclasses.asdict(self)

    @classmethod
    def from_state(cls, value: Any) -> TaskRecord:
        """A record read back from the session state; ``ValueError`` if it is
        not one (a damaged or foreign entry)."""
        if not isinstance(value, dict):
            raise ValueError(f"expected a task record object, got {type(value).__name__}")
        known = {field.name for field in dataclasses.fields(cls)}
        try:
            record = cls(**{k: v for k, v in value.items() if k in known})
        except TypeError as exc:
            raise ValueError(f"task record: {exc}") from None
        if record.state not in TASK_STATES:
            raise ValueError(f"task record: unknown state {record.state!r}")
        if record.delivery not in DELIVERIES:
            raise ValueError(f"task record: unknown delivery {record.delivery!r}")
        if record.progress is not None:
            progress = cast(dict[str, Any], record.progress)
            record = dataclasses.replace(
                record, progress={str(k): str(v) for k, v in progress.items()}
            )
        if record.permission is not None and not isinstance(record.permission, dict):
            raise ValueError("task record: permission is not an object")
        if record.context is not None and not isinstance(record.context, dict):
            raise ValueError("task record: context is not an object")
        for name in ("inline", "project", "parent", "correlation"):
            if getattr(record, name) is not None and not isinstance(getattr(record, name), str):
                raise ValueError(f"task record: {name} is not a string")
        return record
