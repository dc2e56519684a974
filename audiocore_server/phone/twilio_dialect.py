"""A Twilio call as a live dialect: the same data path as ``/ws``, with
Twilio's messages and its audio format (docs/telephony.md).

* In: ``media`` is μ-law at 8 kHz, which the microphone's path takes to
  the model's rate in one fused audiocore pass (``Resampler(8000, 16000,
  input="ulaw")``, ``audio/conversion.py``); ``dtmf`` is a text turn for
  the agent (``DTMF_TURN``); ``mark`` replies move the heard position
  (``marks.py``); ``stop`` ends the model's run, then the call.
* Out: the model's audio is resampled to 8 kHz and paced as on every
  surface (``audio/pacer.py`` conceals, pads and fades in PCM16); each
  paced frame leaves as μ-law ``media`` followed by a ``mark``; a barge-in
  (``data-interrupted``) is a ``clear``. Nothing else the other dialects
  send means anything to Twilio: errors go to the log, with the call's id.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from starlette.types import Message
from starlette.websockets import WebSocket

import audiocore

from ..live.frames import Wire
from ..live.opening import Opening
from ..tools.spec import ToolSpec
from ..turns.events import Translator, TurnTranslator
from ..wire import chunks, fields, protocol, twilio
from .marks import HeardMarks

log = logging.getLogger(__name__)

PHONE_RATE = 8000
PHONE_INPUT = protocol.InputFormat(PHONE_RATE, "ulaw", 1)
PHONE_OUTPUT = protocol.OutputFormat(PHONE_RATE)
# What the agent reads when the caller presses a key: a user turn of text.
DTMF_TURN = "The caller pressed the key {digit} on the phone's keypad."


class TwilioWire:
    """The paced items of a conversation as Twilio's messages."""

    name = "phone"
    sends_session = False
    binary_audio = False

    def __init__(self, stream_sid: str, call_sid: str, marks: HeardMarks) -> None:
        self._stream_sid = stream_sid
        self._call_sid = call_sid
        self._marks = marks
        self.heard = marks.played_seconds

    def chunk_frames(self, chunk: chunks.Chunk) -> list[str]:
        if isinstance(chunk, chunks.Interrupted):
            self._marks.cleared()
            return [twilio.clear(self._stream_sid)]
        if isinstance(chunk, chunks.Finish):
            self._marks.turn_ended()
        elif isinstance(chunk, chunks.Error):
            log.warning("phone call %s: %s", self._call_sid, chunk.text)
        return []

    def audio_frames(self, pcm: bytes, sample_rate: int) -> list[str | bytes]:
        name = self._marks.sent(len(pcm) // 2)
        return [
            twilio.media(self._stream_sid, audiocore.pcm16_to_ulaw(pcm)),
            twilio.mark(self._stream_sid, name),
        ]


class TwilioDialect:
    """One call's dialect: its ``start`` was read before the conversation
    (its credentials are checked before the socket holds a live place:
    ``phone/stream.py``)."""

    name = "phone"
    error_before_close = False  # the reason is logged (connection.py) and in the close frame

    def __init__(
        self, start: twilio.StreamStart, user_id: str, app: str | None, user_key: str | None
    ) -> None:
        self.start = start
        self._user_id = user_id
        self._app = app
        self._user_key = user_key
        self.marks = HeardMarks(PHONE_RATE)

    async def open(self, ws: WebSocket, timeout_s: float, limits: fields.Limits) -> Opening:
        start = protocol.Start(
            PHONE_INPUT, PHONE_OUTPUT, None, user_key=self._user_key, app=self._app
        )
        return Opening(start, user_id=self._user_id)

    def decode(
        self, message: Message, fmt: protocol.InputFormat, limits: fields.Limits
    ) -> Sequence[protocol.ClientMessage]:
        text = message.get("text")
        msg = twilio.decode(text if text is not None else message.get("bytes") or b"")
        if isinstance(msg, twilio.Media):
            if not msg.payload:
                return []
            return [protocol.Audio(msg.payload, PHONE_INPUT)]
        if isinstance(msg, twilio.MarkReply):
            self.marks.replied(msg.name)
            return []
        if isinstance(msg, twilio.Dtmf):
            return [protocol.Text(DTMF_TURN.format(digit=msg.digit))]
        if isinstance(msg, twilio.Stop):
            return [protocol.Close()]
        event = "start" if isinstance(msg, twilio.StreamStart) else "connected"
        raise fields.InputError(f"{event}: only once, before the call's audio")

    def translator(self, tools: Mapping[str, ToolSpec], model_name: str) -> Translator:
        return TurnTranslator(tools, model_name)

    def wire(self, output: protocol.OutputFormat) -> Wire:
        return TwilioWire(self.start.stream_sid, self.start.call_sid, self.marks)
