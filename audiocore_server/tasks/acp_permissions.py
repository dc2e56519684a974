"""An external agent's permission requests, answered by the user's voice.

A ``session/request_permission`` of a task's agent becomes a pending
request of the task's owner (``ask``): shown on the task's card, told to the
user by a live connection of that owner at a safe moment (``next_untold``,
``audiocore_server/live/outcomes.py``), and answered only through the live tool
``respond_agent_permission`` (``respond``), with one of two decisions:

* ``always`` — the agent's ``allow_always`` option when it offers one, else
  ``allow_once``;
* ``reject`` — ``reject_once``, else ``reject_always``.

Options are picked by their kind, never by their name. A request nobody
answers within the timeout is rejected; a cancelled task's request, and one
with no option either decision could take, is answered ``cancelled``.
Every decision is logged. Requests live in this process only: the agent
waits on this process's connection.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from .redact import screened

Decision = Literal["always", "reject"]
DECISIONS: tuple[Decision, ...] = ("always", "reject")
# The options each decision takes, in order of preference (ACP's kinds).
_KINDS: dict[str, tuple[str, ...]] = {
    "always": ("allow_always", "allow_once"),
    "reject": ("reject_once", "reject_always"),
}
MAX_TITLE_CHARS = 160
MAX_PENDING_PER_OWNER = 4  # an agent asking more at once has the rest rejected
PROMPT_PREFIX = "[agent permission request "

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Option:
    """One of the agent's options: its id and its kind (allow_once, …)."""

    id: str
    kind: str


@dataclasses.dataclass(eq=False)
class PermissionRequest:
    id: str
    owner: str
    task_id: str
    title: str  # bounded and redacted: it is shown and read aloud
    options: tuple[Option, ...]
    answer: asyncio.Future[str | None]  # the option id chosen; None: cancelled
    told: bool = False  # being told, or told: no other connection tells it
    asked: bool = False  # handed to a model at least once: it may be answered

    def card(self) -> dict[str, str]:
        return {"id": self.id, "title": self.title}

    def prompt(self) -> str:
        """The user turn that hands the model the question to ask."""
        return (
            f"{PROMPT_PREFIX}{self.id} for task {self.task_id}] The agent working on the "
            f"task asks permission to: {self.title}. Ask the user whether to allow it "
            "(always) or reject it, and call respond_agent_permission only with their answer."
        )


def choose(options: Sequence[Option], decision: Decision) -> Option | None:
    """The option ``decision`` picks among ``options``, or None if none fits."""
    for kind in _KINDS[decision]:
        for option in options:
            if option.kind == kind:
                return option
    return None


Changed = Callable[[PermissionRequest, bool], Awaitable[None]]


class PermissionDesk:
    def __init__(self, timeout_s: float, on_change: Changed) -> None:
        """``on_change(request, pending)``: the request is now pending (True)
        or settled (False); the task's record shows it."""
        self._timeout_s = timeout_s
        self._on_change = on_change
        self._pending: dict[str, PermissionRequest] = {}

    def pending(self, owner: str) -> list[PermissionRequest]:
        return [r for r in self._pending.values() if r.owner == owner]

    def next_untold(self, owner: str) -> PermissionRequest | None:
        """The owner's oldest request not yet told, now marked told."""
        for request in self.pending(owner):
            if not request.told:
                request.told = request.asked = True
                return request
        return None

    def retell(self, request: PermissionRequest) -> None:
        """Its telling was cut short (a barge-in, the connection gone): told
        again at the next free line, while it waits."""
        request.told = False

    async def ask(
        self, owner: str, task_id: str, title: str, options: Sequence[Option]
    ) -> str | None:
        """Wait for the user's decision on the agent's request; the option id
        chosen, or None when the request was cancelled (its task was)."""
        loop = asyncio.get_running_loop()
        request = PermissionRequest(
            id="perm_" + secrets.token_hex(4),
            owner=owner,
            task_id=task_id,
            title=screened(title, MAX_TITLE_CHARS) or "an unnamed action",
            options=tuple(options),
            answer=loop.create_future(),
        )
        if len(self.pending(owner)) >= MAX_PENDING_PER_OWNER:
            return self._reject_now(request, "too many requests waiting")
        if not any(choose(request.options, decision) for decision in DECISIONS):
            # Nothing the user could say would answer it: not asked.
            return self._reject_now(request, "no option to allow or reject")
        self._pending[request.id] = request
        try:
            await self._on_change(request, True)
            try:
                chosen = await asyncio.wait_for(asyncio.shield(request.answer), self._timeout_s)
            except asyncio.TimeoutError:
                return self._reject_now(request, f"no answer within {self._timeout_s:g} s")
            return chosen
        finally:
            self._pending.pop(request.id, None)
            if not request.answer.done():
                request.answer.set_result(None)
            await self._on_change(request, False)

    def _reject_now(self, request: PermissionRequest, why: str) -> str | None:
        option = choose(request.options, "reject")
        log.info(
            "permission %s of task %s (%r): rejected, %s",
            request.id,
            request.task_id,
            request.title,
            why,
        )
        return option.id if option is not None else None

    def respond(
        self, owner: str, decision: object, heard_after: Callable[[str], bool]
    ) -> dict[str, str]:
        """The user's ``decision`` on the owner's oldest request already asked.
        ``heard_after(request_id)``: whether the user spoke or typed after
        that request was told (the model must not answer on its own)."""
        if decision not in DECISIONS:
            return {"error": f"decision: expected 'always' or 'reject', got {decision!r}"}
        told = [r for r in self.pending(owner) if r.asked and not r.answer.done()]
        if not told:
            return {"error": "no permission request is waiting for an answer"}
        request = told[0]
        if not heard_after(request.id):
            return {
                "error": "the user has not answered this request yet: ask them, and call "
                "respond_agent_permission only with what they say"
            }
        option = choose(request.options, decision)
        if option is None:
            return {"error": f"the agent offered no option for {decision!r}"}
        request.answer.set_result(option.id)
        log.info(
            "permission %s of task %s (%r): %s by the user (%s)",
            request.id,
            request.task_id,
            request.title,
            decision,
            option.kind,
        )
        return {"permissionId": request.id, "taskId": request.task_id, "decision": decision}

    def cancel_task(self, task_id: str) -> None:
        """The task is cancelled: its requests are answered ``cancelled``."""
        for request in list(self._pending.values()):
            if request.task_id == task_id and not request.answer.done():
                request.answer.set_result(None)
                log.info("permission %s of task %s: cancelled", request.id, task_id)
