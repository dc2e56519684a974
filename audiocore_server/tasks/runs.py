"""One backend run of a task, from start to outcome (``manager.py``'s worker).

``Run`` is a task being run here: its abort signal (a cancel), and the
event set once its outcome is written. ``run_to_outcome`` runs the backend
for it within ``task_timeout_s``, aborts and then cancels it if it does not
stop, and turns whatever came of it into (state, result, error, inline).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from google.adk.agents.invocation_context import LlmCallsLimitExceededError

from ..settings import Settings
from .adk_backend import Progress
from .backends import TaskBackend
from .records import TaskRecord, TaskState

STOPPED = "the server stopped while this task was running"

Outcome = tuple[TaskState, str | None, str | None, str | None]

log = logging.getLogger(__name__)


@dataclasses.dataclass(eq=False)
class Run:
    record: TaskRecord
    abort: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    stopped: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    task: asyncio.Task[Any] | None = None


async def run_to_outcome(
    settings: Settings,
    backend: TaskBackend,
    run: Run,
    progress: Progress,
    closing: Any,
) -> Outcome:
    """Run ``backend`` for ``run``; its outcome: (state, result, error,
    inline: the part of the result shown rather than said). ``closing()``:
    whether the server is stopping."""
    task = run.task = asyncio.create_task(backend.run(run.record, run.abort, progress))
    task.add_done_callback(_consume_exception)
    aborted = asyncio.create_task(run.abort.wait())
    timeout = settings.task_timeout_s
    try:
        done, _ = await asyncio.wait(
            {task, aborted}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        aborted.cancel()
    timed_out = not done
    if not task.done():
        # Abort first (ADK seals the backend session), then cancel.
        grace = settings.task_cancel_grace_s
        run.abort.set()
        await asyncio.wait({task}, timeout=grace)
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=grace)
    if closing():
        return "failed", None, STOPPED, None
    if timed_out:
        return "failed", None, f"the task took longer than {timeout:g} seconds", None
    if run.abort.is_set():
        return "cancelled", None, None, None
    if not task.done() or task.cancelled():
        return "failed", None, "the backend run was stopped", None
    error = task.exception()
    if isinstance(error, LlmCallsLimitExceededError):
        steps = settings.max_task_steps
        return "failed", None, f"the task needed more than {steps} model steps", None
    if error is not None:
        log.error("task %s: the backend failed", run.record.id, exc_info=error)
        return "failed", None, f"the backend failed ({type(error).__name__})", None
    outcome = task.result()
    if outcome.failure is not None:
        return "failed", None, outcome.failure, None
    return "completed", outcome.result, None, outcome.inline


def _consume_exception(task: asyncio.Task[Any]) -> None:
    # Read here so a run abandoned after the grace never logs "never retrieved".
    if not task.cancelled():
        task.exception()
