"""The ``finish`` chunk: its reason from the model, and its ``messageMetadata``
in the seed project's shapes (``audiocore_server/turns/metadata.py``), on every surface."""

from __future__ import annotations

import base64
import json
from typing import Any

from google.adk.events import Event
from google.adk.models.cache_metadata import CacheMetadata
from google.genai import types
from server_helpers import receive_until, start
from starlette.testclient import TestClient
from test_http_chat import chunks as sse_chunks
from test_http_chat import post
from test_http_chat import user as chat_user
from test_seed_dialect import SeedStream, submit
from test_seed_dialect import user as seed_user

from audiocore_server.offline.model import MAX_ANSWER_TOKENS, MODEL_VERSION
from audiocore_server.turns.events import TurnTranslator
from audiocore_server.turns.metadata import AudioCount, finish_reason
from audiocore_server.wire import chunks

# The specification (docs/protocol.md), one row per Gemini finish reason.
EXPECTED = {
    "FINISH_REASON_UNSPECIFIED": "other",
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content-filter",
    "RECITATION": "content-filter",
    "LANGUAGE": "content-filter",
    "OTHER": "other",
    "BLOCKLIST": "content-filter",
    "PROHIBITED_CONTENT": "content-filter",
    "SPII": "content-filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "IMAGE_SAFETY": "content-filter",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "other",
    "IMAGE_PROHIBITED_CONTENT": "content-filter",
    "NO_IMAGE": "error",
    "IMAGE_RECITATION": "content-filter",
    "IMAGE_OTHER": "other",
    "CONTINUATION": "other",
}


def test_every_gemini_finish_reason_has_its_ai_sdk_reason() -> None:
    # A reason added to google-genai fails here until the table says what it is.
    assert set(EXPECTED) == {reason.name for reason in types.FinishReason}
    for reason in types.FinishReason:
        assert finish_reason(reason) == EXPECTED[reason.name], reason
    assert finish_reason(None) == "stop"  # Gemini Live reports none


def usage(prompt: int, answer: int) -> types.GenerateContentResponseUsageMetadata:
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt, candidates_token_count=answer, total_token_count=prompt + answer
    )


def model_event(*parts: types.Part, **fields: Any) -> Event:
    return Event(author="agent", content=types.Content(role="model", parts=list(parts)), **fields)


def finish_of(out: list[Any]) -> dict[str, Any]:
    (finish,) = [c for c in out if isinstance(c, chunks.Finish)]
    return finish.to_json()


def test_usage_is_each_responses_last_report_summed_over_steps() -> None:
    t = TurnTranslator(model="m")
    call = types.Part(function_call=types.FunctionCall(id="c1", name="get_weather", args={}))
    t.translate(model_event(call, usage_metadata=usage(10, 2)))
    answer = types.Part(function_response=types.FunctionResponse(id="c1", name="get_weather"))
    t.translate(Event(author="agent", content=types.Content(role="user", parts=[answer])))
    # The answer streamed: running totals, then the response's last report.
    t.translate(model_event(types.Part(text="Sun"), partial=True, usage_metadata=usage(15, 1)))
    t.translate(model_event(types.Part(text="ny"), partial=True, usage_metadata=usage(15, 3)))
    t.translate(model_event(types.Part(text="Sunny"), usage_metadata=usage(15, 3)))
    out = t.translate(Event(author="agent", turn_complete=True, model_version="m-002"))
    assert finish_of(out) == {
        "type": "finish",
        "finishReason": "stop",
        "messageMetadata": {
            "model": "m",
            "usage": {"promptTokens": 25, "completionTokens": 5, "totalTokens": 30},
            "modelVersion": "m-002",
        },
    }


def test_grounding_sources_and_citations_in_the_seeds_shape() -> None:
    t = TurnTranslator(model="m")
    grounding = types.GroundingMetadata(
        grounding_chunks=[
            types.GroundingChunk(web=types.GroundingChunkWeb(uri="https://a.example", title="A")),
            types.GroundingChunk(),  # not a web source: not listed
            types.GroundingChunk(web=types.GroundingChunkWeb(uri="https://b.example")),
        ]
    )
    citations = types.CitationMetadata(
        citations=[types.Citation(start_index=3, end_index=9, uri="https://c.example")]
    )
    t.translate(
        model_event(
            types.Part(text="Cited."),
            grounding_metadata=grounding,
            citation_metadata=citations,
            finish_reason=types.FinishReason.RECITATION,
        )
    )
    finish = finish_of(t.translate(Event(author="agent", turn_complete=True)))
    assert finish["finishReason"] == "content-filter"
    assert finish["messageMetadata"] == {
        "model": "m",
        "grounding": {
            "sources": [
                {"type": "web", "uri": "https://a.example", "title": "A"},
                {"type": "web", "uri": "https://b.example", "title": ""},
            ]
        },
        "citations": [{"startIndex": 3, "endIndex": 9, "uri": "https://c.example", "license": ""}],
        "modelVersion": "m",  # none reported: the agent's model
    }


