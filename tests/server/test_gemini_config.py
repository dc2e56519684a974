"""The Gemini Live path, checked up to Google's boundary (unreachable here).

With credentials in the environment the app must pick a native-audio live
model and hand ADK a run config that asks for audio, both transcriptions and
our tools. The only stand-in is ``google.genai``'s ``AsyncLive.connect`` —
the network call — which records what ADK would have sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import time

import pytest
from google.adk.agents.live_request_queue import LiveRequestQueue
from google.adk.models.google_llm import Gemini
from google.genai import live as genai_live
from google.genai import types

from audiocore_server import settings as settings_module
from audiocore_server.models.gemini import LiveGemini
from audiocore_server.offline.model import OfflineLiveModel
from audiocore_server.runtime import Runtime
from audiocore_server.settings import Settings
from audiocore_server.storage.users import USER_ID
from tests.gemini_live import make_self_signed_cert

GOOGLE_ENV = (
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in GOOGLE_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_no_credentials_means_offline(clean_env, tmp_path: pathlib.Path) -> None:
    runtime = Runtime(Settings(data_dir=tmp_path))
    assert runtime.agents.live_model_name == "offline"
    assert isinstance(runtime.agents.select(None).agent.model, OfflineLiveModel)


def test_api_key_selects_the_gemini_api_live_model(clean_env, tmp_path: pathlib.Path) -> None:
    clean_env.setenv("GOOGLE_API_KEY", "test-key")
    runtime = Runtime(Settings(data_dir=tmp_path))
    assert isinstance(runtime.agents.select(None).agent.model, LiveGemini) and isinstance(
        runtime.agents.select(None).agent.model, Gemini
    )
    assert runtime.agents.select(None).agent.model.model == settings_module.GEMINI_API_LIVE_MODEL
    assert (
        runtime.agents.live_model_name == "gemini-3.8-live"
    )  # Google's default Live model (see settings)


def test_vertex_settings_select_vertex_model(clean_env, tmp_path: pathlib.Path) -> None:
    clean_env.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    clean_env.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    clean_env.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    settings = Settings(data_dir=tmp_path)
    assert settings.backend == "vertex"
    assert settings.live_model_name == settings_module.VERTEX_LIVE_MODEL


def test_explicit_offline_wins_over_credentials(clean_env, tmp_path: pathlib.Path) -> None:
    clean_env.setenv("GOOGLE_API_KEY", "test-key")
    assert Settings(data_dir=tmp_path, model="offline").backend == "offline"
    named = Settings(data_dir=tmp_path, model="gemini-live-custom")
    assert named.live_model_name == "gemini-live-custom"


class _SilentSession:
    """Stands in for Google's live session: accepts input, never answers."""

    session_id = "fake"

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.sent: list[tuple[str, dict]] = []

    async def receive(self):
        await self.closed.wait()
        return
        yield  # pragma: no cover

    async def send_realtime_input(self, **kwargs) -> None:
        self.sent.append(("realtime", kwargs))

    async def send_client_content(self, **kwargs) -> None:
        self.sent.append(("content", kwargs))

    async def close(self) -> None:
        self.closed.set()


