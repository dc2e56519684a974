"""The ADK agent the server bridges to, and its live run config."""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.agents import Agent
from google.adk.agents.run_config import RunConfig
from google.adk.models.base_llm import BaseLlm
from google.adk.models.google_llm import Gemini
from google.genai import types

from .offline_model import OfflineLiveModel
from .protocol import TurnDetection
from .settings import Settings
from .tools import ToolSpec, adk_tool


def build_model(settings: Settings, *, chat: bool = False) -> BaseLlm:
    """The live model, or with ``chat`` the text model of the HTTP chat."""
    if settings.backend == "offline":
        return OfflineLiveModel()
    return Gemini(model=settings.chat_model_name if chat else settings.live_model_name)


def build_agent(settings: Settings, tools: Sequence[ToolSpec], *, chat: bool = False) -> Agent:
    return Agent(
        name="voice_agent",
        model=build_model(settings, chat=chat),
        instruction=settings.agent_instruction,
        tools=[adk_tool(spec) for spec in tools],
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
    return RunConfig(
        response_modalities=[types.Modality.AUDIO],
        input_audio_transcription=types.AudioTranscriptionConfig(),
        output_audio_transcription=types.AudioTranscriptionConfig(),
        realtime_input_config=realtime_input,
        session_resumption=(
            None if settings.backend == "offline" else types.SessionResumptionConfig()
        ),
    )
