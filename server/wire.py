"""How chunks become WebSocket frames: one class per dialect.

The connection produces the same items whatever the client — UI message
chunks, paced PCM16 audio frames, and two internal markers
(``protocol.END_OF_STREAM``, a pong) — and its wire turns them into frames.

* ``UiStreamWire`` (``/ws``, docs/protocol.md): one chunk per text frame;
  audio as ``data-pcm`` chunks or binary frames; the markers are dropped.
* ``SseOverWebSocketWire`` (``/live``, the seed project's BIDI transport):
  each chunk is one Server-Sent Event in its own text frame
  (``data: {json}\\n\\n``); ``data: [DONE]`` ends a client-side stream (after
  ``finish``, and where a step waits for the client); audio only as
  ``data-pcm``; a ``ping`` is answered with a plain JSON ``pong``. No
  ``data-session``: that client does not expect one.
"""

from __future__ import annotations

from typing import Any, Protocol

from . import protocol

Chunk = dict[str, Any]
_DONE = "data: [DONE]\n\n"


class Wire(Protocol):
    name: str
    sends_session: bool  # a data-session chunk opens the conversation
    binary_audio: bool

    def chunk_frames(self, chunk: Chunk) -> list[str]: ...

    def audio_frame(self, pcm: bytes, sample_rate: int) -> str | bytes: ...


class UiStreamWire:
    name = "ws"
    sends_session = True

    def __init__(self, binary_audio: bool = False) -> None:
        self.binary_audio = binary_audio

    def chunk_frames(self, chunk: Chunk) -> list[str]:
        if chunk is protocol.END_OF_STREAM or chunk["type"] == "pong":
            return []
        return [protocol.encode(chunk)]

    def audio_frame(self, pcm: bytes, sample_rate: int) -> str | bytes:
        if self.binary_audio:
            return pcm
        return protocol.encode(protocol.pcm_chunk(pcm, sample_rate))


class SseOverWebSocketWire:
    name = "live"
    sends_session = False
    binary_audio = False  # its client fails on binary frames

    def __init__(self) -> None:
        # Its client closes a stream by itself at the finish-step that follows
        # a tool-approval-request; a [DONE] after that would close the next one.
        self._closes_itself = False

    def chunk_frames(self, chunk: Chunk) -> list[str]:
        if chunk is protocol.END_OF_STREAM:
            closed, self._closes_itself = self._closes_itself, False
            return [] if closed else [_DONE]
        kind = chunk["type"]
        if kind == "pong":
            return [protocol.encode(chunk)]  # not an event: read by its ping timer
        if kind == "tool-approval-request":
            self._closes_itself = True
        frames = [f"data: {protocol.encode(chunk)}\n\n"]
        if kind == "finish":
            self._closes_itself = False
            frames.append(_DONE)
        return frames

    def audio_frame(self, pcm: bytes, sample_rate: int) -> str | bytes:
        return f"data: {protocol.encode(protocol.pcm_chunk(pcm, sample_rate))}\n\n"
