"""The turns of conversations, stored in their owner's memory as they end
(``store_to_memory``): ADK plugins, one on the live runner's events, one on
the HTTP chat's runs.

The session's history may be trimmed in memory (``history.py``) but never
within a turn, and a turn's events are few: reading back to the previous
``turn_complete`` costs a turn's length.

A turn is a final event with typed text, or with ``persist_transcripts`` a
finished transcription of speech (the user's or the model's). Partial
events, audio and tool traffic are not stored. A session without an owner
(``memory_tool.owner_of``) stores nothing; an event stored before (ADK may
replay it) is skipped. The HTTP chat's runs (``run_async``) have no
``turn_complete``: a run is a turn, stored as it ends.
"""

from __future__ import annotations

import logging

from google.adk.agents.invocation_context import InvocationContext
from google.adk.events.event import Event
from google.adk.plugins.base_plugin import BasePlugin

from .store import MemoryStore
from .tool import owner_of

log = logging.getLogger(__name__)


class TurnRecorder(BasePlugin):
    """At each turn's end (``turn_complete``), the session's events since the
    previous turn's end: the user's typed turns reach the session, not the
    runner's events, so the session is read, not the stream."""

    def __init__(self, store: MemoryStore, *, transcripts: bool) -> None:
        super().__init__(name="audiocore_memory_turns")
        self._store = store
        self._transcripts = transcripts

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        if not event.turn_complete:
            return None
        session = invocation_context.session
        owner = owner_of(session.state, session.user_id)
        if owner is None:
            return None
        turn = []
        for earlier in reversed(session.events):  # the turn's own events, back to the last end
            if earlier.turn_complete:
                break
            turn.append(earlier)
        try:
            await self._store.add_turns(owner, turn[::-1], transcripts=self._transcripts)
        except Exception:  # the conversation goes on; the turn is not kept
            log.warning("memory: a turn was not stored", exc_info=True)
        return None


class ChatTurnRecorder(BasePlugin):
    """At the end of each HTTP chat run, the events of its invocation: the
    user's message and the model's final text."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(name="audiocore_memory_chat_turns")
        self._store = store

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        session = invocation_context.session
        owner = owner_of(session.state, session.user_id)
        if owner is None:
            return
        run = [e for e in session.events if e.invocation_id == invocation_context.invocation_id]
        try:
            await self._store.add_turns(owner, run, transcripts=False)
        except Exception:  # the chat goes on; the turn is not kept
            log.warning("memory: a chat turn was not stored", exc_info=True)
