"""The playout as a live model connection sees it: how much of the model's
current turn the client has played, and the moment the user stopped it on
the client — so a provider that keeps a memory of what it said can cut it
at what was heard.

``Playout`` owns one (``Playout.played``, over its pacer's clock). The
connection's pump binds it before it starts ADK's live run; ADK opens the
model's connection inside that run, in a context copied from the pump's, so
``current()`` there is this socket's and no other's, on every live surface
(``/ws``, ``/live``, ``/run_live``). Outside a live socket (a runner driven
directly) nothing is bound (None).
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Callable

PositionListener = Callable[[float], None]


class PlayedAudio:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._listeners: list[PositionListener] = []

    def played_seconds(self) -> float:
        """Seconds of the model's current turn the client has played by now."""
        return self._clock()

    def on_user_stop(self, listener: PositionListener) -> Callable[[], None]:
        """``listener(played_seconds)`` when the user stops the answer on the
        client (called before the audio is dropped, so the position is what
        was heard). Returns what removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def user_stopped(self) -> None:
        if self._listeners:
            position = self._clock()
            for listener in list(self._listeners):
                listener(position)


# A weak reference: CPython's ContextVar caches the last value read from it
# (whatever context read it), so a strong one kept the last socket's
# playout, pacer and all, alive until another read (found by
# tests/server/test_faults.py: a vanished client leaves nothing behind).
_CURRENT: contextvars.ContextVar[weakref.ref[PlayedAudio] | None] = contextvars.ContextVar(
    "played_audio", default=None
)


def bind(played: PlayedAudio) -> None:
    """From now on in this context (and the tasks it starts), ``current()``
    is ``played`` while it lives."""
    _CURRENT.set(weakref.ref(played))


def current() -> PlayedAudio | None:
    """The playout bound in this context (None: none, or gone), read when a
    model connection opens and kept for its life."""
    ref = _CURRENT.get()
    return ref() if ref is not None else None
