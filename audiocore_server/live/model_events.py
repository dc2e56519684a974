"""The model's side of a live run: ``runner.run_live``'s events, one at a
time, with a watchdog on a model that stops mid-answer.

While the model owes an answer (``answering``: it said something and has
neither ended its turn nor called a tool; or a tool's answer went to it, as
an event of ADK's or from the client: ``owe``), a silence of
``stall_timeout_s`` is a stalled model: the user would wait for the rest of
the answer for ever. Where the model's connection can be resumed
(``ModelLink.stall``: Gemini with session resumption, every OpenAI
session), it is given up and replaced, the user's words given again
(``models/model_link.py``); the watchdog then waits again. A stall that
cannot be recovered, or ``max_recoveries`` stalls in a row with no event
between them, ends the connection with an error. Between answers the model
may be silent as long as the user is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable

from google.adk.events import Event

from ..wire import protocol
from .shutdown import Shutdown

log = logging.getLogger(__name__)


def answering(event: Event) -> bool:
    """Whether the model owes the rest of an answer after ``event``: it said
    something and has neither ended its turn nor called a tool (then it
    waits for the tool's answer, which may take the user a while), or a
    tool's answer went to it (it answers every one). Not after a transfer
    to another agent or ``task_completed``: the next agent speaks when the
    user does."""
    if event.author == "user" or event.turn_complete or event.interrupted:
        return False
    if event.get_function_calls():
        return False
    responses = event.get_function_responses()
    if responses:
        ending = event.actions.transfer_to_agent or any(
            r.name == "task_completed" for r in responses
        )
        return not ending
    return event.content is not None or event.output_transcription is not None


class ModelEvents:
    def __init__(
        self,
        events: AsyncGenerator[Event, None],
        *,
        stall_timeout_s: float,
        name: str,
        recover: Callable[[], bool] = lambda: False,
        max_recoveries: int = 2,
    ) -> None:
        self._events = events
        self._timeout = stall_timeout_s
        self._name = name  # for the log
        self._recover = recover
        self._max_recoveries = max_recoveries
        self.answering = False  # the stall timer runs
        self._watch: _Watch | None = None  # the wait under way's, when watched
        self._waiting: asyncio.Task[object] | None = None  # the task waiting for an event

    async def next(self) -> Event | None:
        """The run's next event (None: the run is over); ``Shutdown`` if the
        model stalls mid-answer and cannot be recovered."""
        event = await self._next()
        self.answering = event is not None and answering(event)
        return event

    def owe(self) -> None:
        """An answer is owed from now (a tool's answer went to the model
        outside ADK's events): the wait under way is watched."""
        self.answering = True
        if self._waiting is not None and self._watch is None:
            self._watch = _Watch(self, self._waiting)

    async def _next(self) -> Event | None:
        """The next event, with the watchdog on while an answer is owed. A
        stall asks for a recovery (the run's generator goes on: cancelling
        it would end ADK's run); only one that cannot be recovered cancels
        the wait, as a deadline."""
        task = asyncio.current_task()
        assert task is not None
        self._waiting = task
        self._watch = _Watch(self, task) if self.answering else None
        try:
            return await anext(self._events, None)
        except asyncio.CancelledError:
            watch = self._watch
            if watch is not None and watch.gave_up and task.uncancel() == 0:
                raise Shutdown(
                    protocol.CLOSE_INTERNAL_ERROR,
                    "the model stalled",
                    error=(
                        f"the model stopped answering for {self._timeout:g} s; reconnect to go on"
                    ),
                ) from None
            raise
        finally:
            if self._watch is not None:
                self._watch.cancel()
            self._watch = self._waiting = None

    async def aclose(self) -> None:
        await self._events.aclose()


class _Watch:
    """One wait's watchdog: every ``stall_timeout_s`` without an event, a
    recovery is asked for (and watched again); past ``max_recoveries``, or
    when none is possible, the waiting task is cancelled. (An object, not a
    closure that re-arms itself: that would be a function in a reference
    cycle with its own cell, freed only by the collector.)"""

    def __init__(self, events: ModelEvents, task: asyncio.Task[object]) -> None:
        self.task = task
        self.gave_up = False
        self._events = events
        self._stalls = 0
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_later(events._timeout, self._stalled)

    def _stalled(self) -> None:
        events = self._events
        self._stalls += 1
        log.warning(
            "%s: the model owes an answer and sent nothing for %g s", events._name, events._timeout
        )
        if self._stalls <= events._max_recoveries and events._recover():
            self._handle = self._loop.call_later(events._timeout, self._stalled)
        else:
            self.gave_up = True
            self.task.cancel()

    def cancel(self) -> None:
        self._handle.cancel()  # drops the callback: no cycle is left
