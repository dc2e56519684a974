"""The turns of live conversations, stored in their owner's memory as they
end (``store_to_memory``): an ADK plugin on the runner's events.

A turn is a final event with typed text, or with ``persist_transcripts`` a
finished transcription of speech (the user's or the model's). Partial
events, audio and tool traffic are not stored. A session without an owner
(``memory_tool.owner_of``) stores nothing; an event stored before (ADK may
replay it) is skipped.
"""

from __future__ import annotations

import logging

from google.adk.agents.invocation_context import InvocationContext
from google.adk.events.event import Event
from google.adk.plugins.base_plugin import BasePlugin

from .memory_store import MemoryStore
from .memory_tool import owner_of

log = logging.getLogger(__name__)


class TurnRecorder(BasePlugin):
    """At each event of a run, the session's events not stored yet (the
    user's typed turns reach the session, not the runner's events) and the
    event itself; a run's mark is dropped as it ends."""

    def __init__(self, store: MemoryStore, *, transcripts: bool) -> None:
        super().__init__(name="audiocore_memory_turns")
        self._store = store
        self._transcripts = transcripts
        self._stored_until: dict[str, float] = {}  # invocation id → last event's time

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        if event.partial or not (
            event.turn_complete or event.content or event.output_transcription
        ):
            return None
        session = invocation_context.session
        owner = owner_of(session.state, session.user_id)
        if owner is None:
            return None
        invocation = invocation_context.invocation_id
        since = self._stored_until.get(invocation, 0.0)
        new = [e for e in session.events if e.timestamp > since]
        if event.timestamp > since and event not in new:
            new.append(event)
        if not new:
            return None
        self._stored_until[invocation] = max(e.timestamp for e in new)
        try:
            await self._store.add_turns(owner, new, transcripts=self._transcripts)
        except Exception:  # the conversation goes on; the turns are not kept
            log.warning("memory: turns were not stored", exc_info=True)
        return None

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        self._stored_until.pop(invocation_context.invocation_id, None)