def test_adks_cache_metadata_passes_through_as_cache_metadata() -> None:
    """LlmResponse.cache_metadata (google-adk's context cache), the turn's last
    report, in camelCase; a turn without one has no key."""
    t = TurnTranslator(model="m")
    first = CacheMetadata(fingerprint="f0", contents_count=2)  # fingerprint only: no cache yet
    active = CacheMetadata(
        cache_name="projects/1/locations/l/cachedContents/9",
        expire_time=1764547200.5,
        fingerprint="f1",
        invocations_used=3,
        contents_count=4,
        created_at=1764540000.0,
    )
    t.translate(model_event(types.Part(text="One."), cache_metadata=first))
    t.translate(model_event(types.Part(text="Two."), cache_metadata=active))
    finish = finish_of(t.translate(Event(author="agent", turn_complete=True)))
    assert finish["messageMetadata"]["cacheMetadata"] == {
        "cacheName": "projects/1/locations/l/cachedContents/9",
        "expireTime": 1764547200.5,
        "fingerprint": "f1",
        "invocationsUsed": 3,
        "contentsCount": 4,
        "createdAt": 1764540000.0,
    }
    t.translate(model_event(types.Part(text="Three."), cache_metadata=first))
    finish = finish_of(t.translate(Event(author="agent", turn_complete=True)))
    assert finish["messageMetadata"]["cacheMetadata"] == {"fingerprint": "f0", "contentsCount": 2}
    # The next turn without a report: none (nothing carried over).
    t.translate(model_event(types.Part(text="Uncached.")))
    finish = finish_of(t.translate(Event(author="agent", turn_complete=True)))
    assert "cacheMetadata" not in finish["messageMetadata"]


def test_a_turn_that_ends_on_its_tool_step_is_tool_calls() -> None:
    t = TurnTranslator()
    call = types.Part(function_call=types.FunctionCall(id="c1", name="get_location", args={}))
    t.translate(model_event(call, finish_reason=types.FinishReason.STOP))
    assert finish_of(t.translate(Event(author="agent", turn_complete=True)))["finishReason"] == (
        "tool-calls"
    )
    # Words after the tool: the model's reason again; interrupted: other.
    t.translate(model_event(call))
    t.translate(model_event(types.Part(text="Here."), finish_reason=types.FinishReason.SPII))
    assert finish_of(t.finish())["finishReason"] == "content-filter"
    t.translate(model_event(types.Part(text="Long"), finish_reason=types.FinishReason.MAX_TOKENS))
    assert finish_of(t.translate(Event(author="agent", interrupted=True)))["finishReason"] == (
        "other"
    )


def test_audio_count_fills_the_turns_finish_then_starts_again() -> None:
    count = AudioCount(16_000)
    for size in (640, 640, 320):
        count.sent(size)
    finish = count.on_finish(chunks.Finish("stop", {"model": "m"}))
    assert finish.to_json()["messageMetadata"] == {
        "model": "m",
        "audio": {"chunks": 3, "bytes": 1600, "sampleRate": 16_000, "duration": 0.05},
    }
    assert count.on_finish(chunks.Finish()).to_json() == {"type": "finish", "finishReason": "stop"}


# ------------------------------------------------ a real MAX_TOKENS, end to end

LONG = " ".join(f"w{i}" for i in range(300))  # "You said: " + 300 words: past the limit


def check_cut(answer: str, finish: dict[str, Any]) -> None:
    assert answer.split() == ["You", "said:", *LONG.split()[: MAX_ANSWER_TOKENS - 2]]
    assert finish["finishReason"] == "length"
    metadata = finish["messageMetadata"]
    assert metadata["usage"] == {
        "promptTokens": 300,
        "completionTokens": MAX_ANSWER_TOKENS,
        "totalTokens": 300 + MAX_ANSWER_TOKENS,
    }
    assert metadata["modelVersion"] == MODEL_VERSION


def pcm_bytes(messages: list[dict[str, Any]]) -> int:
    return sum(len(base64.b64decode(m["data"]["content"])) for m in messages)


def check_audio(finish: dict[str, Any], pcm: list[dict[str, Any]], rate: int) -> None:
    # Exactly what the client was sent (the cue, padded to whole frames).
    size = pcm_bytes(pcm)
    assert size > 0
    assert finish["messageMetadata"]["audio"] == {
        "chunks": len(pcm),
        "bytes": size,
        "sampleRate": rate,
        "duration": size / (2 * rate),
    }


def test_ws_answer_cut_at_the_limit_finishes_with_length(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual", output={"sampleRate": 16_000})
        ws.send_text(json.dumps({"type": "text", "text": LONG}))
        turn = receive_until(ws, "finish")
    answer = "".join(m["delta"] for m in turn if m["type"] == "text-delta")
    check_cut(answer, turn[-1])
    check_audio(turn[-1], [m for m in turn if m["type"] == "data-pcm"], 16_000)


def test_live_answer_cut_at_the_limit_finishes_with_length(client: TestClient) -> None:
    with client.websocket_connect("/live") as ws:
        stream = SeedStream(ws)
        submit(ws, [seed_user(LONG)])
        got = stream.read()
    answer = "".join(c["delta"] for c in got if c["type"] == "text-delta")
    check_cut(answer, got[-1])
    check_audio(got[-1], [c for c in got if c["type"] == "data-pcm"], 24_000)


def test_http_answer_cut_at_the_limit_finishes_with_length(client: TestClient) -> None:
    got = sse_chunks(post(client, "chat-long", [chat_user(LONG)]))
    answer = "".join(c["delta"] for c in got if c["type"] == "text-delta")
    check_cut(answer, got[-1])
    assert "audio" not in got[-1]["messageMetadata"]  # a text model: no audio
