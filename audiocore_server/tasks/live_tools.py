"""The live agent's task tools: ordinary server tools that answer at once.

``start_task``, ``get_task_status`` and ``cancel_task`` are built bound to a
``TaskManager`` (no module state); their signatures and docstrings are what
the live model is told. They find the task owner in the session state
(``task_owner``, written by the connection: a stable per-user key, so a new
voice connection continues the same tasks), else the session's own owner,
``session_owner(user id, session id)``: session ids are unique per ADK user
only, and clients of ADK's API choose theirs.

The owner key is a capability: anyone whose session state names it sees and
cancels its tasks. Clients of ADK's session API write their sessions' state,
so the key must be unguessable (or ``owner_of`` must not trust such sessions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from google.adk.events import Event, EventActions
from google.adk.sessions import BaseSessionService, Session
from google.adk.tools.tool_context import ToolContext

from ..gate.owners import session_owner
from ..storage.session_access import session_history
from ..storage.state_keys import OWNER_STATE_KEY, TIME_ZONE_STATE_KEY
from .acp_permissions import PROMPT_PREFIX
from .envelope import SERVER_TURN_PREFIXES, voice_context
from .records import TaskRecord

if TYPE_CHECKING:
    from .manager import TaskManager

OwnerOf = Callable[[ToolContext], str]


async def write_owner(service: BaseSessionService, session: Session, owner: str | None) -> None:
    """``owner`` into the session's state (``task_owner``: its tools' and its
    memory's owner; None: none) unless it is there already. Before the run,
    which reads it (the model's instruction included)."""
    if session.state.get(OWNER_STATE_KEY) != owner:
        delta = {OWNER_STATE_KEY: owner}
        await service.append_event(
            session, Event(author="user", actions=EventActions(state_delta=delta))
        )


def owner_from_context(tool_context: ToolContext) -> str:
    """The task owner of the session a tool runs in."""
    owner = tool_context.state.get(OWNER_STATE_KEY)
    if isinstance(owner, str) and owner:
        return owner
    session = tool_context.session
    return session_owner(session.user_id, session.id)


def describe(record: TaskRecord, tasks: list[TaskRecord]) -> dict[str, Any]:
    """What the model is told about ``record`` (``tasks``: its owner's tasks)."""
    found: dict[str, Any] = {
        "taskId": record.id,
        "state": record.state,
        "objective": record.objective,
    }
    if record.project:
        found["project"] = record.project
    if record.state == "queued":
        found["tasksAhead"] = sum(
            1
            for t in tasks
            if t.seq < record.seq and t.state in ("queued", "running", "cancelling")
        )
    if record.progress:
        found["progress"] = dict(record.progress)
    if record.result is not None:
        found["result"] = record.result
    if record.error is not None:
        found["reason"] = record.error
    return found


def build_live_tools(
    manager: TaskManager, owner_of: OwnerOf | None = None
) -> list[Callable[..., Any]]:
    owner_of = owner_of or owner_from_context

    async def started(
        objective: str, tool_context: ToolContext, project: str | None
    ) -> dict[str, Any]:
        owner = owner_of(tool_context)
        time_zone = tool_context.state.get(TIME_ZONE_STATE_KEY)
        context = voice_context(
            session_history(tool_context.session),
            time_zone if isinstance(time_zone, str) else None,
            manager.settings.language,
        )
        try:
            record = await manager.submit(owner, objective, context, project)
        except (TypeError, ValueError, RuntimeError) as exc:
            return {"error": str(exc)}
        found = describe(record, await manager.tasks(owner))
        ahead = found.get("tasksAhead", 0)
        found["message"] = (
            f"Task {record.id} started; the result will be told when it is ready."
            if not ahead
            else f"Task {record.id} is queued behind {ahead} other task(s)."
        )
        return found

    async def start_task(objective: str, tool_context: ToolContext) -> dict[str, Any]:
        """Starts a background task and returns at once with its id; the
        conversation goes on while it runs, and its result is told to the user
        when it is ready. Use it for work that takes a while, such as adding up
        a column of a file, counting the words in a file, or waiting.

        Args:
          objective: What the task should do, in one or two plain sentences.
        """
        return await started(objective, tool_context, None)

    async def start_project_task(
        objective: str, project: str, tool_context: ToolContext
    ) -> dict[str, Any]:
        """Starts a background task in one of the user's projects (a folder
        the agent works in, with its own session), as start_task does.

        Args:
          objective: What the task should do, in one or two plain sentences.
          project: The project's name as the user says it, e.g. "website".
        """
        return await started(objective, tool_context, project)

    async def get_task_status(tool_context: ToolContext, task_id: str = "") -> dict[str, Any]:
        """Returns the state of a background task (queued, running, completed,
        failed, cancelling or cancelled), what it is doing, and its result;
        for a running task also, under "agent", what the agent working on it
        says of its progress and its interim results.

        Args:
          task_id: The task's id from start_task; leave it out for the latest task.
        """
        owner = owner_of(tool_context)
        tasks = await manager.tasks(owner)
        record = await manager.status(owner, task_id or None)
        found = _found_or_error(record, task_id, tasks)
        if record is not None:
            agent = await manager.agent_status(record)
            if agent is not None:
                found["agent"] = agent  # the agent's own word, beside our record
        return found

    async def cancel_task(tool_context: ToolContext, task_id: str = "") -> dict[str, Any]:
        """Cancels a background task and returns once it is stopped. A task
        that already finished is left as it is.

        Args:
          task_id: The task's id from start_task; leave it out for the latest
            task that is still queued or running.
        """
        owner = owner_of(tool_context)
        record = await manager.cancel(owner, task_id or None)
        return _found_or_error(record, task_id, await manager.tasks(owner))

    async def respond_agent_permission(decision: str, tool_context: ToolContext) -> dict[str, Any]:
        """Answers the permission request a background task's agent asked,
        with the user's own decision. Call it only when the user has just
        answered that request, never on your own.

        Args:
          decision: "always" to allow it (for the rest of the task's session
            when the agent offers that), or "reject".
        """
        owner = owner_of(tool_context)
        events = tool_context.session.events
        return manager.permissions.respond(
            owner, decision, lambda request_id: heard_after(events, request_id)
        )

    tools: list[Callable[..., Any]] = [start_task, get_task_status, cancel_task]
    if manager.settings.task_backend == "acp":
        tools.append(respond_agent_permission)
        if manager.settings.acp_projects_root is not None:  # declared only with projects
            tools.append(start_project_task)
    return tools


def heard_after(events: list[Event], request_id: str) -> bool:
    """Whether the user typed or spoke in this session after the permission
    request ``request_id`` was told in it, and last: the model may answer a
    request only with the user's own words of the current turn."""
    marker = f"{PROMPT_PREFIX}{request_id} "
    told_at = last_user_at = None
    for index, event in enumerate(events):
        if event.partial:
            continue
        if event.input_transcription and event.input_transcription.text:
            last_user_at = index
            continue
        if event.author != "user" or not event.content or not event.content.parts:
            continue
        text = "".join(p.text or "" for p in event.content.parts)
        if text.startswith(marker):
            told_at = index
        elif text.strip() and not text.startswith(SERVER_TURN_PREFIXES):
            last_user_at = index
    return told_at is not None and last_user_at is not None and last_user_at > told_at


def _found_or_error(
    record: TaskRecord | None, task_id: str, tasks: list[TaskRecord]
) -> dict[str, Any]:
    if record is not None:
        return describe(record, tasks)
    if not task_id:
        return {"error": "there are no tasks yet"}
    known = ", ".join(t.id for t in tasks[-10:]) or "none"
    return {"error": f"no task {task_id!r}; the latest tasks are: {known}"}
