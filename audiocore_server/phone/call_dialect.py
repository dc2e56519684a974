"""A phone call as a live dialect: the same data path as ``/ws``, with a
carrier's messages and the phone's audio format (docs/telephony.md). The
carriers (Twilio, Telnyx: ``CARRIERS``) differ only in their messages'
envelopes (``wire/twilio.py``, ``wire/telnyx.py``); everything here is
theirs alike.

* In: ``media`` is μ-law at 8 kHz, which the microphone's path takes to
  the model's rate in one fused audiocore pass (``Resampler(8000, 16000,
  input="ulaw")``, ``audio/conversion.py``), in the carrier's order where
  frames may come out of it (``InOrder``); ``dtmf`` is a text turn for
  the agent (``DTMF_TURN``); ``mark`` replies move the heard position
  (``marks.py``); ``stop`` ends the model's run, then the call.
* Out: the model's audio is resampled to 8 kHz and paced as on every
  surface (``audio/pacer.py`` conceals, pads and fades in PCM16); each
  paced frame leaves as μ-law ``media`` followed by a ``mark``; a barge-in
  (``data-interrupted``) is a ``clear``. Nothing else the other dialects
  send means anything to a carrier: errors go to the log, with the call's id.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence

from starlette.types import Message
from starlette.websockets import WebSocket

import audiocore

from ..live.frames import Wire
from ..live.opening import Opening
from ..tools.spec import ToolSpec
from ..turns.events import Translator, TurnTranslator
from ..wire import call_messages, chunks, fields, protocol, telnyx, twilio
from .marks import HeardMarks

log = logging.getLogger(__name__)

PHONE_RATE = 8000
PHONE_INPUT = protocol.InputFormat(PHONE_RATE, "ulaw", 1)
PHONE_OUTPUT = protocol.OutputFormat(PHONE_RATE)
# What the agent reads when the caller presses a key: a user turn of text.
DTMF_TURN = "The caller pressed the key {digit} on the phone's keypad."
# Frames that came before their turn wait for the missing one this long
# (frames of 20 ms): past it, the missing one is given up.
REORDER_WINDOW = 8


@dataclasses.dataclass(frozen=True)
class Carrier:
    name: str
    decode: Callable[[str | bytes], call_messages.CallMessage]
    encoder: Callable[[str], call_messages.CallEncoder]  # for a stream's id


TWILIO = Carrier("twilio", twilio.decode, twilio.TwilioEncoder)
TELNYX = Carrier("telnyx", telnyx.decode, lambda stream_id: telnyx.TelnyxEncoder())
CARRIERS = {carrier.name: carrier for carrier in (TWILIO, TELNYX)}


class InOrder:
    """Media frames in their carrier's count order (Telnyx's may come out
    of it): an early frame waits for those before it, at most
    ``REORDER_WINDOW`` frames; a frame later than its place is dropped."""

    def __init__(self) -> None:
        self._next: int | None = None
        self._held: dict[int, bytes] = {}
        self.dropped = 0

    def put(self, chunk: int | None, payload: bytes) -> list[bytes]:
        if chunk is None:
            return [payload]
        if self._next is None:
            self._next = chunk
        if chunk < self._next or chunk in self._held:
            self.dropped += 1
            return []
        self._held[chunk] = payload
        ready = []
        while True:
            if self._next in self._held:
                ready.append(self._held.pop(self._next))
                self._next += 1
            elif len(self._held) >= REORDER_WINDOW:
                self._next = min(self._held)  # the missing one is given up
            else:
                return ready


class CallWire:
    """The paced items of a conversation as a carrier's messages."""

    name = "phone"
    sends_session = False
    binary_audio = False

    def __init__(
        self, encoder: call_messages.CallEncoder, call_sid: str, marks: HeardMarks
    ) -> None:
        self._encoder = encoder
        self._call_sid = call_sid
        self._marks = marks
        self.heard = marks.played_seconds

    def chunk_frames(self, chunk: chunks.Chunk) -> list[str]:
        if isinstance(chunk, chunks.Interrupted):
            self._marks.cleared()
            return [self._encoder.clear()]
        if isinstance(chunk, chunks.Finish):
            self._marks.turn_ended()
        elif isinstance(chunk, chunks.Error):
            log.warning("phone call %s: %s", self._call_sid, chunk.text)
        return []

    def audio_frames(self, pcm: bytes, sample_rate: int) -> list[str | bytes]:
        name = self._marks.sent(len(pcm) // 2)
        return [
            self._encoder.media(audiocore.pcm16_to_ulaw(pcm)),
            self._encoder.mark(name),
        ]


class CallDialect:
    """One call's dialect: its ``start`` was read before the conversation
    (its credentials are checked before the socket holds a live place:
    ``phone/stream.py``)."""

    name = "phone"
    error_before_close = False  # the reason is logged (connection.py) and in the close frame

    def __init__(
        self,
        carrier: Carrier,
        start: call_messages.StreamStart,
        user_id: str,
        app: str | None,
        user_key: str | None,
        *,
        echo_cancellation: bool = False,
    ) -> None:
        self.carrier = carrier
        self._echo: protocol.EchoCancellation = "server" if echo_cancellation else "client"
        self.start = start
        self._in_order = InOrder()
        self._user_id = user_id
        self._app = app
        self._user_key = user_key
        self.marks = HeardMarks(PHONE_RATE)

    async def open(self, ws: WebSocket, timeout_s: float, limits: fields.Limits) -> Opening:
        start = protocol.Start(
            PHONE_INPUT,
            PHONE_OUTPUT,
            None,
            user_key=self._user_key,
            app=self._app,
            echo_cancellation=self._echo,
        )
        # A caller's echo is the line's (the handset cancels its own
        # loudspeaker): faint, and the caller's first barge-in must be heard.
        return Opening(start, user_id=self._user_id, mute_while_learning=False)

    def decode(
        self, message: Message, fmt: protocol.InputFormat, limits: fields.Limits
    ) -> Sequence[protocol.ClientMessage]:
        text = message.get("text")
        msg = self.carrier.decode(text if text is not None else message.get("bytes") or b"")
        if isinstance(msg, call_messages.Media):
            ready = self._in_order.put(msg.chunk, msg.payload)
            return [protocol.Audio(payload, PHONE_INPUT) for payload in ready if payload]
        if isinstance(msg, call_messages.MarkReply):
            self.marks.replied(msg.name)
            return []
        if isinstance(msg, call_messages.Dtmf):
            return [protocol.Text(DTMF_TURN.format(digit=msg.digit))]
        if isinstance(msg, call_messages.Stop):
            return [protocol.Close()]
        if isinstance(msg, call_messages.CarrierError):
            log.warning("phone call %s: %s", self.start.call_sid, msg.text)
            return []
        event = "start" if isinstance(msg, call_messages.StreamStart) else "connected"
        raise fields.InputError(f"{event}: only once, before the call's audio")

    def translator(self, tools: Mapping[str, ToolSpec], model_name: str) -> Translator:
        return TurnTranslator(tools, model_name)

    def wire(self, output: protocol.OutputFormat) -> Wire:
        encoder = self.carrier.encoder(self.start.stream_sid)
        return CallWire(encoder, self.start.call_sid, self.marks)
