"""What a turn's ``finish`` chunk says about it: its ``finishReason`` and its
``messageMetadata``, in the shapes the seed project's server builds them
(``StreamProtocolConverter._build_message_metadata``; docs/protocol.md).

``TurnMetadata`` gathers, from the ADK events of one turn, what the model
reported: token usage, why it stopped, its version, grounding sources and
citations. ``finish_reason`` maps Gemini's ``FinishReason`` to AI SDK's.
``audio_metadata`` is the ``audio`` entry, counted where the audio leaves
(``audiocore_server/live/sender.py``): only there is it known what the client was sent.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from google.adk.events import Event
from google.genai import types
from pydantic.alias_generators import to_camel

from ..wire.chunks import Finish, FinishReason

_CONTENT_FILTER = frozenset(
    {
        types.FinishReason.SAFETY,
        types.FinishReason.RECITATION,
        types.FinishReason.BLOCKLIST,
        types.FinishReason.PROHIBITED_CONTENT,
        types.FinishReason.SPII,
        # As the seed maps them: an image or a language the model would not
        # answer in is a filter too, so an app that reacts to one sees both.
        types.FinishReason.LANGUAGE,
        types.FinishReason.IMAGE_SAFETY,
        types.FinishReason.IMAGE_PROHIBITED_CONTENT,
        types.FinishReason.IMAGE_RECITATION,
    }
)
_ERROR = frozenset(
    {
        types.FinishReason.MALFORMED_FUNCTION_CALL,
        types.FinishReason.UNEXPECTED_TOOL_CALL,
        types.FinishReason.NO_IMAGE,
    }
)


def finish_reason(reason: types.FinishReason | None) -> FinishReason:
    """AI SDK's finish reason for the model's. No reason at all is ``stop``:
    the turn ended as the model meant it to (Gemini Live reports none)."""
    if reason is None or reason == types.FinishReason.STOP:
        return "stop"
    if reason == types.FinishReason.MAX_TOKENS:
        return "length"
    if reason in _CONTENT_FILTER:
        return "content-filter"
    if reason in _ERROR:
        return "error"
    return "other"


def audio_metadata(chunks: int, pcm_bytes: int, sample_rate: int) -> dict[str, Any]:
    """``messageMetadata.audio``: the PCM16 mono audio the turn streamed."""
    return {
        "chunks": chunks,
        "bytes": pcm_bytes,
        "sampleRate": sample_rate,
        "duration": pcm_bytes / (2 * sample_rate),  # seconds
    }


class AudioCount:
    """The audio frames sent since the last ``finish``; ``on_finish`` puts
    them in the finish chunk (a turn that streamed none has no ``audio``)."""

    def __init__(self, sample_rate: int) -> None:
        self._rate = sample_rate
        self._chunks = 0
        self._bytes = 0

    def sent(self, pcm_bytes: int) -> None:
        self._chunks += 1
        self._bytes += pcm_bytes

    def on_finish(self, finish: Finish) -> Finish:
        count, self._chunks = self._chunks, 0
        size, self._bytes = self._bytes, 0
        if not count:
            return finish
        audio = audio_metadata(count, size, self._rate)
        return dataclasses.replace(finish, metadata={**(finish.metadata or {}), "audio": audio})


class TurnMetadata:
    """What the model reported during one turn.

    Usage: Gemini's reports within one model response are running totals
    (each streamed chunk repeats the prompt's count), so a response's last
    report is its usage; a turn with tools has one response per step, and
    the turn's usage is their sum. ``step_over`` marks where a response ends.
    """

    def __init__(self, model: str = "") -> None:
        self._model = model  # the agent's model: the version when none is reported
        self.reason: types.FinishReason | None = None
        self._version: str | None = None
        self._usage_done = (0, 0, 0)  # prompt, completion, total of ended responses
        self._usage: types.GenerateContentResponseUsageMetadata | None = None
        self._sources: list[dict[str, str]] = []
        self._citations: list[dict[str, Any]] = []
        self._cache: dict[str, Any] | None = None

    def add(self, event: Event) -> None:
        if event.usage_metadata is not None:
            self._usage = event.usage_metadata
        if event.finish_reason is not None:
            self.reason = event.finish_reason
        if event.model_version:
            self._version = event.model_version
        if event.grounding_metadata is not None:
            self._sources = _sources(event.grounding_metadata)
        if event.citation_metadata is not None:
            self._citations = _citations(event.citation_metadata)
        if event.cache_metadata is not None:
            # ADK's context cache (its name, fingerprint, use count, expiry):
            # passed through with camelCase keys; the cached token count is
            # in the usage report, as ADK says.
            dump = event.cache_metadata.model_dump(mode="json", exclude_none=True)
            self._cache = {to_camel(key): value for key, value in dump.items()}

    def step_over(self) -> None:
        """A model response ended (its tool calls were answered): the next
        reports are of a new response."""
        usage, self._usage = self._usage, None
        if usage is not None:
            self._usage_done = _sum(self._usage_done, _counts(usage))
        self.reason = None  # the step's reason was its tool calls

    def to_json(self) -> dict[str, Any]:
        """The ``messageMetadata`` (``model`` is ours; the rest the seed's)."""
        metadata: dict[str, Any] = {"model": self._model} if self._model else {}
        prompt, completion, total = _sum(
            self._usage_done, _counts(self._usage) if self._usage else (0, 0, 0)
        )
        if total or prompt or completion:
            metadata["usage"] = {
                "promptTokens": prompt,
                "completionTokens": completion,
                "totalTokens": total,
            }
        if self._sources:
            metadata["grounding"] = {"sources": self._sources}
        if self._citations:
            metadata["citations"] = self._citations
        if self._cache is not None:
            metadata["cacheMetadata"] = self._cache
        version = self._version or self._model
        if version:
            metadata["modelVersion"] = version
        return metadata


def _counts(usage: types.GenerateContentResponseUsageMetadata) -> tuple[int, int, int]:
    prompt = usage.prompt_token_count or 0
    completion = usage.candidates_token_count or 0
    return prompt, completion, usage.total_token_count or prompt + completion


def _sum(a: tuple[int, int, int], b: tuple[int, int, int]) -> tuple[int, int, int]:
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


def _sources(grounding: types.GroundingMetadata) -> list[dict[str, str]]:
    return [
        {"type": "web", "uri": chunk.web.uri or "", "title": chunk.web.title or ""}
        for chunk in grounding.grounding_chunks or []
        if chunk.web is not None
    ]


def _citations(citation: types.CitationMetadata) -> list[dict[str, Any]]:
    return [
        {
            "startIndex": c.start_index or 0,
            "endIndex": c.end_index or 0,
            "uri": c.uri or "",
            "license": c.license or "",
        }
        for c in citation.citations or []
    ]
