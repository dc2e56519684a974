"""ADK's ``LiveRequestQueue`` with the bound the server enforces."""

from __future__ import annotations

from google.adk.agents.live_request_queue import LiveRequestQueue
from google.genai import types


class BoundedLiveRequestQueue(LiveRequestQueue):
    """ADK's queue (unbounded by design) with a bound the server enforces.

    Realtime audio is dropped rather than queued past ``max_pending``: audio
    that waits seconds for a stalled model is useless, and memory stays flat.
    """

    def __init__(self, max_pending: int) -> None:
        super().__init__()
        self.max_pending = max_pending
        self.dropped_chunks = 0

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    def has_room(self) -> bool:
        return self._queue.qsize() < self.max_pending

    def offer_realtime(self, blob: types.Blob) -> bool:
        if not self.has_room():
            self.dropped_chunks += 1
            return False
        self.send_realtime(blob)
        return True
