"""The microphone's way to the model: client audio → 16 kHz PCM16 chunks in
the model's request queue.

``MicPath`` owns the input converter (``audiocore_server/audio/conversion.py``: one fused
audiocore pass, re-framed into steady chunks), the echo canceller when the
client has none (``audiocore_server/audio/echo.py``), the voice check on what it
hands over (``voice_until``: when the user's voice, with its hangover, ends),
and the offers to the queue's realtime room: past the room's bound a chunk
is dropped, with one error per overload episode, not one per chunk.

Barge-in: while an answer plays and the user is silent, each client frame
is checked for voice as it comes (a few µs); the first voiced one is told
(``on_voice``: the turn timer's barge-in latency starts there) and goes to
the model at once with what was waiting, instead of when its chunk fills:
the model's voice detection hears it up to a chunk (50 ms) sooner. The
price: a voiced 20 ms blip over an answer (a click, a burst of residual
echo) reaches the model alone, where its 50 ms chunk would have averaged
it down; a detector on chunks, like the offline model's, then takes it for
speech. With the server's echo canceller the frame is checked cleaned (the
converter cleans each frame as it comes, before the cut): the answer's own
echo is gone from it, and the cut comes the canceller's latency (16 ms)
later. What is left of the echo pays that price too: before the canceller
followed shifts of the echo path within a block, the room tests' agent
interrupted itself two to three times as often this way as with the frame
waiting for its chunk (docs/audio.md, "Tried end to end").
"""

from __future__ import annotations

import time
from collections.abc import Callable

from google.genai import types

from ..audio.conversion import InputAudio
from ..audio.echo import MicEcho
from ..audio.voice import LINE_HANGOVER_S, voiced
from ..wire.protocol import Audio
from .request_queue import BoundedLiveRequestQueue

MODEL_AUDIO_MIME = "audio/pcm;rate={rate}"
OVERLOADED = "the model is not keeping up; input audio is being dropped"


class MicPath:
    def __init__(
        self,
        queue: BoundedLiveRequestQueue,
        *,
        model_rate: int,
        chunk_ms: int,
        report: Callable[[str], None],
        echo: MicEcho | None = None,
        playback_ends_at: Callable[[], float] = lambda: 0.0,
        on_voice: Callable[[float], None] = lambda at: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._queue = queue
        self._model_rate = model_rate
        self._chunk_ms = chunk_ms
        self._mime = MODEL_AUDIO_MIME.format(rate=model_rate)
        self._report = report
        # At its own rate: the model's (each frame's converted audio) or the
        # client's lower one (each frame before the conversion).
        self._clean = echo.cancel if echo is not None else None
        self._clean_rate = echo.rate if echo is not None else None
        self._clock = clock
        self._playback_ends_at = playback_ends_at  # the answer's audio, on ``clock``
        self._on_voice = on_voice
        self._converter: InputAudio | None = None
        self._overloaded = False
        self.voice_until = 0.0  # on ``clock``: the user's voice, with its hangover
        self.sent = False  # the last call handed audio to the model

    def audio(self, audio: Audio) -> None:
        """Convert and offer the client's audio (whole chunks; the rest waits)."""
        converter = self._converter
        if converter is None or (
            converter.format is not audio.format and converter.format != audio.format
        ):
            # The first audio, or a client that changed its rate (ADK's
            # blobs say theirs each time): finish the old stream first.
            tail = converter.flush() if converter is not None else []
            converter = self._converter = InputAudio(
                audio.format,
                out_rate=self._model_rate,
                chunk_ms=self._chunk_ms,
                clean=self._clean,  # the same canceller: the room did not change
                clean_rate=self._clean_rate,
            )
            self._offer(tail)
        # (Passed per call: a bound method of its own kept here is a cycle.)
        self._offer(converter.process(audio.data, self._voice_over_answer))

    def _voice_over_answer(self, pcm: bytes) -> bool:
        """The user's voice begins while an answer plays: told, and sent now."""
        now = self._clock()
        if now < self.voice_until or now >= self._playback_ends_at() or not voiced(pcm):
            return False
        self._on_voice(now)
        return True

    def flush(self) -> None:
        """What was said ends here (a turn edge, the microphone off, the
        end): the converter's tail and any short remainder go now."""
        if self._converter is not None:
            self._offer(self._converter.flush())

    def _offer(self, chunks: list[bytes]) -> None:
        self.sent = bool(chunks)
        if not chunks:
            return  # most client frames: less than a chunk so far
        if voiced(chunks[-1]):
            self.voice_until = self._clock() + LINE_HANGOVER_S
        mime, queue = self._mime, self._queue
        for chunk in chunks:
            # Built without pydantic's validation (2.1 µs instead of 3.5, at
            # 50 chunks a second): the fields are our own bytes and string.
            if queue.offer_realtime(types.Blob.model_construct(mime_type=mime, data=chunk)):
                self._overloaded = False
            elif not self._overloaded:
                self._overloaded = True
                self._report(OVERLOADED)
