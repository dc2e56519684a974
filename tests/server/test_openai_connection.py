"""The OpenAI connection's translation without a network: a stand-in for the
SDK's connection records what is sent and plays back server events, so the
cases the local endpoint does not produce are pinned here — several audio
items in one turn (the truncation finds the one being heard), a step's calls
answered in two contents, and a key quoted in a service message."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from audiocore_server.live.played import PlayoutPosition
from audiocore_server.models.openai_connection import OpenAIRealtimeConnection
from audiocore_server.models.provider_error import ProviderError


class FakeRealtime:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.incoming: asyncio.Queue[bytes] = asyncio.Queue()

    async def send_raw(self, data: str) -> None:
        self.sent.append(json.loads(data))

    async def recv_bytes(self) -> bytes:
        return await self.incoming.get()

    async def close(self) -> None:
        pass

    def push(self, **event: Any) -> None:
        self.push_raw(json.dumps(event).encode())

    def push_raw(self, frame: bytes) -> None:
        self.incoming.put_nowait(frame)


async def take(responses: Any, count: int) -> list[LlmResponse]:
    """The next ``count`` of the connection's one ``receive()`` (``responses``)."""
    return [await asyncio.wait_for(anext(responses), 5) for _ in range(count)]


def audio(item_id: str, samples: int) -> dict[str, Any]:
    pcm = b"\x01\x00" * samples
    return {
        "type": "response.output_audio.delta",
        "item_id": item_id,
        "delta": base64.b64encode(pcm).decode(),
    }


def test_barge_in_truncates_the_item_being_heard_at_its_own_offset() -> None:
    """Two audio items in one turn (words before a tool call, then the
    answer): 1.5 s played of the turn is 0.5 s into the second item."""
    played = [0.0]

    async def scenario() -> tuple[FakeRealtime, list[LlmResponse]]:
        fake = FakeRealtime()
        connection = OpenAIRealtimeConnection(
            fake, manual=False, played=PlayoutPosition(lambda: played[0])
        )
        stream = connection.receive()
        fake.push(type="response.created", response={"id": "r1"})
        fake.push(**audio("item_a", 24_000))  # 1 s
        fake.push(type="response.done", response={"status": "completed", "output": []})
        responses = await take(stream, 2)  # audio, turn_complete
        assert responses[-1].turn_complete
        # The answer came whole and is still playing when the user speaks.
        played[0] = 0.75
        fake.push(type="input_audio_buffer.speech_started", audio_start_ms=0, item_id="u1")
        responses += await take(stream, 2)
        return fake, responses

    fake, responses = asyncio.run(scenario())
    assert responses[2].interrupted
    assert fake.sent == [
        {
            "type": "conversation.item.truncate",
            "item_id": "item_a",
            "content_index": 0,
            "audio_end_ms": 750,
        }
    ]


def test_the_second_item_of_a_turn_is_truncated_from_its_own_start() -> None:
    played = [0.0]

    async def scenario() -> FakeRealtime:
        fake = FakeRealtime()
        connection = OpenAIRealtimeConnection(
            fake, manual=True, played=PlayoutPosition(lambda: played[0])
        )
        fake.push(type="response.created", response={"id": "r1"})
        fake.push(**audio("item_a", 24_000))  # 1 s: "let me check"
        fake.push(
            type="response.function_call_arguments.done",
            call_id="c1",
            name="get_current_time",
            arguments="{}",
        )
        fake.push(type="response.done", response={"status": "completed"})
        fake.push(type="response.created", response={"id": "r2"})
        fake.push(**audio("item_b", 48_000))  # 2 s: the answer
        responses = await take(connection.receive(), 3)
        assert [bool(r.content and r.content.parts[0].function_call) for r in responses] == [
            False,
            True,
            False,
        ]
        played[0] = 1.5
        await connection.send_realtime(types.ActivityStart())
        return fake

    fake = asyncio.run(scenario())
    assert fake.sent == [
        {
            "type": "conversation.item.truncate",
            "item_id": "item_b",
            "content_index": 0,
            "audio_end_ms": 500,
        },
        {"type": "response.cancel"},  # manual turns: the answer being generated stops
        {"type": "input_audio_buffer.clear"},
    ]


