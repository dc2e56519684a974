"""The played-position port (``models/played_audio.py``) as the live
connection implements it: the pacer's clock, and the user's stop told to
whoever listens."""

from __future__ import annotations

from collections.abc import Callable

from ..models.played_audio import PositionListener


class PlayoutPosition:
    """``models.played_audio.PlayedAudio`` over a pacer's clock."""

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
