"""One live socket's model connections, across the reconnects of its run —
what a recovery needs that no single connection holds.

ADK's live run opens a new model connection when the service drops one (or
hands it over with ``goAway``), resuming with the last session-resumption
handle; the conversation on the service is then the one of that handle,
which never covers the user's words of an answer cut off mid-way. A
``ModelLink`` keeps what was sent to the model since that handle (typed
turns, turn edges, and the microphone's audio, at most ``max_audio_s``), so
that the next connection gives it again and the user's words are answered.
It also carries a stall from the socket's watchdog to the connection
(``stall``: the connection gives up as if dropped, so ADK resumes it) and a
recovery back to the socket (``on_recovered``: the client's notice).

A turn that called a tool is not given again: the model would call the
tool a second time. Such a turn ends as cut off (``interrupted``), as
before.

It travels as ``played_audio`` does: the socket's pump binds it before
ADK's live run starts; the model's connection reads it when it opens.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections.abc import Callable
from typing import Literal

from google.adk.models.base_llm_connection import RealtimeInput
from google.genai import types

log = logging.getLogger(__name__)

Cause = Literal["stall", "drop", "limit"]
Sent = types.Content | RealtimeInput


class ModelLink:
    def __init__(
        self,
        *,
        max_audio_s: float = 30.0,
        on_recovered: Callable[[Cause], None] = lambda cause: None,
    ) -> None:
        self.max_audio_s = max_audio_s
        self.on_recovered = on_recovered
        self._since_handle: list[Sent] = []  # sent since the last resumable point
        # How many of them the model had when it began its latest answer:
        # what the next handle may hold (``mark``).
        self._answered = 0
        self._audio_s = 0.0
        self._tool_called = False  # since that point: not given again
        self._cause: Cause | None = None  # why the last connection ended early
        self._stalled: asyncio.Event | None = None  # the open connection's

    # ------------------------------------------------------------ sending side
    def sent(self, item: Sent) -> None:
        """What the connection sent the model (typed turns, edges, audio)."""
        if isinstance(item, types.Blob):
            if not item.data:
                return
            self._audio_s += _seconds(item)
            self._since_handle.append(item)
            self._trim_audio()
        elif isinstance(item, types.Content):
            if any(p.function_response for p in item.parts or []):
                return  # a tool's answer: the model had called it
            self._since_handle.append(item)
        else:
            self._since_handle.append(item)

    def tool_called(self) -> None:
        self._tool_called = True

    def mark(self) -> None:
        """The model began an answer: what was sent so far is what it
        answers, and what the next handle holds."""
        self._answered = len(self._since_handle)

    def resumable(self) -> None:
        """The service handed out a new handle (or, on OpenAI, ended an
        answer): what the model had when it began its latest answer is kept
        there. Not what came after: the handle may have been made before
        that reached the service, though it reaches us after it was sent —
        a handle at a connection's start holds nothing we sent on it."""
        kept = self._since_handle[self._answered :]
        self._since_handle = kept
        self._answered = 0
        self._audio_s = sum(_seconds(item) for item in kept if isinstance(item, types.Blob))
        self._tool_called = False

    # ------------------------------------------------------------ connections
    def opened(self) -> asyncio.Event:
        """A model connection opened; returns the event that tells it to give
        up (the watchdog's ``stall``)."""
        self._stalled = asyncio.Event()
        return self._stalled

    def ended_early(self, cause: Cause) -> None:
        """The connection died (or gave up) mid-run: ADK will resume it."""
        self._cause = cause

    def to_give_again(self) -> list[Sent]:
        """On a resumed connection: what to send again (and the notice).
        Nothing when the last connection did not end early, or when its
        unanswered turn called a tool."""
        cause, self._cause = self._cause, None
        if cause is None:
            return []
        if self._tool_called:
            log.info("model connection recovered (%s): the cut turn called a tool", cause)
            self.take_since()
            items = []
        else:
            items = self.take_since()
        self.on_recovered(cause)
        return items

    def take_since(self) -> list[Sent]:
        """What was sent since the last resumable point, for a new
        connection that is not a recovery (a renewal: no notice). Sent
        again, the items are kept again (``sent``): a later loss gives them
        once more, not twice."""
        items = list(self._since_handle)
        self._since_handle.clear()
        self._answered = 0
        self._audio_s = 0.0
        self._tool_called = False
        return items

    def stall(self) -> bool:
        """The watchdog saw the model stop mid-answer: the open connection
        gives up (True), unless none is open."""
        if self._stalled is None or self._stalled.is_set():
            return False
        self._stalled.set()
        return True

    def _trim_audio(self) -> None:
        while self._audio_s > self.max_audio_s:
            for i, item in enumerate(self._since_handle):
                if isinstance(item, types.Blob) and item.data:
                    del self._since_handle[i]
                    self._audio_s -= _seconds(item)
                    if i < self._answered:
                        self._answered -= 1
                    break
            else:
                return


def _seconds(blob: types.Blob) -> float:
    return len(blob.data or b"") / 2 / _rate(blob.mime_type)


def _rate(mime_type: str | None) -> int:
    for part in (mime_type or "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == "rate" and value.isdigit() and int(value) > 0:
            return int(value)
    return 16_000


_CURRENT: contextvars.ContextVar[weakref.ref[ModelLink] | None] = contextvars.ContextVar(
    "model_link", default=None
)


def bind(link: ModelLink) -> None:
    """From now on in this context (and the tasks it starts), ``current()``
    is ``link`` while it lives."""
    _CURRENT.set(weakref.ref(link))


def current() -> ModelLink | None:
    ref = _CURRENT.get()
    return ref() if ref is not None else None