def test_run_live_hands_google_an_audio_config(clean_env, tmp_path: pathlib.Path) -> None:
    clean_env.setenv("GOOGLE_API_KEY", "test-key")
    captured: dict = {}
    session = _SilentSession()

    @contextlib.asynccontextmanager
    async def fake_connect(self, *, model, config):
        captured["model"], captured["config"] = model, config
        yield session

    clean_env.setattr(genai_live.AsyncLive, "connect", fake_connect)

    async def scenario() -> None:
        runtime = Runtime(Settings(data_dir=tmp_path))
        created = await runtime.sessions.service.create_session(
            app_name=runtime.settings.app_name, user_id=USER_ID, session_id="s" * 32
        )
        queue = LiveRequestQueue()
        events = runtime.agents.select(None).runner.run_live(
            user_id=USER_ID,
            session_id=created.id,
            live_request_queue=queue,
            run_config=runtime.agents.run_config_for(None),
        )
        consumer = asyncio.create_task(anext(events, None))
        queue.send_realtime(types.Blob(mime_type="audio/pcm;rate=16000", data=b"\0\0" * 320))
        for _ in range(200):
            if session.sent:
                break
            await asyncio.sleep(0.01)
        queue.close()
        await asyncio.wait_for(consumer, 5)
        await events.aclose()
        await runtime.close()

    asyncio.run(scenario())
    config: types.LiveConnectConfig = captured["config"]
    assert captured["model"] == settings_module.GEMINI_API_LIVE_MODEL
    assert config.response_modalities == [types.Modality.AUDIO]
    assert config.input_audio_transcription is not None
    assert config.output_audio_transcription is not None
    assert config.session_resumption is not None
    declared = {f.name: f for tool in config.tools for f in tool.function_declarations}
    assert sorted(declared) == [
        "cancel_task",
        "change_bgm",
        "get_current_time",
        "get_location",
        "get_task_status",
        "get_weather",
        "process_payment",
        "start_task",
        "user_memory",
    ]
    # A tool's session-state parameter is the server's, not the model's;
    # so is the task tools' tool context.
    payment = declared["process_payment"].parameters_json_schema
    assert sorted(payment["properties"]) == ["amount", "currency", "recipient"]
    start_task = declared["start_task"].parameters_json_schema
    assert sorted(start_task["properties"]) == ["objective"]
    assert start_task["required"] == ["objective"]
    status = declared["get_task_status"].parameters_json_schema
    assert sorted(status["properties"]) == ["task_id"] and not status.get("required")
    memory = declared["user_memory"].parameters_json_schema
    assert sorted(memory["properties"]) == ["action", "ids", "query", "target", "text"]
    assert memory["required"] == ["action"]
    assert "get_current_time" in config.system_instruction.parts[0].text
    kind, sent = session.sent[0]
    assert kind == "realtime"
    blob = sent.get("audio") or sent["media"]  # the key depends on the model generation
    assert blob.mime_type == "audio/pcm;rate=16000" and len(blob.data) == 640


def test_push_to_talk_disables_the_models_activity_detection(tmp_path) -> None:
    from audiocore_server.agent.definition import build_run_config

    settings = Settings(data_dir=tmp_path)
    assert build_run_config(settings).realtime_input_config is None
    config = build_run_config(settings, "manual")
    assert config.realtime_input_config.automatic_activity_detection.disabled is True
    # push_to_talk makes "manual" the default for clients that do not choose.
    runtime = Runtime(Settings(data_dir=tmp_path, push_to_talk=True))
    assert runtime.agents.run_config_for(
        None
    ).realtime_input_config.automatic_activity_detection.disabled
    assert runtime.agents.run_config_for("server").realtime_input_config is None


@pytest.mark.parametrize("turn_detection", ["server", "manual"])
def test_manual_turn_detection_reaches_google_per_connection(
    clean_env, tmp_path: pathlib.Path, turn_detection: str
) -> None:
    """Through the app: a socket's `turnDetection` decides whether Google's
    automatic activity detection is on for that socket's live session."""
    from starlette.testclient import TestClient

    from audiocore_server import create_app

    clean_env.setenv("GOOGLE_API_KEY", "test-key")
    captured: list[types.LiveConnectConfig] = []
    session = _SilentSession()

    @contextlib.asynccontextmanager
    async def fake_connect(self, *, model, config):
        captured.append(config)
        yield session

    clean_env.setattr(genai_live.AsyncLive, "connect", fake_connect)
    app = create_app(Settings(data_dir=tmp_path, allowed_hosts=("testserver",)))
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "start", "turnDetection": turn_detection})
        assert ws.receive_json()["data"]["turnDetection"] == turn_detection
        ws.send_json({"type": "activity_start"})
        if turn_detection == "server":
            # Gemini would close the live session (1007): refused here instead.
            error = ws.receive_json()
            assert error["type"] == "error" and 'turnDetection "manual"' in error["errorText"]
        for _ in range(200):
            if session.sent or turn_detection == "server":
                break
            time.sleep(0.01)
    (config,) = captured
    realtime = config.realtime_input_config
    if turn_detection == "manual":
        assert realtime.automatic_activity_detection.disabled is True
        assert session.sent[0] == ("realtime", {"activity_start": types.ActivityStart()})
    else:
        assert realtime is None and session.sent == []


