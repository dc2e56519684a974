"""What the local model says, deterministically: pure functions that build
the server messages of a reply, and the conversation state a resumption
handle restores.

It understands no speech, like the offline model (``audiocore_server/offline/model.py``,
whose turn detector, utterance description, audio cue and tool cues this
reuses so the two cannot drift apart): a spoken turn is answered with an
input transcription that describes the audio, an output transcription, and
the user's own audio at 24 kHz; a typed turn with "You said: …" and a short
tone; a typed tool cue with a ``toolCall``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Iterator
from typing import Any

import audiocore
from audiocore_server.offline import call_cues
from audiocore_server.offline.model import _CUES, audio_cue
from audiocore_server.offline.speech import INPUT_RATE, describe_utterance

from .wire import encode_bytes

OUTPUT_RATE = 24_000
OUTPUT_MIME = f"audio/pcm;rate={OUTPUT_RATE}"
# https://ai.google.dev/gemini-api/docs/tokens: audio is 32 tokens per
# second; an image (a video frame) 258.
AUDIO_TOKENS_PER_S = 32
FRAME_TOKENS = 258

Message = dict[str, Any]


def text_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def audio_tokens(samples: int, rate: int) -> int:
    return math.ceil(samples / rate * AUDIO_TOKENS_PER_S)


@dataclasses.dataclass
class Conversation:
    """What the model remembers: what a resumption handle restores, and what
    the context window holds (turns as (role, text, tokens))."""

    turns: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(t for _, _, t in self.turns)

    @property
    def user_turns(self) -> int:
        return sum(1 for role, _, _ in self.turns if role == "user")

    def add(self, role: str, text: str, tokens: int) -> None:
        self.turns.append((role, text, tokens))

    def slide(self, target_tokens: int) -> int:
        """Drop the oldest turns until at most ``target_tokens`` remain (the
        sliding window); returns how many were dropped."""
        dropped = 0
        while self.turns and self.tokens > target_tokens:
            self.turns.pop(0)
            dropped += 1
        return dropped

    def snapshot(self) -> Conversation:
        return copy.deepcopy(self)


# ---------------------------------------------------------------- messages


def server_content(**fields: Any) -> Message:
    return {"serverContent": fields}


def audio_part(pcm: bytes) -> Message:
    return {"inlineData": {"mimeType": OUTPUT_MIME, "data": encode_bytes(pcm)}}


def resumption_update(handle: str | None) -> Message:
    if handle is None:  # "Empty if resumable=false" (while generating / tools pending)
        return {"sessionResumptionUpdate": {"resumable": False}}
    return {"sessionResumptionUpdate": {"newHandle": handle, "resumable": True}}


def usage(prompt_tokens: int, response_tokens: int) -> Message:
    return {
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "responseTokenCount": response_tokens,
            "totalTokenCount": prompt_tokens + response_tokens,
            "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": prompt_tokens}],
            "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": response_tokens}],
        }
    }


def _pieces(text: str, count: int) -> list[str]:
    """``text`` cut at word boundaries into about ``count`` pieces that join back to it."""
    words = text.split(" ")
    step = max(1, math.ceil(len(words) / count))
    pieces = [" ".join(words[i : i + step]) for i in range(0, len(words), step)]
    return [p if i == 0 else " " + p for i, p in enumerate(pieces)]


@dataclasses.dataclass
class Reply:
    """One model turn: the messages before the audio, the audio stream (each
    item a message with one audio chunk, maybe with a transcription), and the
    closing messages. ``audio_samples`` at 24 kHz."""

    before: list[Message]
    stream: list[Message]
    audio_samples: int
    words: str  # what the model said (its output transcription)

    def messages(self) -> Iterator[Message]:
        yield from self.before
        yield from self.stream


def spoken_reply(
    pcm16k: bytes,
    *,
    family: str,
    input_transcription: bool,
    output_transcription: bool,
    chunk_ms: int,
) -> tuple[str, Reply]:
    """The answer to an utterance: (what the user "said", the reply)."""
    heard = describe_utterance(pcm16k)
    seconds = len(pcm16k) / 2 / INPUT_RATE
    words = f"I heard {seconds:.2f} seconds of audio. Here it is back."
    echo = bytes(audiocore.resample(pcm16k, INPUT_RATE, OUTPUT_RATE, input="s16", output="s16"))
    before: list[Message] = []
    if input_transcription:
        if family == "3.x":  # one final input transcription (ADK takes only that)
            before.append(server_content(inputTranscription={"text": heard}))
        else:
            before += [server_content(inputTranscription={"text": p}) for p in _pieces(heard, 3)]
    return heard, Reply(
        before,
        _audio_stream(echo, words, family, output_transcription, chunk_ms),
        len(echo) // 2,
        words,
    )


def text_reply(words: str, *, family: str, output_transcription: bool, chunk_ms: int) -> Reply:
    cue = audio_cue()
    return Reply(
        [], _audio_stream(cue, words, family, output_transcription, chunk_ms), len(cue) // 2, words
    )


def _audio_stream(
    pcm: bytes, words: str, family: str, transcribe: bool, chunk_ms: int
) -> list[Message]:
    step = chunk_ms * OUTPUT_RATE // 1000 * 2
    chunks = [pcm[i : i + step] for i in range(0, len(pcm), step)]
    pieces = _pieces(words, max(1, min(len(chunks), 4))) if transcribe else []
    stream: list[Message] = []
    for k, chunk in enumerate(chunks):
        said = pieces[k] if k < len(pieces) else None
        turn = {"modelTurn": {"parts": [audio_part(chunk)]}}
        if said is not None and family == "3.x":
            # gemini-3.x: "a single server event can contain multiple content
            # parts simultaneously (for example, inlineData and transcript)".
            stream.append(server_content(**turn, outputTranscription={"text": said}))
            continue
        if said is not None:  # gemini-2.5: one part per event
            stream.append(server_content(outputTranscription={"text": said}))
        stream.append(server_content(**turn))
    return stream


def tool_call_for(text: str, functions: set[str]) -> tuple[str, dict[str, Any]] | None:
    """A typed turn that cues a declared function: (name, args), else None."""
    cued = call_cues.read(text, functions)
    if cued is not None:
        return cued.calls[0] if cued.calls else None
    for name, pattern, build in _CUES:
        match = pattern.search(text)
        if match and name in functions:
            return name, build(match)
    return None


def tool_result_words(name: str, response: Any) -> str:
    return f"{name} returned {json.dumps(response, default=str, sort_keys=True)}."
