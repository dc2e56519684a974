"""The connection reaper: totals, collection and heap trimming after closes."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from audiocore_server.ops import reaper as memory
from audiocore_server.ops.metrics import ConnectionMetrics
from audiocore_server.ops.reaper import GC_EVERY_S, ConnectionReaper


class Node:
    partner: Any = None


def garbage_cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.partner, b.partner = b, a
    return weakref.ref(a)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_closed_connections_cycles_are_collected_when_the_last_one_closes() -> None:
    """What libraries leave in reference cycles is collected by the reaper
    when the last connection closes, at most every 10 s."""
    clock = Clock()
    reaper = ConnectionReaper(clock=clock, trim=None)
    gc.collect()
    gc.disable()
    try:
        left = garbage_cycle()
        reaper.record(ConnectionMetrics(), still_open=3)
        assert left() is not None  # others still open: no collection now
        reaper.record(ConnectionMetrics(), still_open=0)
        assert left() is None  # the last one closed: collected
        again = garbage_cycle()
        for _ in range(150):  # within 10 s of the last collection
            reaper.record(ConnectionMetrics(), still_open=0)
        assert again() is not None  # a load of closes never collects back to back
        clock.now += GC_EVERY_S
        reaper.record(ConnectionMetrics(), still_open=0)
        assert again() is None  # idle again, 10 s later: collected
    finally:
        gc.enable()
    assert reaper.totals.connections == 153


def test_under_load_nothing_is_collected() -> None:
    """A full collection stalls every stream: never while any is open (a
    finished connection leaves no cycle of its own: test_teardown.py)."""
    clock = Clock()
    reaper = ConnectionReaper(clock=clock, trim=None)
    gc.collect()
    gc.disable()
    try:
        left = garbage_cycle()
        for _ in range(500):
            clock.now += GC_EVERY_S
            reaper.record(ConnectionMetrics(), still_open=7)
        assert left() is not None
        reaper.record(ConnectionMetrics(), still_open=0)
        assert left() is None
    finally:
        gc.enable()


def test_the_heap_is_trimmed_when_the_last_connection_closes() -> None:
    """glibc keeps freed heap pages; when the server goes idle it hands them
    back (``malloc_trim``), so RSS falls after a load instead of staying at
    its peak. Only then: a trim under load would stall every stream."""
    assert memory.malloc_trim is not None  # glibc (Debian): found
    calls: list[int] = []
    clock = Clock()
    reaper = ConnectionReaper(clock=clock, trim=lambda pad: calls.append(pad) or 1)
    for _ in range(100):  # a hundred closes under load collect, but do not trim
        reaper.record(ConnectionMetrics(), still_open=5)
    assert calls == []
    clock.now += GC_EVERY_S  # the last collection long enough ago
    reaper.record(ConnectionMetrics(), still_open=0)
    assert calls == [0]


def test_the_totals_add_every_closed_connection() -> None:
    reaper = ConnectionReaper(trim=None)
    reaper.record(ConnectionMetrics(frames_sent=3, late_frames=1), still_open=1)
    reaper.record(ConnectionMetrics(frames_sent=4, concealed_frames=2), still_open=0)
    totals = reaper.totals
    assert (totals.connections, totals.frames_sent, totals.late_frames) == (2, 7, 1)
    assert totals.concealed_frames == 2