def test_model_failure_reaches_the_client_as_error_then_1011(clean_env, tmp_path) -> None:
    from starlette.testclient import TestClient
    from starlette.websockets import WebSocketDisconnect

    from audiocore_server import create_app

    clean_env.setenv("GOOGLE_API_KEY", "test-key")

    @contextlib.asynccontextmanager
    async def unreachable(self, *, model, config):
        raise ConnectionRefusedError("generativelanguage.googleapis.com unreachable")
        yield  # pragma: no cover

    clean_env.setattr(genai_live.AsyncLive, "connect", unreachable)
    app = create_app(Settings(data_dir=tmp_path, allowed_hosts=("testserver",)))
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "start"})
        session = ws.receive_json()
        error = ws.receive_json()
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert session["data"]["model"] == settings_module.GEMINI_API_LIVE_MODEL
    assert error["type"] == "error" and "ConnectionRefusedError" in error["errorText"]
    assert closed.value.code == 1011


# ---------------------------------------------------------------- what users configure


def test_base_url_and_ca_file_reach_the_genai_client(clean_env, tmp_path: pathlib.Path) -> None:
    """--gemini-base-url / --gemini-ca-file: ADK's Gemini model and google-genai's
    live client get them (the end-to-end proof is test_gemini_e2e.py)."""
    from audiocore_server.agent.definition import build_model

    clean_env.setenv("GOOGLE_API_KEY", "test-key")
    ca = make_self_signed_cert(tmp_path / "cert").cert_file
    model = build_model(
        Settings(data_dir=tmp_path, gemini_base_url="https://127.0.0.1:9443", gemini_ca_file=ca)
    )
    assert isinstance(model, LiveGemini) and model.base_url == "https://127.0.0.1:9443"
    client = model._live_api_client
    options = client._api_client._http_options
    assert options.base_url == "https://127.0.0.1:9443"
    assert options.api_version == "v1alpha"  # ADK's choice for the Gemini API's Live
    context = client._api_client._websocket_ssl_ctx["ssl"]
    assert [c["subject"] for c in context.get_ca_certs()] == [
        ((("commonName", "audiocore local Gemini Live"),),)
    ]
    # Without a CA file, genai's own trust store (certifi or SSL_CERT_FILE) applies.
    assert Gemini(model="x").client_kwargs is None
    assert build_model(Settings(data_dir=tmp_path)).client_kwargs is None


def test_run_config_asks_for_what_long_voice_sessions_need(clean_env, tmp_path) -> None:
    from audiocore_server.agent.definition import build_run_config

    clean_env.setenv("GOOGLE_API_KEY", "test-key")
    config = build_run_config(Settings(data_dir=tmp_path, voice="Kore", language="de-DE"))
    assert config.session_resumption == types.SessionResumptionConfig()
    assert config.context_window_compression == types.ContextWindowCompressionConfig(
        sliding_window=types.SlidingWindow()
    )
    speech = config.speech_config
    assert speech.voice_config.prebuilt_voice_config.voice_name == "Kore"
    assert speech.language_code == "de-DE"
    assert build_run_config(Settings(data_dir=tmp_path)).speech_config is None
    offline = build_run_config(Settings(data_dir=tmp_path, model="offline"))
    assert offline.session_resumption is None and offline.context_window_compression is None


def test_settings_come_from_the_environment(tmp_path) -> None:
    settings = Settings.from_env(
        {
            "AUDIOCORE_GEMINI_BASE_URL": "https://proxy.example:8443/live",
            "AUDIOCORE_GEMINI_CA_FILE": str(tmp_path / "ca.pem"),
            "AUDIOCORE_VOICE": "Puck",
            "AUDIOCORE_LANGUAGE": "en-GB",
        }
    )
    assert settings.gemini_base_url == "https://proxy.example:8443/live"
    assert settings.gemini_ca_file == tmp_path / "ca.pem"
    assert (settings.voice, settings.language) == ("Puck", "en-GB")


