"""The Gemini Live path, checked up to Google's boundary (unreachable here).

With credentials in the environment the app must pick a native-audio live
model and hand ADK a run config that asks for audio, both transcriptions and
our tools. The only stand-in is ``google.genai``'s ``AsyncLive.connect`` —
the network call — which records what ADK would have sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import time

import pytest
from google.adk.agents.live_request_queue import LiveRequestQueue
from google.adk.models.google_llm import Gemini
from google.genai import live as genai_live
from google.genai import types

from server import settings as settings_module
from server.offline_model import OfflineLiveModel
from server.runtime import USER_ID, Runtime
from server.settings import Settings

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
    assert runtime.model_name == "offline"
    assert isinstance(runtime.agent.model, OfflineLiveModel)


def test_api_key_selects_gemini_api_native_audio(clean_env, tmp_path: pathlib.Path) -> None:
    clean_env.setenv("GOOGLE_API_KEY", "test-key")
    runtime = Runtime(Settings(data_dir=tmp_path))
    assert isinstance(runtime.agent.model, Gemini)
    assert runtime.agent.model.model == settings_module.GEMINI_API_LIVE_MODEL
    assert "native-audio" in runtime.model_name


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
        created = await runtime.session_service.create_session(
            app_name=runtime.settings.app_name, user_id=USER_ID, session_id="s" * 32
        )
        queue = LiveRequestQueue()
        events = runtime.runner.run_live(
            user_id=USER_ID,
            session_id=created.id,
            live_request_queue=queue,
            run_config=runtime.run_config_for(None),
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
    assert "get_current_time" in config.system_instruction.parts[0].text
    kind, sent = session.sent[0]
    assert kind == "realtime"
    blob = sent.get("audio") or sent["media"]  # the key depends on the model generation
    assert blob.mime_type == "audio/pcm;rate=16000" and len(blob.data) == 640


def test_push_to_talk_disables_the_models_activity_detection(tmp_path) -> None:
    from server.agent import build_run_config

    settings = Settings(data_dir=tmp_path)
    assert build_run_config(settings).realtime_input_config is None
    config = build_run_config(settings, "manual")
    assert config.realtime_input_config.automatic_activity_detection.disabled is True
    # push_to_talk makes "manual" the default for clients that do not choose.
    runtime = Runtime(Settings(data_dir=tmp_path, push_to_talk=True))
    assert runtime.run_config_for(None).realtime_input_config.automatic_activity_detection.disabled
    assert runtime.run_config_for("server").realtime_input_config is None


@pytest.mark.parametrize("turn_detection", ["server", "manual"])
def test_manual_turn_detection_reaches_google_per_connection(
    clean_env, tmp_path: pathlib.Path, turn_detection: str
) -> None:
    """Through the app: a socket's `turnDetection` decides whether Google's
    automatic activity detection is on for that socket's live session."""
    from starlette.testclient import TestClient

    from server import create_app

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
        for _ in range(200):
            if session.sent:
                break
            time.sleep(0.01)
    (config,) = captured
    realtime = config.realtime_input_config
    if turn_detection == "manual":
        assert realtime.automatic_activity_detection.disabled is True
        assert session.sent[0] == ("realtime", {"activity_start": types.ActivityStart()})
    else:
        assert realtime is None


def test_model_failure_reaches_the_client_as_error_then_1011(clean_env, tmp_path) -> None:
    from starlette.testclient import TestClient
    from starlette.websockets import WebSocketDisconnect

    from server import create_app

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
