"""The agents the server bridges to (the demo's, or a user's app as each
surface runs it), their models, and the live run config."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

from google.adk.agents import Agent, BaseAgent
from google.adk.agents.run_config import RunConfig
from google.adk.models.base_llm import BaseLlm
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types

from ..models import choice
from ..offline.model import OfflineLiveModel
from ..offline.task_model import OfflineTaskModel
from ..settings import Settings
from ..tools.spec import ToolSpec, adk_tool
from ..wire.protocol import TurnDetection
from .apps import LoadedApp
from .user_agent import chat_models, copy_tree, live_models


def build_model(settings: Settings, *, chat: bool = False) -> BaseLlm:
    """The live model, or with ``chat`` the text model of the HTTP chat."""
    if chat:
        return choice.text_model(settings, settings.chat_model_name, OfflineLiveModel)
    return choice.live_model(settings, OfflineLiveModel)


def build_task_model(settings: Settings) -> BaseLlm:
    """The background task agent's text model (``tasks/adk_backend.py``)."""
    return choice.text_model(
        settings,
        settings.task_model_name,
        lambda: OfflineTaskModel(step_delay_s=settings.task_offline_delay_s),
    )


def build_agent(settings: Settings, tools: Sequence[ToolSpec], *, chat: bool = False) -> Agent:
    return Agent(
        name="voice_agent",
        model=build_model(settings, chat=chat),
        instruction=settings.agent_instruction,
        tools=[adk_tool(spec) for spec in tools],
    )


@dataclasses.dataclass(frozen=True)
class AppSource:
    """An app ready for its runners: the live agent, the HTTP chat's, the
    tools the server completes, and the app's own ADK plugins."""

    name: str
    agent: BaseAgent
    chat_agent: BaseAgent
    tools: Mapping[str, ToolSpec]
    plugins: Sequence[BasePlugin] = ()
    # Why the live surfaces, or the HTTP chat, cannot run the app on the
    # model configured (Gemini's built-in tools on another model); None: they can.
    live_refusal: str | None = None
    chat_refusal: str | None = None


def demo_source(settings: Settings, tools: Sequence[ToolSpec]) -> AppSource:
    """The demo agent, with the server's tools (``runtime.py``)."""
    return AppSource(
        settings.app_name,
        build_agent(settings, tools),
        build_agent(settings, tools, chat=True),
        {spec.name: spec for spec in tools},
    )


def user_source(settings: Settings, app: LoadedApp, requiring: Collection[str]) -> AppSource:
    """A user's app as the surfaces run it (``user_agent.py``: which model
    each agent runs)."""
    text = chat_models(lambda name: _text_model(settings, name))
    live = copy_tree(
        app.root_agent, live_models(build_model(settings)), requiring, tool_model_for=text
    )
    chat = copy_tree(app.root_agent, text, requiring)
    return AppSource(
        app.name,
        live.root,
        chat.root,
        live.specs,
        tuple(app.plugins),
        live_refusal=_refusal(live.gemini_only, settings.backend, settings.live_model_name),
        chat_refusal=_refusal(chat.gemini_only, settings.text_backend, settings.chat_model_name),
    )


def _refusal(names: list[str], backend: str, model: str) -> str | None:
    """Why ``model`` (on ``backend``) cannot run an agent with the Gemini
    built-in tools ``names``; None when it can."""
    if not names or backend in ("gemini-api", "vertex"):
        return None
    what = "the offline model" if backend == "offline" else f"OpenAI Realtime ({model})"
    return (
        f"the agent has Gemini built-in tools ({', '.join(names)}), which {what} cannot run: "
        "run the agent on Gemini, or give it function tools instead"
    )


def _text_model(settings: Settings, name: str | None) -> BaseLlm:
    """The HTTP chat's model for an agent's model ``name``: ``--chat-model``
    wins; offline without a key."""
    return choice.text_model(
        settings, settings.chat_model or name or settings.chat_model_name, OfflineLiveModel
    )


def build_run_config(settings: Settings, turn_detection: TurnDetection = "server") -> RunConfig:
    """Live configuration: audio answers, both transcriptions, and turn detection.

    ``turn_detection`` is the connection's choice (``start.turnDetection``):
    "server" leaves voice activity detection to the model; "manual" turns it
    off, and the client marks every turn with activity_start/activity_end —
    Gemini accepts those signals only with its automatic detection disabled.
    The offline model reads the same setting from the live request.
    """
    realtime_input = None
    if turn_detection == "manual":
        realtime_input = types.RealtimeInputConfig(
            automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
        )
    google = settings.backend in ("gemini-api", "vertex")
    return RunConfig(
        response_modalities=[types.Modality.AUDIO],
        input_audio_transcription=types.AudioTranscriptionConfig(),
        output_audio_transcription=types.AudioTranscriptionConfig(),
        realtime_input_config=realtime_input,
        speech_config=_speech_config(settings),
        # A connection lasts about 10 minutes; resumption carries the
        # conversation over to the next one (ADK reconnects with the handle).
        session_resumption=types.SessionResumptionConfig() if google else None,
        # Without compression an audio session ends at 15 minutes or when the
        # context window is full; a sliding window (the service's default
        # sizes) makes it unlimited.
        context_window_compression=(
            types.ContextWindowCompressionConfig(sliding_window=types.SlidingWindow())
            if google
            else None
        ),
    )


def _speech_config(settings: Settings) -> types.SpeechConfig | None:
    if settings.voice is None and settings.language is None:
        return None
    voice = None
    if settings.voice is not None:
        voice = types.VoiceConfig(
            prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name=settings.voice)
        )
    return types.SpeechConfig(voice_config=voice, language_code=settings.language)
