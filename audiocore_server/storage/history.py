"""A bound on the history an open session holds in memory.

ADK appends every event it stores to the open session's ``events`` list
(``BaseSessionService.append_event``) and keeps that list for as long as the
live run lasts: a voice session of short turns grows by about 11 kB of
pydantic objects a turn (two or three transcription and turn events), hour
after hour, although every one of them is already in the session store.

``BoundedLiveHistory`` keeps the newest ``keep`` events of an open session
and, of the older ones, every event ADK may still look for during the run:
tool calls and their answers (matched by id when an answer arrives),
long-running calls, events carrying actions (state, transfers, agent state,
confirmations, compaction, rewinds) and scoped events. What goes is plain
conversation — transcriptions, text, turn ends — which the live flow reads
only when a run starts, and then from the store. (A run restarted by an
after-model callback that blocks the model's output would rebuild its
request from the bounded list; this server installs no such callback.) The
store itself keeps everything; a session loaded again has its whole
history.
"""

from __future__ import annotations

import functools
from typing import Any

from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session


def _still_looked_for(event: Event) -> bool:
    """Whether ADK may look this event up later in the run."""
    if event.get_function_calls() or event.get_function_responses():
        return True
    if event.long_running_tool_ids or event.isolation_scope or event.output is not None:
        return True
    actions = event.actions
    return any(getattr(actions, name) for name in type(actions).model_fields)


def bound_history(events: list[Event], keep: int) -> None:
    """Trim ``events`` in place once it holds ``2 * keep`` or more since the
    last trim: the newest ``keep`` stay, and the older events ADK may still
    look for. Runs once every ``keep`` appends, so its cost per event is
    constant."""
    if keep <= 0 or len(events) < 2 * keep or len(events) % keep:
        return
    events[:-keep] = [event for event in events[:-keep] if _still_looked_for(event)]


class BoundedLiveHistory(BaseSessionService):
    """Mixin for a session service: after each stored event, the session's
    in-memory ``events`` are bounded by ``live_history_events``."""

    live_history_events = 0  # 0: keep every event

    async def append_event(self, session: Session, event: Event) -> Event:
        stored = await super().append_event(session, event)
        bound_history(session.events, self.live_history_events)
        return stored


@functools.cache
def _database_service_class() -> type[BoundedLiveHistory]:
    # Imported on first use: it needs SQLAlchemy (the `db` dependency group).
    from google.adk.sessions import DatabaseSessionService

    class BoundedDatabaseSessionService(BoundedLiveHistory, DatabaseSessionService):
        """ADK's database session service with the bounded live history."""

    return BoundedDatabaseSessionService


def database_session_service(db_url: str, live_history_events: int) -> BaseSessionService:
    """ADK's ``DatabaseSessionService`` on ``db_url``, bounded as above."""
    factory: Any = _database_service_class()
    service: BoundedLiveHistory = factory(db_url=db_url)
    service.live_history_events = live_history_events
    return service
