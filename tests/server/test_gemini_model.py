"""audiocore_server/models/gemini.py's connection wrapper on scripted responses (the
end-to-end proof against the local endpoint is test_gemini_e2e.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest
from google.adk.models.llm_response import LlmResponse
from google.genai import errors, types

from audiocore_server.models.gemini import _ResumableConnection
from audiocore_server.models.provider_error import describe_model_failure

AUDIO = LlmResponse(
    content=types.Content(
        role="model",
        parts=[types.Part(inline_data=types.Blob(mime_type="audio/pcm;rate=24000", data=b"\0\0"))],
    )
)
DONE = LlmResponse(turn_complete=True)
GO_AWAY = LlmResponse(go_away=types.LiveServerGoAway(time_left="5s"))


def handle(value: str | None) -> LlmResponse:
    update = types.LiveServerSessionResumptionUpdate(new_handle=value, resumable=value is not None)
    return LlmResponse(live_session_resumption_update=update)


class Scripted:
    """An ADK connection whose receive() calls each play one script (ADK
    calls receive() again after each turn)."""

    def __init__(self, *scripts: list[LlmResponse | Exception]) -> None:
        self.scripts = list(scripts)

    async def receive(self) -> AsyncGenerator[LlmResponse, None]:
        for item in self.scripts.pop(0):
            if isinstance(item, Exception):
                raise item
            yield item


def run(connection: _ResumableConnection, calls: int) -> list[list[LlmResponse]]:
    async def collect() -> list[list[LlmResponse]]:
        out = []
        for _ in range(calls):
            out.append([r async for r in connection.receive()])
        return out

    return asyncio.run(collect())


def names(responses: list[LlmResponse]) -> list[str]:
    out = []
    for r in responses:
        if r.live_session_resumption_update:
            out.append(f"handle:{r.live_session_resumption_update.new_handle}")
        elif r.go_away:
            out.append("goAway")
        elif r.turn_complete:
            out.append("turnComplete")
        elif r.interrupted:
            out.append("interrupted")
        else:
            out.append("audio")
    return out


def test_go_away_mid_turn_waits_for_the_turn_and_its_handle() -> None:
    inner = Scripted(
        [handle("h0"), handle(None), AUDIO, GO_AWAY, AUDIO, DONE],
        [handle("h1"), AUDIO],
    )
    first, second = run(_ResumableConnection(inner, resumption=True), 2)
    # The empty handle is dropped (ADK would store None); goAway comes after h1.
    assert names(first) == ["handle:h0", "audio", "audio", "turnComplete"]
    assert names(second) == ["handle:h1", "goAway"]


def test_go_away_between_turns_passes_at_once() -> None:
    inner = Scripted([handle("h0"), GO_AWAY, AUDIO])
    (only,) = run(_ResumableConnection(inner, resumption=True), 1)
    assert names(only) == ["handle:h0", "goAway"]


def test_without_resumption_go_away_passes_at_the_turn_end() -> None:
    inner = Scripted([AUDIO, GO_AWAY, DONE, AUDIO])
    (only,) = run(_ResumableConnection(inner, resumption=False), 1)
    assert names(only) == ["audio", "turnComplete", "goAway"]


def test_a_connection_lost_mid_turn_ends_the_turn_then_raises() -> None:
    lost = errors.APIError(1011, "Internal error encountered.")
    connection = _ResumableConnection(Scripted([AUDIO, lost]), resumption=True)
    seen: list[LlmResponse] = []

    async def collect() -> None:
        async for response in connection.receive():
            seen.append(response)

    with pytest.raises(errors.APIError):
        asyncio.run(collect())
    assert names(seen) == ["audio", "interrupted"]


def test_a_connection_lost_between_turns_just_raises() -> None:
    connection = _ResumableConnection(Scripted([DONE, ConnectionResetError()]), resumption=True)

    async def collect() -> list[LlmResponse]:
        return [r async for r in connection.receive()]

    with pytest.raises(ConnectionResetError):
        asyncio.run(collect())


def test_failures_are_described_for_the_client() -> None:
    refused = errors.APIError(1007, "API key not valid. Please pass a valid API key.")
    assert describe_model_failure(refused) == (
        "the model service closed the live session: 1007 API key not valid. Please pass a valid "
        "API key."
    )
    assert describe_model_failure(ConnectionRefusedError()) == (
        "the model service could not be reached (ConnectionRefusedError)"
    )
    assert describe_model_failure(ValueError("x")) is None
    assert describe_model_failure(PermissionError("disk")) is None  # not a network failure
