"""What the caller has heard, from Twilio's mark replies.

The server sends a ``mark`` after each audio frame; Twilio sends it back
once the audio queued before it has played — or at once when a ``clear``
dropped it, which says nothing was heard. Replies may come in any order.
So the heard position of the turn being sent is the furthest mark of that
turn replied to before the turn was cleared; marks outstanding at a
``clear`` are kept aside and their replies are acknowledgements, not
playback. This is the played-position port's clock on a call
(``models/played_audio.py``, through ``Wire.heard``).
"""

from __future__ import annotations

from collections import OrderedDict

from ..wire.fields import InputError

# Marks waiting for their reply (a frame's each, ~7 in flight at a 150 ms
# lead and Twilio's own buffer): past this the oldest are forgotten.
MAX_OUTSTANDING = 4096


class HeardMarks:
    def __init__(self, sample_rate: int) -> None:
        self._rate = sample_rate
        self._serial = 0
        self._turn = 0  # the turn being sent
        self._sent = 0  # samples of it sent
        self._outstanding: OrderedDict[str, tuple[int, int]] = OrderedDict()  # name → (turn, end)
        self._cleared: OrderedDict[str, None] = OrderedDict()
        self._heard_turn = -1
        self._heard = 0  # samples of _heard_turn the caller has heard

    def sent(self, samples: int) -> str:
        """``samples`` more of the turn went out; the mark to send after them."""
        self._serial += 1
        self._sent += samples
        name = f"a{self._serial}"
        self._outstanding[name] = (self._turn, self._sent)
        if len(self._outstanding) > MAX_OUTSTANDING:
            self._outstanding.popitem(last=False)
        return name

    def turn_ended(self) -> None:
        if self._sent:
            self._turn += 1
            self._sent = 0

    def cleared(self) -> None:
        """A ``clear`` went out: what was not heard by now never will be."""
        for name in self._outstanding:
            self._cleared[name] = None
        while len(self._cleared) > MAX_OUTSTANDING:
            self._cleared.popitem(last=False)
        self._outstanding.clear()
        self.turn_ended()

    def replied(self, name: str) -> None:
        """Twilio sent mark ``name`` back; ``InputError`` for a mark never sent."""
        entry = self._outstanding.pop(name, None)
        if entry is None:
            if name in self._cleared:
                del self._cleared[name]  # the clear's acknowledgement of a dropped frame
                return
            raise InputError(f"mark.name: expected a mark this server sent, got {name[:64]!r}")
        turn, end = entry
        if turn > self._heard_turn:
            self._heard_turn, self._heard = turn, end
        elif turn == self._heard_turn:
            self._heard = max(self._heard, end)

    def played_seconds(self) -> float:
        """Seconds of the turn being sent that the caller has heard."""
        turn = self._turn if self._sent else self._turn - 1
        return self._heard / self._rate if self._heard_turn == turn else 0.0

    @property
    def outstanding(self) -> int:
        return len(self._outstanding)
