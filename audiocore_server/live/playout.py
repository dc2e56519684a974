"""The model's answer on its way to the client: events → the dialect's
translator → audio at the client's rate → the pacer; and barge-in.

``Playout.on_event`` puts what one event says in the pacer in order: chunks
as they are, the model's audio converted (``OutputAudio``), a turn's end as
the pacer's turn end, and the event's delegated tool calls handed to the
session's delegations, whose questions to the client end the step (and the
client's stream). ``barge_in`` drops the audio not yet sent, tells the
client how much, and cancels the calls waiting for the user; ``played``
tells the model's connection what the client played
(the port ``audiocore_server/models/played_audio.py``, ``played.py`` here).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from google.adk.events import Event
from google.genai import types

from ..audio.conversion import OutputAudio
from ..audio.pacer import OutputPacer
from ..ops.turn_timing import TurnTimer
from ..tools.calls import delegated_calls
from ..tools.confirmation import KeptCall
from ..tools.delegation import SessionDelegations
from ..tools.spec import ToolSpec
from ..turns.events import ModelAudio, Translator, TurnEnd
from ..wire import chunks
from .played import PlayoutPosition

log = logging.getLogger(__name__)


class Playout:
    def __init__(
        self,
        translator: Translator,
        pacer: OutputPacer,
        *,
        output_rate: int,
        tools: Mapping[str, ToolSpec],
        delegations: SessionDelegations,
        on_turn_end: Callable[[], None],
        on_barge_in: Callable[[], None],
        timer: TurnTimer,
        heard: Callable[[], float] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._translator = translator
        self._pacer = pacer
        self._audio = OutputAudio(output_rate)
        self._tools = tools
        self._delegations = delegations
        self._on_turn_end = on_turn_end
        self._on_barge_in = on_barge_in
        self._timer = timer
        self._clock = clock
        # For the model's connection: what the client says it played (a
        # phone call's marks), else what the pacer has sent, less its lead.
        self.played = PlayoutPosition(heard or pacer.played_seconds)

    async def on_event(self, event: Event) -> None:
        received = self._clock()
        pacer, translator, timer = self._pacer, self._translator, self._timer
        if event.interrupted:
            self.barge_in("model")
        _time_event(timer, event)
        turn = translator.turn  # the pacer rejects late audio of a flushed turn
        for item in translator.translate(event):
            if isinstance(item, ModelAudio):
                timer.model_audio()
                await pacer.put_audio(
                    self._audio.process(item.pcm, item.sample_rate), received, turn
                )
            elif isinstance(item, TurnEnd):
                await pacer.put_audio(self._audio.end_turn(), received, turn)
                pacer.end_turn()
                turn += 1
                timer.turn_end(interrupted=bool(event.interrupted))
                self._on_turn_end()
            else:
                await pacer.put_message(item)
        for chunk in self._delegate(event):
            await pacer.put_message(chunk)

    def _delegate(self, event: Event) -> list[chunks.Chunk]:
        """Hand the event's delegated calls to the session's delegations;
        returns what asks the client about them, ending their step and the
        client's stream."""
        calls = delegated_calls(event, self._tools)
        if not calls:
            return []
        asks: list[chunks.Chunk] = []
        message_id = self._translator.message_id
        for call, spec in calls:
            asks += self._delegations.add(
                call.id or "", spec, dict(call.args or {}), message_id, step=event.id
            )
        return [*asks, *self._translator.end_step(), chunks.END_OF_STREAM]

    def confirmation_requested(self, kept: KeptCall) -> bool:
        """An ADK tool's call kept for the user's confirmation
        (``tools/confirmation.py``, called while ADK runs the call, after
        the call's own event went through ``on_event``): a delegated call
        like the others, asked in its own step."""
        asks = self._delegations.add(
            kept.call_id,
            kept.spec,
            kept.args,
            self._translator.message_id,
            confirmation=kept.confirmation,
        )
        for chunk in [*asks, *self._translator.end_step(), chunks.END_OF_STREAM]:
            if not self._pacer.put_message_nowait(chunk):
                # The client is not reading: the call waits for its deadline.
                log.warning("confirmation of %s not asked: client not reading", kept.spec.name)
                break
        return True

    def barge_in(self, source: chunks.InterruptSource) -> None:
        pacer = self._pacer
        if source == "client":
            self.played.user_stopped()  # before the flush: what was heard
        dropped_ms = round(pacer.buffered_seconds * 1000)
        self._timer.barge_in()
        pacer.flush(chunks.Interrupted(source, dropped_ms))
        self._audio.end_turn(discard=True)
        self._on_barge_in()
        who = "user" if source == "client" else "model"
        self._delegations.cancel_all(f"interrupted by the {who}")


def _time_event(timer: TurnTimer, event: Event) -> None:
    """What an event tells the turn timer besides its audio: the model's
    voice detection heard the user stop, or the model began to answer (in
    words, a transcript of its speech, or a tool call)."""
    activity = event.voice_activity
    if (
        activity is not None
        and activity.voice_activity_type == types.VoiceActivityType.ACTIVITY_END
    ):
        timer.user_done("model")
    content = event.content
    if (content is not None and content.role == "model" and content.parts) or (
        event.output_transcription is not None
    ):
        timer.model_output()
