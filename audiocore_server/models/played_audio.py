"""The playout as a live model connection sees it — a port this wing
defines and the live connection implements (``live/played.py``): how much
of the model's current turn the client has played, and the moment the user
stopped it on the client — so a provider that keeps a memory of what it
said can cut it at what was heard.

``Playout`` owns one (``Playout.played``, over its pacer's clock). ADK
opens the model's connection itself, inside the live run, and hands it
nothing of ours; so the port travels by a context variable: the
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
from typing import Protocol

PositionListener = Callable[[float], None]


class PlayedAudio(Protocol):
    """The port: what a model connection may ask of the playout (the live
    connection implements it, ``live/played.py``)."""

    def played_seconds(self) -> float:
        """Seconds of the model's current turn the client has played by now."""
        ...

    def on_user_stop(self, listener: PositionListener) -> Callable[[], None]:
        """``listener(played_seconds)`` when the user stops the answer on the
        client (called before the audio is dropped, so the position is what
        was heard). Returns what removes it."""
        ...


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
