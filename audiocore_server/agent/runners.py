"""The agent as the handlers run it: its tools, and the ADK runners.

``Agents`` holds the live runner (``/ws``, ``/live``, ``/run_live``) and the
HTTP chat's (the same agent and tools on a text model), the tools by name,
the live run configuration for each turn detection, and how many live runs
are in progress (``/healthz`` liveRuns: one per serving socket; a run left
behind by a closed socket would show there).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence

from google.adk.agents.run_config import RunConfig
from google.adk.apps.app import App
from google.adk.models.llm_request import LlmRequest
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService
from google.adk.tools.base_tool import BaseTool
from google.genai import types

from ..memory.store import MemoryStore
from ..memory.stored_turns import ChatTurnRecorder, TurnRecorder
from ..settings import Settings
from ..tools.spec import ToolSpec
from ..wire.protocol import TurnDetection
from .definition import build_agent, build_run_config
from .live_runs import RunRecorder

log = logging.getLogger(__name__)


# What ADK imports during the first live run and not before, found by
# running one (tests/server/test_telemetry.py checks the list still covers
# it): about 0.3 s with the event loop held, while every conversation waits.
_LAZY_MODULES = (
    "google.adk.flows.llm_flows.auto_flow",
    "google.adk.flows.llm_flows.single_flow",
    "google.adk.live._live_llm_flow",
    "google.adk.live._runner_utils",
    "google.adk.live._flow_utils",
    "google.adk.apps.compaction",
    "google.adk.apps.llm_event_summarizer",
    "google.adk.auth.auth_preprocessor",
    "google.adk.tools.google_search_tool",
    "google.adk.tools.vertex_ai_search_tool",
    "google.adk.tools.set_model_response_tool",
    "pydantic._internal._dataclasses",
)


# The google-genai models a conversation validates whose pydantic schema is
# completed lazily, on first use (the same test checks this list): 5 ms
# with the loop held. Only these: completing all 470 takes half a second.
_LAZY_MODELS = (
    types.Part,
    types.Content,
    types.Blob,
    types.GenerateContentResponseUsageMetadata,
)


def warm_up() -> None:
    """Import now what ADK would import during the first live run: its
    workflow machinery (``google.adk.Workflow``, a lazy attribute) and its
    live flow's modules; complete the models it validates."""
    import google.adk

    getattr(google.adk, "Workflow")  # noqa: B009 - the lazy import is the point
    for model in _LAZY_MODELS:
        model.model_rebuild()
    for name in _LAZY_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # another ADK: the first run imports what it needs
            log.debug("warm-up: no module %s", name)


class Agents:
    def __init__(
        self,
        settings: Settings,
        tools: Sequence[ToolSpec],
        session_service: BaseSessionService,
        memory: MemoryStore | None = None,
    ) -> None:
        self.tools: Mapping[str, ToolSpec] = {spec.name: spec for spec in tools}
        self.agent = build_agent(settings, tools)
        self.live_model_name = settings.live_model_name
        self.chat_model_name = settings.chat_model_name
        self.default_turn_detection: TurnDetection = "manual" if settings.push_to_talk else "server"
        self._run_configs = {
            mode: build_run_config(settings, mode) for mode in ("server", "manual")
        }
        self.live_runs_recorder = RunRecorder()
        plugins: list[BasePlugin] = [self.live_runs_recorder]
        if memory is not None and settings.store_to_memory:
            plugins.append(TurnRecorder(memory, transcripts=settings.persist_transcripts))
        self.runner = Runner(
            app=App(name=settings.app_name, root_agent=self.agent, plugins=plugins),
            session_service=session_service,
            memory_service=memory,  # ADK's load_memory and preload_memory read it
            auto_create_session=False,
        )
        chat_plugins: list[BasePlugin] = []
        if memory is not None and settings.store_to_memory:
            chat_plugins.append(ChatTurnRecorder(memory))  # a chat run is a turn
        self.chat_agent = build_agent(settings, tools, chat=True)
        self.chat_runner = Runner(
            app=App(name=settings.app_name, root_agent=self.chat_agent, plugins=chat_plugins),
            session_service=session_service,
            memory_service=memory,
            auto_create_session=False,
        )
        self.live_runs = 0

    def warm_up(self) -> None:
        """Build now what the first live run would build with the event loop
        held (22 ms here, in the first conversation of each process): each
        agent's tool declarations (pydantic models and JSON schemas, cached
        by ADK per function) and the request model's own schema."""
        for agent in (self.agent, self.chat_agent):
            tools = [tool for tool in agent.tools if isinstance(tool, BaseTool)]
            LlmRequest().append_tools(tools)

    def run_config_for(self, turn_detection: TurnDetection | None) -> RunConfig:
        """The live run config of a connection that chose ``turn_detection``."""
        return self._run_configs[turn_detection or self.default_turn_detection]

    def describe_tools(self) -> list[dict[str, object]]:
        return [spec.describe() for spec in self.tools.values()]

    async def close(self) -> None:
        await self.runner.close()
        await self.chat_runner.close()
