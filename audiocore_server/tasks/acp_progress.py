"""An ACP prompt's progress as the user sees it: a phrase, never the agent's words.

The card shows a small fixed vocabulary (``PHRASES``), chosen by the kind
of the agent's activity — the ``kind`` of its tool calls (read, edit,
delete, move, search, execute, think, fetch, other), its thoughts, its plan,
and its answer streaming in ("organizing result"). What the agent wrote —
tool titles, plan entries, its text — may name files, people or secrets:
it goes to the server's log only (redacted, bounded), never to the card.

Updates come by the thousand: ``PromptRun.update`` coalesces them, showing
the first at once and then the latest at most every ``PROGRESS_EVERY_S``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from .records import MAX_PROGRESS_DETAIL
from .redact import screened

PROGRESS_EVERY_S = 0.25
MAX_TOOL_KINDS = 1000  # tool calls of a prompt whose kind is remembered
WORKING = "working"
STARTING = "starting"
ORGANIZING = "organizing result"
# The agent's activity kind (ACP ToolKind, and ours for the rest) -> phrase.
PHRASES: dict[str, str] = {
    "read": "reading files",
    "edit": "editing files",
    "delete": "deleting files",
    "move": "moving files",
    "search": "searching",
    "execute": "running commands",
    "think": "thinking",
    "fetch": "fetching",
    "plan": "planning",
    "message": ORGANIZING,
}
# Every phrase a card may show, and nothing else.
VOCABULARY: frozenset[str] = frozenset({*PHRASES.values(), WORKING, STARTING})

# The card's progress ({"phrase": …}) and stage.
CardProgress = Callable[[dict[str, str], str | None], Awaitable[None]]

log = logging.getLogger(__name__)


def phrase(kind: str | None) -> str:
    """The card's words for an activity ``kind`` ("working" for any other)."""
    return PHRASES.get(kind or "", WORKING)


@dataclasses.dataclass(eq=False)
class PromptRun:
    """One prompt under way in a session: whose task, and what it collects.

    Its progress is coalesced (``update``): shown at once when none was
    shown for ``PROGRESS_EVERY_S``, else the latest is kept and shown when
    that time is up (by a task of its own); ``close`` ends that before the
    task's last progress is written."""

    owner: str
    task_id: str
    progress: CardProgress
    answer: list[str] = dataclasses.field(default_factory=list)
    answer_chars: int = 0
    shown_at: float = float("-inf")
    latest: tuple[str, str | None] | None = None  # (kind, raw words); None: the answer's tail
    kinds: dict[str, str] = dataclasses.field(default_factory=dict)  # tool call id -> kind
    _later: asyncio.Task[None] | None = None
    _waiting: bool = False  # ``_later`` still sleeps (not yet writing)
    closed: bool = False

    def text(self) -> str:
        return "".join(self.answer)

    def tool_kind(self, call_id: str, kind: str | None) -> str:
        """A tool call's kind: as given, else as its start gave it (an
        update of a tool call usually carries its status alone)."""
        if kind:
            if len(self.kinds) < MAX_TOOL_KINDS:
                self.kinds[call_id] = kind
            return kind
        return self.kinds.get(call_id, "other")

    async def update(self, kind: str, words: str | None) -> None:
        """The agent is doing ``kind``, saying ``words`` (None: the answer)."""
        self.latest = (kind, words)
        if self._later is not None or self.closed:
            return
        wait = self.shown_at + PROGRESS_EVERY_S - time.monotonic()
        if wait <= 0:
            await self._show()
        else:
            self._waiting = True
            self._later = asyncio.create_task(self._show_later(wait))

    async def _show_later(self, wait: float) -> None:
        await asyncio.sleep(wait)
        self._waiting = False
        try:
            await self._show()
        finally:
            self._later = None

    async def _show(self) -> None:
        if self.latest is None or self.closed:
            return
        kind, words = self.latest
        self.latest = None
        self.shown_at = time.monotonic()
        if words is None:
            words = self.text()[-MAX_PROGRESS_DETAIL:]
        # The agent's words for the log, its activity's phrase for the card.
        log.info("task %s: agent %s: %s", self.task_id, kind, screened(words, MAX_PROGRESS_DETAIL))
        await self.progress({"phrase": phrase(kind)}, "delegated")

    async def close(self) -> None:
        """No more progress from the agent: a wait is dropped, a write under
        way finishes first."""
        self.closed = True
        later = self._later
        if later is None:
            return
        if self._waiting:
            later.cancel()
        await asyncio.gather(later, return_exceptions=True)
