"""Telling the user a background task's outcome, at a safe moment.

A live connection runs one ``TaskDelivery`` for its task owner. When a task
of that owner has finished (completed or failed) and the line is free — the
user is not speaking, no answer is playing or on its way, no tool approval
is open — it claims the task (``TaskManager.deliveries``: a renewable
claim, so two connections of one owner never both present it), hands the
model the outcome as a user turn it then speaks about, and waits for the
answer: once that answer's turn has ended and its audio has played, the
task is delivered; a barge-in (or no answer) postpones it, which the
manager counts, so a result that cannot be presented gives up after a few
tries instead of blocking the next ones. A connection that goes away
postpones what it holds; the owner's next connection delivers it.

A task's agent waiting on a permission (``tasks/acp_permissions.py``) is
asked the same way, before any outcome: the question is handed to the model
at a free line by one connection of the owner, and again later if that
asking was interrupted or its connection went away.

The connection says what happens (``wake``, ``turn_ended``,
``interrupted``) and answers one question, ``line_free_at``: None while
the line is busy for an unknown time, else when it is (or was) free.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import anyio

from ..tasks import TaskManager, TaskRecord
from ..tasks.acp_permissions import PermissionRequest
from ..wire import chunks

log = logging.getLogger(__name__)

CLAIM_TTL_S = 30.0
# An answer that has not begun by then will not come: try later.
ANSWER_TIMEOUT_S = 30.0


def delivery_prompt(record: TaskRecord) -> str:
    """The user turn that hands the model a task's outcome to tell."""
    outcome = (
        f"Result: {record.result}"
        if record.state == "completed"
        else f"It failed: {record.error or 'no reason given'}"
    )
    if record.state == "completed" and record.inline:
        outcome += " (More is shown on the user's screen: do not read it out.)"
    return (
        f"[background task {record.id} {record.state}] Objective: {record.objective}. "
        f"{outcome} Tell the user this now, briefly."
    )


