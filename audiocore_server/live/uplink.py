"""Everything but the microphone's audio on its way to the model's queue:
the user's typed turns, images and content, the turn edges, the answers to
delegated tool calls, a background task's outcome, the end.

Typed turns, images and content are bounded (the queue's content room):
past it they are dropped, with one error per overload episode. Turn edges,
tool answers and the server's own requests pass the bounds (a few bytes
each; dropped, a turn would stay open or a call unanswered for good, and no
client retries them). Every edge first flushes the microphone's path, so a
turn holds exactly the audio sent inside it. What each request means for
the line (``audiocore_server/live/line.py``) is told to it here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.adk.agents.live_request_queue import LiveRequest
from google.genai import types

from ..wire.chunks import SpeechState
from ..wire.fields import Image, InputError
from .line import LinePolicy
from .mic import MicPath
from .request_queue import BoundedLiveRequestQueue

OVERLOADED = "the model is not keeping up; messages are dropped until it catches up"


class Uplink:
    def __init__(
        self,
        queue: BoundedLiveRequestQueue,
        mic: MicPath,
        line: LinePolicy,
        *,
        report: Callable[[str], None],
        edges_refused: bool,
        on_speech: Callable[[SpeechState], None] = lambda _: None,
        on_typed_turn: Callable[[], None] = lambda: None,
    ) -> None:
        self._queue = queue
        self._mic = mic
        self._line = line
        self._report = report
        # Gemini closes the live session (1007) on activity signals while its
        # own voice activity detection is on.
        self._edges_refused = edges_refused
        self._overloaded = False
        self._on_speech = on_speech  # the client's edges are its speech's
        self._on_typed_turn = on_typed_turn  # a typed turn went to the model
        # A tool's answer went to the model: it owes the turn's answer (the
        # pump's watchdog, ``ModelEvents.owe``, once the run has started).
        self.on_tool_answer: Callable[[], None] = lambda: None

    def user_turn(self, text: str | None, images: Sequence[Image] = ()) -> None:
        for image in images:
            self.content(LiveRequest(blob=types.Blob(mime_type=image.media_type, data=image.data)))
        if text is not None:
            content = types.Content(role="user", parts=[types.Part(text=text)])
            if self.content(LiveRequest(content=content)):
                self._line.turn_sent()
                self._on_typed_turn()

    def content(self, request: LiveRequest) -> bool:
        """Queue a typed turn, an image, content; past the bound, dropped."""
        if self._queue.offer_content(request):
            self._overloaded = False
            return True
        if not self._overloaded:
            self._overloaded = True
            self._report(OVERLOADED)
        return False

    def activity_start(self) -> None:
        self._check_edge("activity_start")
        self._mic.flush()
        self._queue.send_activity_start()
        self._line.user_started()
        self._on_speech("started")

    def activity_end(self) -> None:
        self._check_edge("activity_end")
        self._mic.flush()
        self._queue.send_activity_end()
        self._line.user_ended()
        self._on_speech("stopped")

    def _check_edge(self, edge: str) -> None:
        if self._edges_refused:
            raise InputError(
                f'{edge}: this model takes turn edges only with turnDetection "manual"'
            )

    def audio_stop(self) -> None:
        """The microphone is off: end what was said."""
        self._mic.flush()
        self._queue.send_audio_stream_end()

    def close(self) -> None:
        """The client is done: the run ends once the model's connection closes."""
        self._mic.flush()
        self._queue.close()

    def state(self, delta: Mapping[str, Any]) -> None:
        self._queue.send(LiveRequest(state_delta=dict(delta)))

    def tool_answer(
        self, responses: Sequence[types.FunctionResponse], state_delta: Mapping[str, Any]
    ) -> None:
        """The function responses of one model step, in one content: the
        model answers once for all of them. Past the bound: the model waits
        for this answer."""
        parts = [types.Part(function_response=response) for response in responses]
        content = types.Content(role="user", parts=parts)
        self._queue.send(LiveRequest(content=content, state_delta=dict(state_delta) or None))
        self.on_tool_answer()

    def task_outcome(self, text: str) -> None:
        # Past the bound: the outcome is waited for, not realtime input.
        content = types.Content(role="user", parts=[types.Part(text=text)])
        self._queue.send(LiveRequest(content=content))
        self._line.turn_sent()