def test_a_gemini_model_without_credentials_is_refused_at_startup(clean_env, capsys) -> None:
    from audiocore_server.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(["--model", "gemini-3.8-live"])
    assert exited.value.code == 2
    assert "expected Google credentials" in capsys.readouterr().err


def test_vertex_settings_produce_the_vertex_url_and_auth(clean_env, tmp_path) -> None:
    """Vertex AI (ADC): the URL, the bearer token and the model path that ADK's
    Gemini model and google-genai build from GOOGLE_GENAI_USE_VERTEXAI and the
    project settings. Only the socket and the credentials are stand-ins."""
    import google.auth

    clean_env.setenv("GOOGLE_GENAI_USE_ENTERPRISE", "true")  # the newer name of ..._VERTEXAI
    clean_env.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    clean_env.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")

    class Credentials:
        token, valid, quota_project_id = "ya29.test-token", True, "billing-project"

    clean_env.setattr(google.auth, "default", lambda *a, **k: (Credentials(), "my-project"))
    captured: dict = {}

    class Socket:
        async def send(self, message: str) -> None:
            captured.setdefault("sent", []).append(json.loads(message))

        async def recv(self, decode: bool = True) -> bytes:
            if "setup_complete_sent" not in captured:
                captured["setup_complete_sent"] = True
                return b'{"setupComplete": {}}'
            await asyncio.Event().wait()  # then silence until closed

        async def close(self) -> None:
            pass

    @contextlib.asynccontextmanager
    async def ws_connect(uri, additional_headers=None, **kwargs):
        captured["uri"], captured["headers"] = uri, additional_headers
        yield Socket()

    clean_env.setattr(genai_live, "ws_connect", ws_connect)

    async def scenario() -> None:
        runtime = Runtime(Settings(data_dir=tmp_path))
        created = await runtime.sessions.service.create_session(
            app_name=runtime.settings.app_name, user_id=USER_ID, session_id="v" * 32
        )
        queue = LiveRequestQueue()
        events = runtime.agents.select(None).runner.run_live(
            user_id=USER_ID,
            session_id=created.id,
            live_request_queue=queue,
            run_config=runtime.agents.run_config_for(None),
        )
        consumer = asyncio.create_task(anext(events, None))
        for _ in range(500):
            if "sent" in captured:
                break
            await asyncio.sleep(0.01)
        queue.close()
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer
        await events.aclose()
        await runtime.close()

    asyncio.run(scenario())
    # genai's default base URL ends in "/", so the path starts "//ws" (as for
    # every genai user of Vertex's Live API).
    assert captured["uri"] == (
        "wss://us-central1-aiplatform.googleapis.com//ws/"
        "google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent"
    )
    assert captured["headers"]["Authorization"] == "Bearer ya29.test-token"
    assert captured["headers"]["x-goog-user-project"] == "billing-project"
    assert "x-goog-api-key" not in captured["headers"]
    setup = captured["sent"][0]["setup"]
    assert setup["model"] == (
        "projects/my-project/locations/us-central1/publishers/google/models/"
        + settings_module.VERTEX_LIVE_MODEL
    )
    assert setup["generationConfig"]["responseModalities"] == ["AUDIO"]
    assert "sessionResumption" in setup and "contextWindowCompression" in setup


def test_audio_goes_to_gemini_in_50_ms_chunks(clean_env, tmp_path) -> None:
    """Each message to Gemini has a fixed CPU cost (benchmarks/README.md)."""
    assert Settings(data_dir=tmp_path).model_input_chunk_ms == 50  # offline, as Gemini
    clean_env.setenv("GOOGLE_API_KEY", "test-key")
    assert Settings(data_dir=tmp_path).model_input_chunk_ms == 50
    assert Settings(data_dir=tmp_path, input_chunk_ms=20).model_input_chunk_ms == 20
    assert Settings.from_env({"AUDIOCORE_INPUT_CHUNK_MS": "40"}).model_input_chunk_ms == 40
    assert Settings.from_env({"AUDIOCORE_INPUT_CHUNK_MS": ""}).input_chunk_ms is None
