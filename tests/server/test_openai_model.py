"""The OpenAI Realtime model's parts without a network: the settings that
select it, the session it asks for, and the played position the pacer
tells it (the truncation point of a barge-in)."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import json
from pathlib import Path
from typing import Any

import pytest
import websockets.asyncio.server
from google.adk.models.llm_request import LlmRequest
from google.genai import types

from audiocore_server.agent.definition import build_model, build_run_config
from audiocore_server.audio.pacer import AudioFrame, OutputPacer
from audiocore_server.live.played import PlayoutPosition
from audiocore_server.models import openai_realtime as openai_model
from audiocore_server.models import played_audio
from audiocore_server.models.openai_realtime import OpenAIRealtime, function_tools, session_config
from audiocore_server.models.provider_error import ProviderError
from audiocore_server.settings import Settings


def test_openai_model_selection_and_rates(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings(
        model="openai:gpt-realtime-2",
        openai_base_url="https://127.0.0.1:9/v1",
        openai_ca_file=tmp_path / "ca.pem",
        data_dir=tmp_path,
    )
    assert settings.backend == "openai" and settings.live_model_name == "gpt-realtime-2"
    assert settings.model_audio_rate == 24_000  # the mic path's target: no 16 kHz stage
    assert Settings(model="offline").model_audio_rate == 16_000
    # The HTTP chat and the tasks run offline beside it without Google credentials.
    assert settings.text_backend == "offline" and settings.chat_model_name == "offline"
    model = build_model(settings)
    assert isinstance(model, OpenAIRealtime)
    assert (model.model, model.base_url, model.ca_file) == (
        "gpt-realtime-2",
        "https://127.0.0.1:9/v1",
        str(tmp_path / "ca.pem"),
    )
    assert not isinstance(build_model(settings, chat=True), OpenAIRealtime)
    config = build_run_config(settings)
    assert config.session_resumption is None and config.context_window_compression is None
    assert Settings(model="openai:", data_dir=tmp_path).problems() == [
        "model: expected openai:<model name>, got 'openai:'"
    ]
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    assert settings.text_backend == "gemini-api"
    assert "sk-" not in repr(settings)


def _request(manual: bool, tools: list[types.Tool] | None = None) -> LlmRequest:
    realtime = (
        types.RealtimeInputConfig(
            automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
        )
        if manual
        else None
    )
    request = LlmRequest(
        config=types.GenerateContentConfig(system_instruction="Be brief.", tools=tools)
    )
    request.live_connect_config = types.LiveConnectConfig(
        realtime_input_config=realtime,
        input_audio_transcription=types.AudioTranscriptionConfig(),
        speech_config=types.SpeechConfig(
            voice_config=types.VoiceConfig(
                prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name="Cedar")
            )
        ),
    )
    return request


def test_session_update_is_the_ga_shape() -> None:
    update = session_config(_request(manual=False))
    assert update == {
        "type": "session.update",
        "session": {
            "type": "realtime",
            "output_modalities": ["audio"],
            "instructions": "Be brief.",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "turn_detection": {
                        "type": "server_vad",
                        "create_response": True,
                        "interrupt_response": True,
                    },
                    "transcription": {"model": "gpt-4o-mini-transcribe"},
                },
                "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "cedar"},
            },
            "tools": [],
        },
    }
    manual = session_config(_request(manual=True))["session"]["audio"]["input"]
    assert manual["turn_detection"] is None  # push-to-talk: the client commits


def test_function_declarations_become_realtime_function_tools() -> None:
    """Both ways ADK declares parameters: JSON Schema as is; genai's Schema
    (types in capitals) converted."""
    tool = types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="get_weather",
                description="The weather.",
                parameters_json_schema={
                    "type": "object",
                    "properties": {"location": {"type": "string"}},
                    "required": ["location"],
                },
            ),
            types.FunctionDeclaration(
                name="pay",
                parameters=types.Schema(
                    type=types.Type.OBJECT,
                    properties={
                        "amount": types.Schema(type=types.Type.NUMBER),
                        "tags": types.Schema(
                            type=types.Type.ARRAY, items=types.Schema(type=types.Type.STRING)
                        ),
                    },
                    required=["amount"],
                ),
            ),
            types.FunctionDeclaration(name="get_location"),
        ]
    )
    assert function_tools(_request(manual=False, tools=[tool])) == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "The weather.",
            "parameters": {
                "type": "object",
                "properties": {"location": {"type": "string"}},
                "required": ["location"],
            },
        },
        {
            "type": "function",
            "name": "pay",
            "description": "",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["amount"],
            },
        },
        {
            "type": "function",
            "name": "get_location",
            "description": "",
            "parameters": {"type": "object", "properties": {}},
        },
    ]


def test_played_seconds_is_the_released_audio_less_the_clients_lead() -> None:
    """On the pacer's clock, to the sample: the client plays the frames back
    to back from their release, so what it has played is what was released
    less what it still holds."""
    now = [100.0]
    pacer = OutputPacer(
        sample_rate=24_000,
        frame_ms=40,
        lead_s=0.15,
        max_audio_s=30.0,
        max_messages=10,
        clock=lambda: now[0],
    )

    def drain() -> int:
        frames = 0
        while isinstance(item := pacer.get_nowait(), AudioFrame):
            frames += 1
        assert item is None
        return frames

    asyncio.run(pacer.put_audio(b"\x01\x00" * 24_000, turn=0))  # 1 s of one turn
    assert pacer.played_seconds() == 0.0
    released = drain()  # the lead goes at once, nothing is played yet
    assert released * 0.04 == pytest.approx(0.16) and pacer.played_seconds() == 0.0
    for step in (0.013, 0.1, 0.12):  # each within the lead: the client never runs dry
        now[0] += step
        released += drain()
        assert pacer.played_seconds() == pytest.approx(now[0] - 100.0, abs=1e-9)
    # The sender wakes late, after the client ran dry: the gap was not
    # playback — it has played exactly what it had been sent.
    now[0] += 0.3
    sent_before = released * 0.04
    released += drain()
    assert pacer.played_seconds() == pytest.approx(sent_before, abs=1e-9)
    pacer.end_turn()
    for _ in range(20):
        now[0] += 0.1
        drain()
    assert pacer.played_seconds() == pytest.approx(1.0)  # all of it, 25 whole frames
    pacer.flush()
    assert pacer.played_seconds() == 0.0  # a flushed turn is over


def test_the_played_audio_is_this_contexts_and_never_kept_alive() -> None:
    """``bind`` reaches the tasks the binding context starts (ADK opens the
    model's connection in one), not another socket's context; a playout that
    is gone is None, not kept alive by a context that outlived its socket."""

    async def connection_sees() -> played_audio.PlayedAudio | None:
        return played_audio.current()

    async def socket(played: PlayoutPosition) -> tuple[object, object]:
        played_audio.bind(played)
        mine = await asyncio.create_task(connection_sees())
        return mine, await asyncio.create_task(asyncio.to_thread(played_audio.current))

    async def scenario() -> None:
        first, second = PlayoutPosition(lambda: 1.0), PlayoutPosition(lambda: 2.0)
        seen = await asyncio.gather(socket(first), socket(second))
        assert seen == [(first, first), (second, second)]
        assert played_audio.current() is None  # the caller's context: nothing bound

    asyncio.run(scenario())
    context = contextvars.copy_context()
    played = PlayoutPosition(lambda: 0.0)
    context.run(played_audio.bind, played)
    assert context.run(played_audio.current) is played
    del played
    gc.collect()
    assert context.run(played_audio.current) is None


def test_a_user_stop_tells_each_listener_the_position_until_it_is_removed() -> None:
    clock = [0.25]
    played = PlayoutPosition(lambda: clock[0])
    heard: list[tuple[str, float]] = []
    remove_a = played.on_user_stop(lambda at: heard.append(("a", at)))
    played.on_user_stop(lambda at: heard.append(("b", at)))
    played.user_stopped()
    remove_a()
    clock[0] = 1.5
    played.user_stopped()
    assert heard == [("a", 0.25), ("b", 0.25), ("b", 1.5)]
    assert played.played_seconds() == 1.5


def test_a_frame_from_the_service_past_the_bound_ends_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK lifts websockets' message limit (``max_size=None``); ours
    holds: a frame past ``MAX_EVENT_BYTES`` from the service ends the live
    session with a clear error instead of being read whole into memory, and
    one at the bound is read."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test-key")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setattr(openai_model, "MAX_EVENT_BYTES", 4096)
    kind = "response.output_audio_transcript.delta"
    padding = len(json.dumps({"type": kind, "delta": ""}))
    heard: list[str] = []

    async def service(ws: Any) -> None:
        await ws.recv()  # the session.update
        await ws.send(json.dumps({"type": kind, "delta": "a" * (4096 - padding)}))
        await ws.send(json.dumps({"type": kind, "delta": "b" * (4097 - padding)}))
        await ws.close()  # without a bound, the end of the session

    async def scenario() -> None:
        async with websockets.asyncio.server.serve(service, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            model = OpenAIRealtime(model="gpt-realtime-2", base_url=f"http://127.0.0.1:{port}/v1")
            async with model.connect(_request(manual=False)) as connection:
                async for response in connection.receive():
                    assert response.output_transcription is not None
                    heard.append(response.output_transcription.text or "")

    with pytest.raises(ProviderError) as ended:
        asyncio.run(scenario())
    assert heard == ["a" * (4096 - padding)]
    assert str(ended.value).startswith("the model service sent too large a frame (")
    assert "4096" in str(ended.value)


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"openai_base_url": "api.openai.com/v1"}, "openai_base_url: expected https://host"),
        ({"openai_base_url": "wss://api.openai.com/v1"}, "openai_base_url: expected https://host"),
        ({"openai_base_url": "https:///v1"}, "openai_base_url: expected https://host"),
        ({"openai_base_url": ""}, "openai_base_url: expected https://host"),
        ({"openai_ca_file": "missing.pem"}, "openai_ca_file: "),
        ({"openai_ca_file": "."}, "openai_ca_file: "),
        ({"gemini_base_url": "127.0.0.1:9"}, "gemini_base_url: expected https://host"),
        ({"gemini_ca_file": "missing.pem"}, "gemini_ca_file: "),
    ],
)
def test_a_model_service_address_or_ca_file_that_cannot_work_is_told_at_startup(
    tmp_path: Path, overrides: dict[str, str], problem: str
) -> None:
    """Not a failure of every live session later (an SDK that makes wss of
    any scheme, an SSL context of a file that is not there)."""
    values: dict[str, object] = dict(overrides)
    for name in ("openai_ca_file", "gemini_ca_file"):
        if name in values:
            values[name] = tmp_path / str(values[name])
    problems = Settings(model="openai:gpt-realtime-2", data_dir=tmp_path, **values).problems()  # type: ignore[arg-type]
    assert len(problems) == 1 and problems[0].startswith(problem), problems
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked here: the SSL context reads it\n")
    fine = Settings(
        model="openai:gpt-realtime-2",
        data_dir=tmp_path,
        openai_base_url="http://127.0.0.1:9/v1",
        openai_ca_file=ca,
        gemini_base_url="https://[::1]:9",
        gemini_ca_file=ca,
    )
    assert fine.problems() == []
