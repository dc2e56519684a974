"""The model's side of a live run: ``runner.run_live``'s events, one at a
time, with a watchdog on a model that stops mid-answer.

While the model is answering (``answering``: it said something and has
neither ended its turn nor called a tool), a silence of ``stall_timeout_s``
is a stalled model: the user would wait for the rest of the answer for
ever, so the connection ends with an error. Between answers the model may
be silent as long as the user is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator

from google.adk.events import Event

from ..wire import protocol
from .shutdown import Shutdown

log = logging.getLogger(__name__)


def answering(event: Event) -> bool:
    """Whether the model is in the middle of an answer after ``event``: it
    said something and has neither ended its turn nor called a tool (then
    it waits for the tool's answer, which may take the user a while)."""
    if event.author == "user" or event.turn_complete or event.interrupted:
        return False
    if event.get_function_calls() or event.get_function_responses():
        return False
    return event.content is not None or event.output_transcription is not None


class ModelEvents:
    def __init__(
        self, events: AsyncGenerator[Event, None], *, stall_timeout_s: float, name: str
    ) -> None:
        self._events = events
        self._timeout = stall_timeout_s
        self._name = name  # for the log
        self.answering = False  # the stall timer runs

    async def next(self) -> Event | None:
        """The run's next event (None: the run is over); ``Shutdown`` if the
        model stalls mid-answer."""
        if not self.answering:
            event = await anext(self._events, None)
        else:
            event = await self._next_within_deadline()
        self.answering = event is not None and answering(event)
        return event

    async def _next_within_deadline(self) -> Event | None:
        # asyncio's own timeout, not anyio's scope: this runs once per model
        # event, and anyio's scope costs several times more to enter and leave.
        deadline = asyncio.timeout(self._timeout)
        try:
            async with deadline:
                return await anext(self._events, None)
        except TimeoutError:
            if not deadline.expired():
                raise  # the model's own error, not our deadline
        log.warning("%s: the model stopped mid-answer for %g s", self._name, self._timeout)
        raise Shutdown(
            protocol.CLOSE_INTERNAL_ERROR,
            "the model stalled",
            error=f"the model stopped answering for {self._timeout:g} s; reconnect to go on",
        )

    async def aclose(self) -> None:
        await self._events.aclose()