def test_the_users_stop_on_the_client_truncates_and_cancels_at_once() -> None:
    """The page's Stop: the playout tells the position before it drops the
    audio; the answer being generated is cancelled, and its cancelled
    response.done still ends the client's turn."""
    played = [0.0]
    playout = PlayoutPosition(lambda: played[0])

    async def scenario() -> tuple[FakeRealtime, list[LlmResponse]]:
        fake = FakeRealtime()
        connection = OpenAIRealtimeConnection(fake, manual=False, played=playout)
        stream = connection.receive()
        fake.push(type="response.created", response={"id": "r1"})
        fake.push(**audio("item_a", 12_000))
        responses = await take(stream, 1)
        played[0] = 0.2
        playout.user_stopped()
        await asyncio.sleep(0)  # the sends run in a task of their own
        fake.push(type="response.done", response={"status": "cancelled"})
        responses += await take(stream, 1)
        await connection.close()
        playout.user_stopped()  # after close: no listener left
        return fake, responses

    fake, responses = asyncio.run(scenario())
    assert fake.sent == [
        {
            "type": "conversation.item.truncate",
            "item_id": "item_a",
            "content_index": 0,
            "audio_end_ms": 200,
        },
        {"type": "response.cancel"},
    ]
    assert responses[-1].turn_complete


def test_a_steps_calls_answered_in_two_contents_get_one_response_create() -> None:
    async def scenario() -> tuple[FakeRealtime, list[LlmResponse]]:
        fake = FakeRealtime()
        connection = OpenAIRealtimeConnection(fake, manual=False, played=None)
        fake.push(type="response.created", response={"id": "r1"})
        for call_id, name in (("c1", "get_weather"), ("c2", "get_location")):
            fake.push(
                type="response.function_call_arguments.done",
                call_id=call_id,
                name=name,
                arguments=json.dumps({"location": "Paris"} if name == "get_weather" else {}),
            )
        fake.push(type="response.done", response={"status": "completed"})
        responses = await take(connection.receive(), 1)
        for call_id, name in (("c1", "get_weather"), ("c2", "get_location")):
            answer = types.FunctionResponse(id=call_id, name=name, response={"ok": call_id})
            await connection.send_content(
                types.Content(role="user", parts=[types.Part(function_response=answer)])
            )
            if call_id == "c1":
                assert [e["type"] for e in fake.sent] == ["conversation.item.create"]
        return fake, responses

    fake, responses = asyncio.run(scenario())
    (step,) = responses
    calls = [p.function_call for p in step.content.parts]
    assert [(c.id, c.name, c.args) for c in calls] == [
        ("c1", "get_weather", {"location": "Paris"}),
        ("c2", "get_location", {}),
    ]
    assert not step.turn_complete  # the turn goes on after the tools
    assert [e["type"] for e in fake.sent] == [
        "conversation.item.create",
        "conversation.item.create",
        "response.create",
    ]
    assert [json.loads(e["item"]["output"]) for e in fake.sent[:2]] == [{"ok": "c1"}, {"ok": "c2"}]


def test_a_service_error_is_an_error_response_and_a_fatal_one_ends_the_session() -> None:
    """An ``error`` event is an error response with the service's code and
    reason; ``invalid_api_key`` ends the session. Neither lets the key the
    service quotes reach the client."""
    first: list[LlmResponse] = []

    async def scenario() -> None:
        fake = FakeRealtime()
        connection = OpenAIRealtimeConnection(fake, manual=False, played=None)
        fake.push(
            type="error",
            error={
                "type": "invalid_request_error",
                "code": "model_not_found",
                "message": "Project of key sk-proj-****abcd has no access to model x.",
            },
        )
        fake.push(
            type="error",
            error={"code": "invalid_api_key", "message": "Incorrect API key provided: sk-a***z."},
        )
        responses = connection.receive()
        first.extend(await take(responses, 1))
        await take(responses, 1)

    with pytest.raises(ProviderError) as ended:
        asyncio.run(scenario())
    (response,) = first
    assert response.error_code == "model_not_found"
    assert response.error_message == "Project of key sk-… has no access to model x."
    assert str(ended.value) == (
        "the model service ended the live session: invalid_api_key: "
        "Incorrect API key provided: sk-…."
    )


def test_audio_at_another_rate_is_refused() -> None:
    async def scenario() -> None:
        connection = OpenAIRealtimeConnection(FakeRealtime(), manual=False, played=None)
        blob = types.Blob(mime_type="audio/pcm;rate=16000", data=b"\0\0")
        await connection.send_realtime(blob)

    with pytest.raises(ValueError, match="expected audio at 24000 Hz for OpenAI"):
        asyncio.run(scenario())


