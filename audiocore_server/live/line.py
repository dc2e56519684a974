"""When the line is free: may the server speak up unasked (a background
task's outcome) without talking over anyone?

Busy, for a time nobody knows yet, while the user holds push-to-talk, while
a turn of theirs is on its way to the model or being answered, while the
model's turn is open (every dialect's ``Translator.in_turn``), and while a
delegated tool call waits for the user. Otherwise free once the user's
voice (with its hangover) and the answer's audio have ended.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..turns.events import Translator


class Voice(Protocol):
    voice_until: float  # when the user's voice, with its hangover, ends


class Playback(Protocol):
    @property
    def playback_ends_at(self) -> float: ...


class LinePolicy:
    def __init__(
        self,
        voice: Voice,
        playback: Playback,
        translator: Translator,
        calls_pending: Callable[[], int],
    ) -> None:
        self._voice = voice
        self._playback = playback
        self._translator = translator
        self._calls_pending = calls_pending
        self.talking = False  # push-to-talk held: between activity start and end
        self.awaiting_answer = False  # a user turn sent, its answer not yet ended

    def user_started(self) -> None:
        self.talking = True

    def user_ended(self) -> None:
        self.talking = False
        self.awaiting_answer = True

    def turn_sent(self) -> None:
        """A typed turn, or a task's outcome, went to the model."""
        self.awaiting_answer = True

    def answer_ended(self) -> None:
        self.awaiting_answer = False

    def free_at(self) -> float | None:
        """None while the line is busy for an unknown time; else when it is
        (or was) free, on the playback's clock."""
        if self.talking or self.awaiting_answer or self._calls_pending():
            return None
        if self._translator.in_turn:
            return None
        return max(self._voice.voice_until, self._playback.playback_ends_at)
