"""How much of the model's current turn the client has played: the seam a
live model connection reads to truncate what it said at what was heard.

The connection's pump binds its pacer's clock (``OutputPacer.played_seconds``)
before it starts ADK's live run; ADK opens the model's connection inside that
run, in a context copied from the pump's, so ``played_seconds()`` there reads
this socket's pacer and no other. Outside a live socket (``/run_live``, a
test without one) nothing is bound and the position is unknown (None).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

_CLOCK: contextvars.ContextVar[Callable[[], float] | None] = contextvars.ContextVar(
    "played_audio_clock", default=None
)


def bind(clock: Callable[[], float]) -> None:
    """From now on in this context (and the tasks it starts), ``clock`` tells
    the seconds of the model's current turn the client has played."""
    _CLOCK.set(clock)


def current_clock() -> Callable[[], float] | None:
    """The clock bound in this context (None: none), read when a model
    connection opens and kept for its life."""
    return _CLOCK.get()