def _audio_frame(delta: Any) -> bytes:
    return json.dumps(
        {"type": "response.output_audio.delta", "item_id": "i", "delta": delta}
    ).encode()


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        (b"", "a frame that is not JSON"),
        (b"{not json", "a frame that is not JSON"),
        (b'{"type": "\xff\xfe"}', "a frame that is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "a frame that is not JSON"),
        (b'["response.done"]', "a frame that is not an event: a JSON list"),
        (b"null", "a frame that is not an event: a JSON NoneType"),
        (_audio_frame("AAE"), "audio that is not base64"),
        (_audio_frame(12), "audio that is not base64"),
        (_audio_frame(["AAAA"]), "audio that is not base64"),
        (_audio_frame(base64.b64encode(b"\x01\x00\x02").decode()), "audio of 3 bytes"),
    ],
    ids=[
        "empty",
        "not-json",
        "not-utf8",
        "nested",
        "list",
        "null",
        "bad-b64",
        "number",
        "list-delta",
        "odd",
    ],
)
def test_a_malformed_frame_from_the_service_is_a_clear_error(frame: bytes, error: str) -> None:
    """The SDK passes the service's frames on unchecked: one that is not an
    event, or audio that is not whole PCM16 samples in base64, ends the
    session with what was wrong (not a ``TypeError`` of ours, nor audio
    shifted by a byte)."""

    async def scenario() -> None:
        fake = FakeRealtime()
        connection = OpenAIRealtimeConnection(fake, manual=False, played=None)
        fake.push_raw(frame)
        await take(connection.receive(), 1)

    with pytest.raises(ProviderError, match=f"^the model service sent {error}"):
        asyncio.run(scenario())


@pytest.mark.parametrize("size", [0, 2, 4800, 4802, 96_000])
def test_audio_goes_up_as_one_append_of_its_base64(size: int) -> None:
    """Every byte of every chunk, in order, in one ``input_audio_buffer.append``
    each (the event is written without ``json.dumps``); sizes from nothing
    through 50 ms to 2 s, each a length base64 pads differently."""
    chunks = [bytes(range(256)) * (size // 256) + bytes(size % 256), b"\x7f\xff" * 3]

    async def scenario() -> FakeRealtime:
        fake = FakeRealtime()
        connection = OpenAIRealtimeConnection(fake, manual=False, played=None)
        for pcm in chunks:
            await connection.send_realtime(types.Blob(mime_type="audio/pcm;rate=24000", data=pcm))
        return fake

    fake = asyncio.run(scenario())
    assert [e["type"] for e in fake.sent] == ["input_audio_buffer.append"] * 2
    assert [base64.b64decode(e["audio"], validate=True) for e in fake.sent] == chunks
    assert all(set(e) == {"type", "audio"} for e in fake.sent)


@pytest.mark.parametrize(
    ("samples", "chunk", "committed"),
    [(2400, 200, True), (2400, 2, True), (2399, 200, False), (0, 1, False)],
)
def test_a_manual_turn_of_100_ms_is_committed_and_a_shorter_one_cleared(
    samples: int, chunk: int, committed: bool
) -> None:
    """The service commits no less than 100 ms (2400 samples). Exactly that,
    in chunks whose milliseconds do not add up exactly as floats, is a turn;
    one sample less is a click of the button."""
    pcm = b"\x01\x00" * samples

    async def scenario() -> FakeRealtime:
        fake = FakeRealtime()
        connection = OpenAIRealtimeConnection(fake, manual=True, played=None)
        await connection.send_realtime(types.ActivityStart())
        for at in range(0, len(pcm), 2 * chunk):
            blob = types.Blob(mime_type="audio/pcm;rate=24000", data=pcm[at : at + 2 * chunk])
            await connection.send_realtime(blob)
        await connection.send_realtime(types.ActivityEnd())
        return fake

    kinds = [e["type"] for e in asyncio.run(scenario()).sent if "audio" not in e]
    ending = ["input_audio_buffer.commit", "response.create"]
    assert kinds == ["input_audio_buffer.clear"] + (
        ending if committed else ["input_audio_buffer.clear"]
    )
