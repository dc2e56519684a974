"""The seed project's turns (``/live``): the user's words in the message.

The seed's server (``stream_protocol.py``, ``_process_input_transcription``)
streams the user's input transcription as a text part of the message it is
sending — ``text-start`` / ``text-delta`` / ``text-end`` with the id
``<messageId>_input_text`` — and its client shows every text part of a
message, so the user sees what was heard. An AI SDK stream can only add parts
to the assistant message it is streaming, so that is where the words go, ahead
of the agent's own. ``SeedTurnTranslator`` does the same; the transient
``data-transcript`` of our protocol still comes too (for clients that build a
user message from it, as ``web/sdk/chat-transport.js`` does on ``/ws``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..tools.spec import ToolSpec
from .events import Outgoing, TextPart, TurnTranslator

INPUT_TEXT_SUFFIX = "_input_text"


class SeedTurnTranslator(TurnTranslator):
    def __init__(self, tools: Mapping[str, ToolSpec] | None = None, model: str = "") -> None:
        super().__init__(tools, model)
        self._words = TextPart(lambda: f"{self.message_id}{INPUT_TEXT_SUFFIX}")

    def _heard(self, text: str, final: bool, out: list[Outgoing]) -> None:
        super()._heard(text, final, out)
        if final:
            self._words.final(text, out)
        else:
            self._words.delta(text, out)

    def _end_texts(self, out: list[Outgoing]) -> None:
        self._words.end(out)
        super()._end_texts(out)
