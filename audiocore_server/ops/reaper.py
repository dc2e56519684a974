"""Giving back what finished connections held, and counting what they did.

A finished connection is freed by reference counting (tests/server/
test_teardown.py proves it leaves nothing of ours or of ADK's invocation in
a reference cycle). What libraries keep in cycles of their own is small; the
tuned collector (``python -m server``) frees it in time, and the reaper runs
a full collection when the last connection has closed, at most every
``GC_EVERY_S``. Never under load: a full collection stalls every stream for
tens of ms (under a reconnect flood, a collection every 100 closes was the
largest stall left).

When the last one has closed, the C heap's free pages are handed back to the
system too (glibc's ``malloc_trim``): glibc keeps them, in every thread's
arena, and RSS would stay near the load's peak. It runs only when idle:
under load it would stall streams.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import time
from collections.abc import Callable
from pathlib import Path

from .metrics import ConnectionMetrics, MetricsTotals

log = logging.getLogger(__name__)

GC_EVERY_S = 10.0


def _find_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` among the symbols the process has loaded
    (None elsewhere: musl, macOS). No library search: that would run
    ``ldconfig`` at import."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


malloc_trim = _find_malloc_trim()


class ConnectionReaper:
    """Folds each finished connection's metrics into the totals, and
    collects and trims when it is cheap to."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        trim: Callable[[int], int] | None = malloc_trim,
    ) -> None:
        self.totals = MetricsTotals()
        self._clock = clock
        self._trim = trim
        self._gc_at = -GC_EVERY_S

    def record(self, metrics: ConnectionMetrics, *, still_open: int) -> None:
        self.totals.add(metrics)
        now = self._clock()
        if still_open > 0 or now - self._gc_at < GC_EVERY_S:
            return
        freed = gc.collect()
        self._gc_at = now
        log.debug("collected %d objects of closed connections", freed)
        if self._trim is not None:
            self._trim(0)

    def write_stats(self, path: Path, *, per_process: bool) -> None:
        self.totals.write(path, per_process=per_process)