class TaskDelivery:
    def __init__(
        self,
        manager: TaskManager,
        owner: str,
        claimant: str,
        *,
        line_free_at: Callable[[], float | None],
        playback_ends_at: Callable[[], float],
        hand_to_model: Callable[[str], None],
        attach: Callable[[list[chunks.Chunk]], None] = lambda parts: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``attach``: parts for the end of the model's next answer (the
        translator's): a task's inline result goes with the answer telling it."""
        self._manager = manager
        self._owner = owner
        self._claimant = claimant
        self._line_free_at = line_free_at
        self._playback_ends_at = playback_ends_at
        self._hand_to_model = hand_to_model
        self._attach = attach
        self._shown_inline: set[str] = set()  # once per connection, retries or not
        self._clock = clock
        self._changed = anyio.Event()
        self._answer_ended = False
        self._interrupted = False
        self._holding: TaskRecord | None = None
        self._asking: PermissionRequest | None = None
        # (task id, seconds from the claim to the answer played)
        self.delivered: list[tuple[str, float]] = []

    @property
    def owner(self) -> str:
        return self._owner

    # ------------------------------------------------------------ the connection says
    def wake(self) -> None:
        """Something changed: a task, the line."""
        self._changed.set()

    def turn_ended(self) -> None:
        self._answer_ended = True
        self.wake()

    def interrupted(self) -> None:
        self._interrupted = True
        self.wake()

    # ------------------------------------------------------------ the loop
    async def run(self) -> None:
        while True:
            await self._line_free()
            claimed_at = self._clock()
            changed = self._watch()
            question = self._manager.permissions.next_untold(self._owner)
            if question is not None:
                # A task's agent waits on the user: asked before any outcome;
                # asked again later if the asking was cut short.
                self._asking = question
                try:
                    if not await self._speak(question.prompt(), None):
                        self._manager.permissions.retell(question)
                finally:
                    self._asking = None
                continue
            record = await self._manager.deliveries.claim(self._owner, self._claimant, CLAIM_TTL_S)
            if record is None:
                await self._until(changed, None)
                continue
            self._holding = record
            try:
                presented = await self._present(record)
            finally:
                self._holding = None
            if presented:
                await self._manager.deliveries.delivered(self._owner, record.id, self._claimant)
                took = self._clock() - claimed_at
                self.delivered.append((record.id, took))
                log.info(
                    "task %s delivered to %s: %.2f s from the claim to the answer played",
                    record.id,
                    self._claimant,
                    took,
                )
            else:
                await self._manager.deliveries.postpone(self._owner, record.id, self._claimant)

    async def close(self) -> None:
        """The connection ends: what it holds goes back for the next one."""
        if self._asking is not None:
            self._manager.permissions.retell(self._asking)
        record = self._holding
        if record is not None:
            with anyio.CancelScope(shield=True):
                await self._manager.deliveries.postpone(self._owner, record.id, self._claimant)

    async def _line_free(self) -> None:
        while True:
            changed = self._watch()
            free_at = self._line_free_at()
            now = self._clock()
            if free_at is not None and free_at <= now:
                return
            await self._until(changed, None if free_at is None else free_at - now)

    async def _hold_until_line_free(self, record: TaskRecord) -> bool:
        """The line was free before the claim, but taking it took a moment in
        which the user may have typed or spoken: wait, holding the claim, until
        the line is free again. False if the claim was lost meanwhile."""
        renew_at = self._clock() + CLAIM_TTL_S / 3
        while True:
            changed = self._watch()
            free_at = self._line_free_at()
            now = self._clock()
            if free_at is not None and free_at <= now:
                return True
            if now >= renew_at:
                if not await self._manager.deliveries.renew(
                    self._owner, record.id, self._claimant, CLAIM_TTL_S
                ):
                    return False
                renew_at = now + CLAIM_TTL_S / 3
            until = renew_at if free_at is None else min(free_at, renew_at)
            await self._until(changed, max(0.0, until - now))

    def _watch(self) -> anyio.Event:
        """A fresh event for the changes from now on: taken before looking,
        so a change while looking is not missed."""
        self._changed = anyio.Event()
        return self._changed

    @staticmethod
    async def _until(changed: anyio.Event, timeout: float | None) -> None:
        with anyio.move_on_after(timeout):
            await changed.wait()

    async def _present(self, record: TaskRecord) -> bool:
        """Hand the outcome to the model; True once its answer has played."""
        if not await self._hold_until_line_free(record):
            return False
        if record.state == "completed" and record.inline and record.id not in self._shown_inline:
            self._shown_inline.add(record.id)
            self._attach(chunks.markdown_part(record.id, record.inline))
        return await self._speak(delivery_prompt(record), record)

    async def _speak(self, prompt: str, claimed: TaskRecord | None) -> bool:
        """Hand ``prompt`` to the model; True once its answer has played.
        ``claimed``: the task whose claim is renewed meanwhile."""
        self._answer_ended = False
        self._interrupted = False
        self._hand_to_model(prompt)
        deadline = self._clock() + ANSWER_TIMEOUT_S
        renew_at = self._clock() + CLAIM_TTL_S / 3 if claimed is not None else math.inf
        while True:
            changed = self._watch()
            now = self._clock()
            if self._interrupted:
                return False
            if self._answer_ended and self._playback_ends_at() <= now:
                return True
            if not self._answer_ended and now >= deadline:
                return False
            if claimed is not None and now >= renew_at:
                if not await self._manager.deliveries.renew(
                    self._owner, claimed.id, self._claimant, CLAIM_TTL_S
                ):
                    return False  # somebody else holds it now
                renew_at = now + CLAIM_TTL_S / 3
            until = min(renew_at, self._playback_ends_at() if self._answer_ended else deadline)
            await self._until(changed, max(0.0, until - now))
