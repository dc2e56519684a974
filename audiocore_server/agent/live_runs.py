"""Ending a live run as ADK expects a caller to: aborted, then cancelled.

ADK's runner treats a cancelled run as a failure unless its invocation was
aborted first, and keeps that failure's CancelledError in a reference cycle
with the runner's frame (``run_error``) — with the invocation, its session
and its queue, a few hundred objects per conversation that only the
collector frees. A connection that ends aborts its run first
(``abort_run``): ADK then takes the cancellation for what it is, a caller
that stopped.

The invocation is known only inside the runner: ``RunRecorder``, an ADK
plugin, notes each live run's invocation by the request queue it reads.
"""

from __future__ import annotations

from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.live_request_queue import LiveRequestQueue
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types


class RunRecorder(BasePlugin):
    """Notes each live run's invocation, by its request queue."""

    def __init__(self) -> None:
        super().__init__(name="audiocore_live_runs")
        # Strong on both sides (the invocation holds its queue, so a weak
        # key would never die): each connection forgets its run at its end.
        self._runs: dict[LiveRequestQueue, InvocationContext] = {}

    async def before_run_callback(
        self, *, invocation_context: InvocationContext
    ) -> types.Content | None:
        queue = invocation_context.live_request_queue
        if queue is not None:
            self._runs[queue] = invocation_context
        return None

    def abort_run(self, queue: LiveRequestQueue) -> None:
        """Abort the live run reading ``queue``, if one is under way, and
        forget it."""
        invocation = self._runs.pop(queue, None)
        if invocation is not None:
            invocation.abort()

    def __len__(self) -> int:
        return len(self._runs)
