"""Delivery claims: each finished task's outcome reaches the user once.

A task whose run ended (completed or failed) is *delivered* once: a live
connection claims it (a claim expires unless renewed), presents it, and
marks it delivered, or postpones it when interrupted. Each claim is one
attempt; after ``max_delivery_attempts`` the delivery fails, so one bad
result cannot block the ones after it.

Every change is a write to the owner's ledger (``store.py``) followed by a
call to the owner's subscribers (``TaskManager``, which composes this) with
the changed record. Claims expire by the wall clock: they outlive the
process that made them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from ..settings import Settings
from .ledger import Ledger, TaskStore
from .records import DELIVERABLE_STATES, MAX_CLAIMANT_CHARS, TaskRecord, check_text

log = logging.getLogger(__name__)


class DeliveryClaims:
    def __init__(
        self,
        settings: Settings,
        store: TaskStore,
        notify: Callable[[str, list[TaskRecord]], None],
        clock: Callable[[], float],
    ) -> None:
        """``notify(owner, records)``: tell the owner's subscribers of changed records."""
        self.settings = settings
        self._store = store
        self._notify = notify
        self._clock = clock

    async def claim(self, owner: str, claimant: str, ttl_s: float) -> TaskRecord | None:
        """Claim the oldest outcome to deliver (completed or failed, delivery
        pending, or claimed by a claim that expired) for ``ttl_s`` seconds.

        A claimant that already holds a claim gets that one back, renewed.
        Returns None when there is nothing to deliver.
        """
        check_text("claimant", claimant, MAX_CLAIMANT_CHARS)
        _check_ttl(ttl_s)
        now = self._clock()

        def claim(ledger: Ledger) -> TaskRecord | None:
            ordered = ledger.ordered()
            held = next(
                (r for r in ordered if r.delivery == "claimed" and r.claimant == claimant), None
            )
            if held is not None:
                return ledger.put(dataclasses.replace(held, claim_expires_at=now + ttl_s))
            for record in ordered:
                if record.state not in DELIVERABLE_STATES:
                    continue
                if record.delivery == "claimed" and (record.claim_expires_at or 0) <= now:
                    record = ledger.put(self.released(record))  # its claimant is gone
                if record.delivery == "pending":
                    return ledger.put(
                        dataclasses.replace(
                            record,
                            delivery="claimed",
                            claimant=claimant,
                            claim_expires_at=now + ttl_s,
                            attempts=record.attempts + 1,
                        )
                    )
            return None

        record, changed = await self._store.update(owner, claim)
        self._notify(owner, changed)
        return record

    async def renew(self, owner: str, task_id: str, claimant: str, ttl_s: float) -> bool:
        """Extend ``claimant``'s claim on ``task_id`` by ``ttl_s`` from now;
        False if it does not hold it (any more)."""
        _check_ttl(ttl_s)
        now = self._clock()

        def renew(ledger: Ledger) -> bool:
            record = ledger.get(task_id)
            if record is None or record.delivery != "claimed" or record.claimant != claimant:
                return False
            ledger.put(dataclasses.replace(record, claim_expires_at=now + ttl_s))
            return True

        renewed, _ = await self._store.update(owner, renew)
        return renewed  # a renewal changes nothing a subscriber shows

    async def delivered(self, owner: str, task_id: str, claimant: str) -> bool:
        """Mark ``task_id``'s outcome delivered, for good: no claim returns it
        again. Idempotent. Taken from any claimant (one whose claim expired
        has presented it all the same). False if the task has no outcome."""

        def mark(ledger: Ledger) -> bool:
            record = ledger.get(task_id)
            if record is None or record.state not in DELIVERABLE_STATES:
                return False
            if record.delivery == "delivered":
                return True
            if record.claimant != claimant:
                # It was presented all the same: record the fact.
                log.warning(
                    "task %s delivered by %r, claimed by %r", task_id, claimant, record.claimant
                )
            ledger.put(
                dataclasses.replace(
                    record, delivery="delivered", claimant=None, claim_expires_at=None
                )
            )
            return True

        done, changed = await self._store.update(owner, mark)
        self._notify(owner, changed)
        return done

    async def postpone(self, owner: str, task_id: str, claimant: str) -> bool:
        """Give the claim on ``task_id`` back (the delivery was interrupted):
        pending again, or delivery failed past ``max_delivery_attempts``.
        False if ``claimant`` does not hold the claim."""

        def release(ledger: Ledger) -> bool:
            record = ledger.get(task_id)
            if record is None or record.delivery != "claimed" or record.claimant != claimant:
                return False
            ledger.put(self.released(record))
            return True

        done, changed = await self._store.update(owner, release)
        self._notify(owner, changed)
        return done

    def released(self, record: TaskRecord) -> TaskRecord:
        """``record`` with its claim given back: pending again, or its
        delivery failed past ``max_delivery_attempts``."""
        exhausted = record.attempts >= self.settings.max_delivery_attempts
        return dataclasses.replace(
            record,
            delivery="failed" if exhausted else "pending",
            claimant=None,
            claim_expires_at=None,
        )


def _check_ttl(ttl_s: float) -> None:
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or not ttl_s > 0:
        raise ValueError(f"ttl_s: expected a number of seconds more than 0, got {ttl_s!r}")
