"""The local Gemini Live endpoint against the real google-genai client (and
raw WebSockets for what genai will not send): that it speaks the Live API's
protocol, validates like the service, and behaves as documented in
tests/gemini_live. The server is not involved here (test_gemini_e2e.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websockets
from google import genai
from google.genai import errors, types

from tests.gemini_live import DEFAULT_API_KEY, EndpointConfig, LocalGeminiLive
from tests.gemini_live.wire import EXPLICIT_ACTIVITY, INVALID_ARGUMENT, KEY_INVALID, KEY_NOT_FOUND

MODEL = "gemini-3.8-live"
PATH = "/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContent"
RATE = 16_000


@pytest.fixture
def endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalGeminiLive]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with LocalGeminiLive(EndpointConfig(speed=50.0), cert_dir=tmp_path / "cert") as live:
        yield live


def client(
    endpoint: LocalGeminiLive, key: str = DEFAULT_API_KEY, trust: bool = True, **options: Any
) -> genai.Client:
    args = {"ssl": endpoint.cert.client_context()} if trust else None
    http = types.HttpOptions(
        base_url=options.pop("base_url", endpoint.url),
        api_version=options.pop("api_version", "v1alpha"),
        async_client_args=args,
    )
    return genai.Client(api_key=key, http_options=http)


def config(**fields: Any) -> types.LiveConnectConfig:
    values: dict[str, Any] = {
        "response_modalities": [types.Modality.AUDIO],
        "input_audio_transcription": types.AudioTranscriptionConfig(),
        "output_audio_transcription": types.AudioTranscriptionConfig(),
    }
    values.update(fields)
    return types.LiveConnectConfig(**values)


def tone(seconds: float, freq: float = 300.0) -> bytes:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * freq * t) * 32767).astype("<i2").tobytes()


def chunks(pcm: bytes, ms: int = 20) -> list[bytes]:
    step = RATE * ms // 1000 * 2
    return [pcm[i : i + step] for i in range(0, len(pcm), step)]


async def speak(session: Any, pcm: bytes) -> None:
    for chunk in chunks(pcm):
        await session.send_realtime_input(
            audio=types.Blob(data=chunk, mime_type=f"audio/pcm;rate={RATE}")
        )


async def one_turn(session: Any) -> list[types.LiveServerMessage]:
    return [message async for message in session.receive()]


def refused(excinfo: pytest.ExceptionInfo[errors.APIError]) -> tuple[int, str]:
    return excinfo.value.code, excinfo.value.details


@contextlib.asynccontextmanager
async def raw(
    endpoint: LocalGeminiLive, setup: dict[str, Any] | None, path: str = PATH, **headers: str
) -> AsyncIterator[Any]:
    """A raw socket (messages genai will not send), past the setup."""
    headers = {"x-goog-api-key": DEFAULT_API_KEY, **headers}
    async with websockets.connect(
        f"wss://127.0.0.1:{endpoint.port}{path}",
        ssl=endpoint.cert.client_context(),
        additional_headers={k: v for k, v in headers.items() if v},
    ) as ws:
        if setup is not None:
            with contextlib.suppress(websockets.ConnectionClosed):  # e.g. a refused key
                await ws.send(json.dumps({"setup": setup}))
        yield ws


async def closed_with(ws: Any, *messages: dict[str, Any]) -> tuple[int, str]:
    """Send ``messages``; read until the endpoint closes; (code, reason)."""
    for message in messages:
        await ws.send(json.dumps(message))
    with contextlib.suppress(websockets.ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    return ws.close_code, ws.close_reason


# ---------------------------------------------------------------- transport and auth


def test_tls_is_required_and_trusted_through_the_clients_ssl_settings(
    endpoint: LocalGeminiLive, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def connect(c: genai.Client) -> None:
        async with c.aio.live.connect(model=MODEL, config=config()) as session:
            assert session is not None

    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(connect(client(endpoint, trust=False)))
    asyncio.run(connect(client(endpoint)))  # HttpOptions(async_client_args={"ssl": ctx})
    monkeypatch.setenv("SSL_CERT_FILE", str(endpoint.ca_file))  # genai's other route
    asyncio.run(connect(client(endpoint, trust=False)))
    # genai forces wss whatever the scheme, and appends "/ws/…" to a base path as given.
    asyncio.run(connect(client(endpoint, base_url=f"http://127.0.0.1:{endpoint.port}/")))
    asyncio.run(connect(client(endpoint, base_url=f"{endpoint.url}/proxy/x", api_version="v1beta")))
    paths = [r.path for r in endpoint.records]  # the untrusted attempt never got this far
    assert paths == [
        PATH,
        PATH,
        "/" + PATH,
        "/proxy/x" + PATH.replace("v1alpha", "v1beta"),
    ]
    assert endpoint.records[0].headers["x-goog-api-key"] == DEFAULT_API_KEY


def test_wrong_path_or_method_is_not_upgraded(endpoint: LocalGeminiLive) -> None:
    async def scenario() -> None:
        for path in ("/ws/google.ai.generativelanguage.v1alpha.GenerativeService.Generate", "/"):
            with pytest.raises(websockets.InvalidStatus) as rejected:
                async with raw(endpoint, None, path=path):
                    pass
            assert rejected.value.response.status_code == 404
        # Only GET upgrades: a POST to the right path is never a WebSocket.
        reader, writer = await asyncio.open_connection(
            "127.0.0.1",
            endpoint.port,
            ssl=endpoint.cert.client_context(),
            server_hostname="127.0.0.1",
        )
        writer.write(
            f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".encode()
        )
        status = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        assert not status.startswith(b"HTTP/1.1 101")

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("key", "reason"), [("", KEY_NOT_FOUND), ("not-the-key", KEY_INVALID)], ids=["none", "bad"]
)
def test_a_refused_key_closes_1007_after_the_upgrade(
    endpoint: LocalGeminiLive, key: str, reason: str
) -> None:
    async def scenario() -> tuple[int, str]:
        async with raw(endpoint, {"model": f"models/{MODEL}"}, **{"x-goog-api-key": key}) as ws:
            return await closed_with(ws)

    assert asyncio.run(scenario()) == (1007, reason)

    async def through_genai() -> None:
        async with client(endpoint, key="not-the-key").aio.live.connect(
            model=MODEL, config=config()
        ):
            pass

    with pytest.raises(errors.APIError) as excinfo:
        asyncio.run(through_genai())
    assert refused(excinfo) == (1007, KEY_INVALID)


def test_the_key_may_come_in_the_query(endpoint: LocalGeminiLive) -> None:
    async def scenario() -> dict[str, Any]:
        async with raw(
            endpoint,
            {"model": f"models/{MODEL}"},
            path=f"{PATH}?key={DEFAULT_API_KEY}",
            **{"x-goog-api-key": ""},
        ) as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), 10))

    assert asyncio.run(scenario()) == {"setupComplete": {}}


# ---------------------------------------------------------------- setup validation


def test_unknown_or_retired_model_closes_1008(endpoint: LocalGeminiLive) -> None:
    async def scenario(model: str) -> None:
        async with client(endpoint).aio.live.connect(model=model, config=config()):
            pass

    for model in ("gemini-live-2.5-flash-preview", "gemini-2.5-flash"):
        with pytest.raises(errors.APIError) as excinfo:
            asyncio.run(scenario(model))
        code, reason = refused(excinfo)
        assert code == 1008
        assert reason.startswith(f"models/{model} is not found for API version v1alpha")
        assert len(reason.encode()) <= 123


@pytest.mark.parametrize(
    "setup",
    [
        {"generationConfig": {"responseModalities": ["TEXT"]}},
        {
            "generationConfig": {
                "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Bob"}}}
            }
        },
        {"generationConfig": {"speechConfig": {"languageCode": "english"}}},
        {"realtimeInputConfig": {"automaticActivityDetection": {"disabled": "yes"}}},
        {"realtimeInputConfig": {"activityHandling": "SOMETIMES"}},
        {"contextWindowCompression": {"triggerTokens": 1000}},
        {
            "contextWindowCompression": {
                "triggerTokens": 100,
                "slidingWindow": {"targetTokens": 200},
            }
        },
        {"sessionResumption": {"transparent": True}},
        {"tools": [{"functionDeclarations": [{"name": "1bad name"}]}]},
        {"tools": [{"functionDeclarations": [{"name": "f"}, {"name": "f"}]}]},
        {
            "tools": [
                {
                    "functionDeclarations": [
                        {"name": "f", "parameters_json_schema": {"type": "string"}}
                    ]
                }
            ]
        },
        {
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": "f",
                            "parameters": {"type": "OBJECT"},
                            "parametersJsonSchema": {"type": "object"},
                        }
                    ]
                }
            ]
        },
        {"generationConfig": {"enableAffectiveDialog": True}},  # removed for 3.8
        {"proactivity": {"proactiveAudio": False}},  # an error on 3.8
    ],
    ids=lambda setup: json.dumps(setup)[:40],
)
def test_invalid_setup_closes_1007(endpoint: LocalGeminiLive, setup: dict[str, Any]) -> None:
    async def scenario() -> tuple[int, str]:
        async with raw(endpoint, {"model": f"models/{MODEL}", **setup}) as ws:
            return await closed_with(ws)

    assert asyncio.run(scenario()) == (1007, INVALID_ARGUMENT)
    assert endpoint.records[-1].refusal


def test_unknown_fields_are_refused_in_either_spelling(endpoint: LocalGeminiLive) -> None:
    async def scenario(setup: dict[str, Any]) -> tuple[int, str]:
        async with raw(endpoint, setup) as ws:
            return await closed_with(ws)

    code, reason = asyncio.run(scenario({"model": f"models/{MODEL}", "voice": "Kore"}))
    assert code == 1007 and reason.startswith('Invalid JSON payload received. Unknown name "voice"')
    # Nested keys arrive snake_case from genai; both spellings are the same field.
    ok = {
        "model": f"models/{MODEL}",
        "generation_config": {"response_modalities": ["AUDIO"]},
        "realtime_input_config": {"automatic_activity_detection": {"disabled": True}},
    }

    async def accepted() -> dict[str, Any]:
        async with raw(endpoint, ok) as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), 10))

    assert asyncio.run(accepted()) == {"setupComplete": {}}


def test_everything_genai_sends_for_a_full_config_is_accepted(endpoint: LocalGeminiLive) -> None:
    full = config(
        speech_config=types.SpeechConfig(
            voice_config=types.VoiceConfig(
                prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name="Kore")
            ),
            language_code="en-US",
        ),
        session_resumption=types.SessionResumptionConfig(),
        context_window_compression=types.ContextWindowCompressionConfig(
            trigger_tokens=25_600, sliding_window=types.SlidingWindow(target_tokens=12_800)
        ),
        realtime_input_config=types.RealtimeInputConfig(
            automatic_activity_detection=types.AutomaticActivityDetection(
                start_of_speech_sensitivity=types.StartSensitivity.START_SENSITIVITY_LOW,
                end_of_speech_sensitivity=types.EndSensitivity.END_SENSITIVITY_HIGH,
                prefix_padding_ms=20,
                silence_duration_ms=500,
            ),
            activity_handling=types.ActivityHandling.START_OF_ACTIVITY_INTERRUPTS,
            turn_coverage=types.TurnCoverage.TURN_INCLUDES_ONLY_ACTIVITY,
        ),
        system_instruction="You are helpful.",
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name="get_weather",
                        description="weather",
                        parameters=types.Schema(
                            type=types.Type.OBJECT,
                            properties={"location": types.Schema(type=types.Type.STRING)},
                            required=["location"],
                        ),
                        behavior=types.Behavior.NON_BLOCKING,
                    )
                ]
            )
        ],
    )

    async def scenario() -> None:
        async with client(endpoint).aio.live.connect(model=MODEL, config=full) as session:
            assert session is not None

    asyncio.run(scenario())
    setup = endpoint.records[-1].parsed
    assert setup is not None
    assert (setup.voice, setup.language) == ("Kore", "en-US")
    assert (setup.silence_duration_ms, setup.prefix_padding_ms) == (500, 20)
    assert setup.compression and (setup.trigger_tokens, setup.target_tokens) == (25_600, 12_800)
    assert setup.resumption and setup.functions["get_weather"].behavior == "NON_BLOCKING"


# ---------------------------------------------------------------- client messages


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ({"realtimeInput": {"activityStart": {}}}, EXPLICIT_ACTIVITY),
        ({"realtimeInput": {"audio": {"data": "AAAA", "mimeType": "audio/wav"}}}, INVALID_ARGUMENT),
        (
            {"realtimeInput": {"audio": {"data": "AAAA", "mimeType": "audio/pcm;rate=16000"}}},
            INVALID_ARGUMENT,
        ),
        (
            {"realtimeInput": {"audio": {"data": "A+_A", "mimeType": "audio/pcm;rate=16000"}}},
            INVALID_ARGUMENT,
        ),
        (
            {"realtimeInput": {"audio": {"data": "AAAA", "mimeType": "audio/pcm;rate=12345"}}},
            INVALID_ARGUMENT,
        ),
        ({"realtimeInput": {"text": "a", "audioStreamEnd": True}}, INVALID_ARGUMENT),
        (
            {"clientContent": {"turns": [{"role": "robot", "parts": [{"text": "x"}]}]}},
            INVALID_ARGUMENT,
        ),
        ({"setup": {"model": f"models/{MODEL}"}}, INVALID_ARGUMENT),
        ({"hello": {}}, 'Invalid JSON payload received. Unknown name "hello"'),
    ],
    ids=lambda value: json.dumps(value)[:48] if isinstance(value, dict) else "",
)
def test_malformed_client_messages_close_1007(
    endpoint: LocalGeminiLive, message: dict[str, Any], reason: str
) -> None:
    async def scenario() -> tuple[int, str]:
        async with raw(endpoint, {"model": f"models/{MODEL}"}) as ws:
            assert json.loads(await ws.recv()) == {"setupComplete": {}}
            return await closed_with(ws, message)

    code, got = asyncio.run(scenario())
    assert code == 1007 and got.startswith(reason)


def test_activity_signals_flow_with_automatic_detection_disabled(endpoint: LocalGeminiLive) -> None:
    manual = config(
        realtime_input_config=types.RealtimeInputConfig(
            automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
        )
    )
    speech = tone(0.5)

    async def scenario() -> list[types.LiveServerMessage]:
        async with client(endpoint).aio.live.connect(model=MODEL, config=manual) as session:
            await speak(session, tone(0.3))  # outside a bracket: no turn
            await session.send_realtime_input(activity_start=types.ActivityStart())
            await speak(session, speech)
            await session.send_realtime_input(activity_end=types.ActivityEnd())
            return await one_turn(session)

    messages = asyncio.run(scenario())
    audio = b"".join(
        p.inline_data.data
        for m in messages
        if m.server_content and m.server_content.model_turn
        for p in m.server_content.model_turn.parts
    )
    assert len(audio) // 2 == len(speech) // 2 * 3 // 2  # exactly the bracket, at 24 kHz
    assert endpoint.records[-1].received_kinds()[-3:] == ["audio", "audio", "activityEnd"]


# ---------------------------------------------------------------- behaviour


def test_spoken_turn_transcriptions_audio_and_order(endpoint: LocalGeminiLive) -> None:
    speech = tone(1.0)

    async def scenario() -> list[types.LiveServerMessage]:
        async with client(endpoint).aio.live.connect(model=MODEL, config=config()) as session:
            await speak(session, bytes(8000) + speech + bytes(32000))
            return await one_turn(session)

    messages = asyncio.run(scenario())
    contents = [m.server_content for m in messages if m.server_content]
    heard = [c.input_transcription.text for c in contents if c.input_transcription]
    said = "".join(c.output_transcription.text for c in contents if c.output_transcription)
    assert len(heard) == 1 and heard[0].startswith("[offline model: no speech recognition]")
    assert said == f"I heard {float(heard[0].split()[5]):.2f} seconds of audio. Here it is back."
    parts = [p for c in contents if c.model_turn for p in c.model_turn.parts]
    assert {p.inline_data.mime_type for p in parts} == {"audio/pcm;rate=24000"}
    samples16 = int(heard[0].split("(")[1].split()[0])
    assert sum(len(p.inline_data.data) for p in parts) // 2 == samples16 * 3 // 2
    kinds = [k for c in contents for k, v in c.model_dump(exclude_none=True).items() if v]
    assert kinds.index("generation_complete") < kinds.index("turn_complete") == len(kinds) - 1
    assert messages[-1].usage_metadata.response_token_count > 0


def test_gemini_25_sends_one_part_per_message(endpoint: LocalGeminiLive) -> None:
    async def scenario() -> list[types.LiveServerMessage]:
        model = "gemini-2.5-flash-native-audio-preview-12-2025"
        async with client(endpoint).aio.live.connect(model=model, config=config()) as session:
            await session.send_client_content(
                turns=[types.Content(role="user", parts=[types.Part(text="hello")])],
                turn_complete=True,
            )
            return await one_turn(session)

    for message in asyncio.run(scenario()):
        content = message.server_content
        if content is not None:
            fields = [k for k, v in content.model_dump(exclude_none=True).items() if v]
            assert len(fields) == 1, fields


def test_tool_call_round_trip(endpoint: LocalGeminiLive) -> None:
    weather = types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="get_weather",
                parameters_json_schema={
                    "type": "object",
                    "properties": {"location": {"type": "string"}},
                },
            )
        ]
    )

    async def scenario(
        model: str,
    ) -> tuple[list[types.LiveServerMessage], list[types.LiveServerMessage]]:
        async with client(endpoint).aio.live.connect(
            model=model, config=config(tools=[weather])
        ) as session:
            await session.send_realtime_input(text="what is the weather in Paris")
            first = []
            async for message in session.receive():
                first.append(message)
                if message.tool_call:
                    break
            call = first[-1].tool_call.function_calls[0]
            assert (call.name, call.args) == ("get_weather", {"location": "Paris"}) and call.id
            if model.startswith("gemini-2.5"):  # its turn ends with the call
                first += await one_turn(session)
            await session.send_tool_response(
                function_responses=[
                    types.FunctionResponse(id=call.id, name=call.name, response={"c": 14})
                ]
            )
            return first, await one_turn(session)

    for model in (MODEL, "gemini-2.5-flash-native-audio-preview-12-2025"):
        first, answer = asyncio.run(scenario(model))
        ended = any(m.server_content and m.server_content.turn_complete for m in first)
        assert ended == model.startswith("gemini-2.5")
        said = "".join(
            m.server_content.output_transcription.text
            for m in answer
            if m.server_content and m.server_content.output_transcription
        )
        assert said == 'get_weather returned {"c": 14}.'
    assert endpoint.records[-1].received[-1][0] == "toolResponse"


def test_a_response_to_no_pending_call_closes_1008(endpoint: LocalGeminiLive) -> None:
    async def scenario() -> None:
        async with client(endpoint).aio.live.connect(model=MODEL, config=config()) as session:
            await session.send_tool_response(
                function_responses=[types.FunctionResponse(id="fc-nope", name="f", response={})]
            )
            await one_turn(session)

    with pytest.raises(errors.APIError) as excinfo:
        asyncio.run(scenario())
    assert refused(excinfo) == (1008, "Requested entity was not found.")


def test_speaking_over_the_answer_interrupts_it(tmp_path: Path) -> None:
    slow = EndpointConfig(speed=1.0)  # the answer plays in real time: there is time to barge in
    with LocalGeminiLive(slow, cert_dir=tmp_path) as endpoint:

        async def scenario() -> list[str]:
            async with client(endpoint).aio.live.connect(model=MODEL, config=config()) as session:
                await speak(session, tone(1.0) + bytes(32000))
                kinds: list[str] = []
                async for message in session.receive():
                    content = message.server_content
                    if content and content.model_turn and "model_turn" not in kinds:
                        await speak(session, tone(0.3))  # barge in at the first audio
                    if content:
                        kinds += [k for k, v in content.model_dump(exclude_none=True).items() if v]
                return kinds

        kinds = asyncio.run(scenario())
    assert kinds[-2:] == ["interrupted", "turn_complete"]
    assert "generation_complete" not in kinds


def test_go_away_after_the_connection_lifetime_then_1011(tmp_path: Path) -> None:
    short = EndpointConfig(connection_lifetime_s=0.6, go_away_notice_s=0.3)
    with LocalGeminiLive(short, cert_dir=tmp_path) as endpoint:

        async def scenario() -> tuple[str, errors.APIError]:
            async with client(endpoint).aio.live.connect(model=MODEL, config=config()) as session:
                message = await session._receive()
                with pytest.raises(errors.APIError) as excinfo:
                    await session._receive()
                return message.go_away.time_left, excinfo.value

        left, error = asyncio.run(scenario())
    assert left == "0.3s"  # a protobuf Duration
    assert (error.code, error.details) == (
        1011,
        "Deadline expired before operation could complete.",
    )


def test_resumption_continues_the_conversation(endpoint: LocalGeminiLive) -> None:
    resumable = config(session_resumption=types.SessionResumptionConfig())

    async def turn(session: Any, text: str) -> tuple[str, str | None]:
        await session.send_realtime_input(text=text)
        said, handle = "", None
        for message in await one_turn(session):
            content = message.server_content
            if content and content.output_transcription:
                said += content.output_transcription.text
        update = await session._receive()  # the handle after the turn
        if update.session_resumption_update.resumable:
            handle = update.session_resumption_update.new_handle
        return said, handle

    async def scenario() -> list[str]:
        c = client(endpoint)
        async with c.aio.live.connect(model=MODEL, config=resumable) as session:
            await session._receive()  # the first handle
            first, handle = await turn(session, "one")
        again = config(session_resumption=types.SessionResumptionConfig(handle=handle))
        async with c.aio.live.connect(model=MODEL, config=again) as session:
            await session._receive()
            second, _ = await turn(session, "two")
        return [first, second]

    assert asyncio.run(scenario()) == [
        "You said: one",
        "You said: two (1 earlier turns in this session)",
    ]
    assert endpoint.records[1].resumed_from is not None


def test_resumption_refusals(endpoint: LocalGeminiLive) -> None:
    async def scenario() -> list[tuple[int, str]]:
        c = client(endpoint)
        results = []
        unknown = config(session_resumption=types.SessionResumptionConfig(handle="no-such-handle"))
        with pytest.raises(errors.APIError) as excinfo:
            async with c.aio.live.connect(model=MODEL, config=unknown):
                pass
        results.append(refused(excinfo))
        resumable = config(session_resumption=types.SessionResumptionConfig())
        async with c.aio.live.connect(model=MODEL, config=resumable) as session:
            handle = (await session._receive()).session_resumption_update.new_handle
            # While this socket is open, the same session cannot be resumed elsewhere.
            again = config(session_resumption=types.SessionResumptionConfig(handle=handle))
            with pytest.raises(errors.APIError) as excinfo:
                async with c.aio.live.connect(model=MODEL, config=again):
                    pass
            results.append(refused(excinfo))
        return results

    assert asyncio.run(scenario()) == [
        (1008, "Requested entity was not found."),
        (1011, "Internal error encountered."),
    ]


def test_the_context_window_is_enforced_unless_compressed(tmp_path: Path) -> None:
    small = EndpointConfig(context_tokens=40, speed=50.0)
    with LocalGeminiLive(small, cert_dir=tmp_path) as endpoint:

        async def conversation(cfg: types.LiveConnectConfig) -> list[str]:
            said = []
            async with client(endpoint).aio.live.connect(model=MODEL, config=cfg) as session:
                for k in range(6):
                    await session.send_realtime_input(text=f"turn number {k} " * 3)
                    words = ""
                    for message in await one_turn(session):
                        if message.server_content and message.server_content.output_transcription:
                            words += message.server_content.output_transcription.text
                    said.append(words)
            return said

        with pytest.raises(errors.APIError) as excinfo:
            asyncio.run(conversation(config()))
        code, reason = refused(excinfo)
        assert code == 1007 and reason.startswith("The input token count")
        window = types.ContextWindowCompressionConfig(sliding_window=types.SlidingWindow())
        said = asyncio.run(conversation(config(context_window_compression=window)))
    # The sliding window forgets the oldest turns: the count of earlier turns stays small.
    assert len(said) == 6 and not said[-1].endswith("(5 earlier turns in this session)")


def test_gemini_31_takes_client_content_only_as_initial_history(endpoint: LocalGeminiLive) -> None:
    async def scenario() -> None:
        model = "gemini-3.1-flash-live-preview"
        async with client(endpoint).aio.live.connect(model=model, config=config()) as session:
            await session.send_client_content(
                turns=[types.Content(role="user", parts=[types.Part(text="hi")])],
                turn_complete=True,
            )
            await one_turn(session)

    with pytest.raises(errors.APIError) as excinfo:
        asyncio.run(scenario())
    assert refused(excinfo) == (1007, INVALID_ARGUMENT)


def test_the_base64_of_answers_is_standard(endpoint: LocalGeminiLive) -> None:
    async def scenario() -> None:
        async with raw(endpoint, {"model": f"models/{MODEL}"}) as ws:
            await ws.recv()
            await ws.send(json.dumps({"realtimeInput": {"text": "hello"}}))
            while True:
                frame = await asyncio.wait_for(ws.recv(), 10)
                assert isinstance(frame, bytes)  # Google's JSON comes in binary frames
                message = json.loads(frame)
                turn = message.get("serverContent", {}).get("modelTurn")
                if turn:
                    data = turn["parts"][0]["inlineData"]["data"]
                    assert base64.b64decode(data, validate=True)
                    return

    asyncio.run(scenario())
