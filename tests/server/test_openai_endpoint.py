"""The local OpenAI Realtime endpoint itself, through the ``openai``
package's realtime client (as the server reaches it): it speaks the GA
events and refuses, with the service's error shape, what the service
refuses — so a test passing against it means the server sent valid events."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI
from websockets.exceptions import InvalidStatus

from tests.openai_realtime import EndpointConfig, LocalOpenAIRealtime

SESSION = {
    "type": "realtime",
    "audio": {
        "input": {"format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": None},
        "output": {"format": {"type": "audio/pcm", "rate": 24000}},
    },
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "description": "",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        }
    ],
}


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[LocalOpenAIRealtime]:
    with LocalOpenAIRealtime(EndpointConfig(speed=1000.0), cert_dir=tmp_path / "cert") as live:
        yield live


class Client:
    """One realtime connection: send events, read them until a type."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    async def send(self, event: dict[str, Any]) -> None:
        await self.connection.send(event)

    async def until(self, kind: str) -> dict[str, Any]:
        while True:
            event = json.loads(await asyncio.wait_for(self.connection.recv_bytes(), 10))
            if event["type"] == kind:
                return event


async def run(endpoint: LocalOpenAIRealtime, scenario: Any, key: str | None = None) -> None:
    client = AsyncOpenAI(api_key=key or endpoint.api_key, base_url=endpoint.base_url)
    context = ssl.create_default_context(cafile=str(endpoint.ca_file))
    async with client.realtime.connect(
        model="gpt-realtime-2",
        websocket_connection_options={"ssl": context},  # type: ignore[typeddict-unknown-key]
    ) as connection:
        session = Client(connection)
        created = await session.until("session.created")
        assert created["session"]["audio"]["input"]["format"] == {
            "type": "audio/pcm",
            "rate": 24000,
        }
        await scenario(session)


def _error_of(endpoint: LocalOpenAIRealtime, event: dict[str, Any]) -> dict[str, Any]:
    async def scenario(session: Client) -> None:
        await session.send({"type": "session.update", "session": SESSION})
        await session.until("session.updated")
        await session.send(event)
        error = await session.until("error")
        assert error["error"]["event_id"] == event.get("event_id")

    asyncio.run(run(endpoint, scenario))
    return endpoint.records[-1].errors[-1]


@pytest.mark.parametrize(
    ("event", "code", "param"),
    [
        # A beta-shaped session field, as the GA service answers it.
        (
            {"type": "session.update", "session": {"type": "realtime", "voice": "alloy"}},
            "unknown_parameter",
            "session.voice",
        ),
        (
            {"type": "session.update", "session": {"instructions": "x"}},
            "invalid_value",
            "session.type",
        ),
        (
            {
                "type": "session.update",
                "session": {
                    "type": "realtime",
                    "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}},
                },
            },
            "invalid_value",
            "session.audio.input.format.rate",
        ),
        (
            {
                "type": "session.update",
                "session": {"type": "realtime", "audio": {"input": {"format": "pcm16"}}},
            },
            "invalid_type",
            "session.audio.input.format",
        ),
        ({"type": "input_audio_buffer.append", "audio": "AAA"}, "invalid_value", "audio"),
        (
            {"type": "input_audio_buffer.append", "audio": base64.b64encode(b"\0\0\0").decode()},
            "invalid_value",
            "audio",
        ),
        ({"type": "input_audio_buffer.commit"}, "input_audio_buffer_commit_empty", None),
        (
            {
                "type": "conversation.item.create",
                "event_id": "evt_mine",
                "item": {"type": "function_call_output", "call_id": "call_nope", "output": "{}"},
            },
            "invalid_value",
            "item.call_id",
        ),
        (
            {
                "type": "conversation.item.truncate",
                "item_id": "item_nope",
                "content_index": 0,
                "audio_end_ms": 10,
            },
            "invalid_value",
            "item_id",
        ),
        ({"type": "response.cancel"}, "response_cancel_not_active", None),
        ({"type": "transcription_session.update"}, "invalid_value", "type"),
    ],
)
def test_invalid_events_get_the_services_error(
    endpoint: LocalOpenAIRealtime, event: dict[str, Any], code: str, param: str | None
) -> None:
    error = _error_of(endpoint, event)
    assert (error["code"], error["param"]) == (code, param), error
    assert error["type"] == "invalid_request_error" and error["message"]


def test_a_typed_turn_a_call_its_output_and_a_truncation(endpoint: LocalOpenAIRealtime) -> None:
    """The GA sequences with consistent ids; a function_call_output answers
    an issued call once; a truncation past the item's audio is refused."""

    async def scenario(session: Client) -> None:
        await session.send({"type": "session.update", "session": SESSION})
        await session.until("session.updated")
        await session.send(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "weather in Paris"}],
                },
            }
        )
        await session.send({"type": "response.create"})
        call = await session.until("response.function_call_arguments.done")
        assert (call["name"], json.loads(call["arguments"])) == (
            "get_weather",
            {"location": "Paris"},
        )
        done = await session.until("response.done")
        assert done["response"]["output"][0]["call_id"] == call["call_id"]
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": "{}"}
        await session.send({"type": "conversation.item.create", "item": output})
        await session.send({"type": "response.create"})
        delta = await session.until("response.output_audio.delta")
        pcm = base64.b64decode(delta["delta"])
        assert len(pcm) == 40 * 24 * 2  # 40 ms at 24 kHz
        transcript = await session.until("response.output_audio_transcript.done")
        assert transcript["transcript"] == "get_weather returned {}."
        assert transcript["item_id"] == delta["item_id"]
        await session.until("response.done")
        await session.send({"type": "conversation.item.create", "item": output})  # again
        assert (await session.until("error"))["error"]["param"] == "item.call_id"
        truncate = {
            "type": "conversation.item.truncate",
            "item_id": delta["item_id"],
            "content_index": 0,
        }
        await session.send({**truncate, "audio_end_ms": 100})
        truncated = await session.until("conversation.item.truncated")
        assert truncated["audio_end_ms"] == 100
        await session.send({**truncate, "audio_end_ms": 10_000})  # the cue is 150 ms
        error = await session.until("error")
        assert error["error"]["message"] == "Audio content of 150ms is already shorter than 10000ms"

    asyncio.run(run(endpoint, scenario))
    assert endpoint.records[0].truncations == [(endpoint.records[0].truncations[0][0], 100)]


def test_a_wrong_key_is_refused_at_the_handshake(endpoint: LocalOpenAIRealtime) -> None:
    async def scenario(session: Client) -> None:
        raise AssertionError("connected with a wrong key")

    with pytest.raises(InvalidStatus) as refused:
        asyncio.run(run(endpoint, scenario, key="sk-wrong"))
    assert refused.value.response.status_code == 401
    assert not endpoint.records  # no connection was accepted
