"""How chunks become WebSocket frames: one class per dialect.

The connection produces the same typed items whatever the client — UI message
chunks, paced PCM16 audio frames, and two internal markers
(``chunks.EndOfStream``, ``chunks.Pong``) — and its wire turns them into frames.

* ``UiStreamWire`` (``/ws``, docs/protocol.md): one chunk per text frame;
  audio as ``data-pcm`` chunks or binary frames; the markers are dropped.
* ``SseOverWebSocketWire`` (``/live``, the seed project's BIDI transport):
  each chunk is one Server-Sent Event in its own text frame
  (``data: {json}\\n\\n``); ``data: [DONE]`` ends a client-side stream (after
  ``finish``, and where a step waits for the client's next request — not
  where it asks the client to run a tool, whose result comes back on the
  socket while the stream stays open); audio only as
  ``data-pcm``; a ``ping`` is answered with a plain JSON ``pong``. No
  ``data-session``: that client does not expect one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..wire import chunks

_DONE = "data: [DONE]\n\n"


class Wire(Protocol):
    name: str
    sends_session: bool  # a data-session chunk opens the conversation
    binary_audio: bool

    @property
    def heard(self) -> Callable[[], float] | None:
        """Seconds of the model's current turn the client has played, where
        the client says so (a phone call's marks); None: the pacer's clock."""

    def chunk_frames(self, chunk: chunks.Chunk) -> list[str]: ...

    def audio_frames(self, pcm: bytes, sample_rate: int) -> list[str | bytes]: ...


class UiStreamWire:
    name = "ws"
    sends_session = True
    heard = None

    def __init__(self, binary_audio: bool = False) -> None:
        self.binary_audio = binary_audio

    def chunk_frames(self, chunk: chunks.Chunk) -> list[str]:
        if isinstance(chunk, (chunks.EndOfStream, chunks.Pong)):
            return []
        return [chunks.encode(chunk)]

    def audio_frames(self, pcm: bytes, sample_rate: int) -> list[str | bytes]:
        if self.binary_audio:
            return [pcm]
        return [chunks.encode_pcm(pcm, sample_rate)]


class SseOverWebSocketWire:
    name = "live"
    sends_session = False
    binary_audio = False  # its client fails on binary frames
    heard = None

    def __init__(self) -> None:
        # Its client closes a stream by itself at the finish-step that follows
        # a tool-approval-request; a [DONE] after that would close the next one.
        self._closes_itself = False
        # It runs a tool it is asked to run (clientExecutes) inside the open
        # stream and sends the tool_result on the socket: the rest of the turn
        # (the output, the answer, finish) must reach that same stream, so no
        # [DONE] there — after one, its client drops every chunk until the next
        # request.
        self._client_runs_tool = False

    def chunk_frames(self, chunk: chunks.Chunk) -> list[str]:
        if isinstance(chunk, chunks.EndOfStream):
            stays_open = self._closes_itself or self._client_runs_tool
            self._closes_itself = self._client_runs_tool = False
            return [] if stays_open else [_DONE]
        if isinstance(chunk, chunks.Pong):
            return [chunks.encode(chunk)]  # not an event: read by its ping timer
        if isinstance(chunk, chunks.ToolApprovalRequest):
            self._closes_itself = True
        if isinstance(chunk, chunks.ToolInput) and chunk.client_executes:
            self._client_runs_tool = True
        frames = [f"data: {chunks.encode(chunk)}\n\n"]
        if isinstance(chunk, chunks.Finish):
            self._closes_itself = self._client_runs_tool = False
            frames.append(_DONE)
        return frames

    def audio_frames(self, pcm: bytes, sample_rate: int) -> list[str | bytes]:
        return [f"data: {chunks.encode_pcm(pcm, sample_rate)}\n\n"]
