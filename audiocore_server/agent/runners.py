"""The agent as the handlers run it: its tools, and the ADK runners.

``Agents`` holds every app the server serves (``AppRunners``: its live
runner for ``/ws``, ``/live`` and ``/run_live``, the HTTP chat's — the same
agent on a text model — and the tools by name), selects one by name, and
keeps what they share: the live run configuration for each turn detection,
and how many live runs are in progress (``/healthz`` liveRuns: one per
serving socket; a run left behind by a closed socket would show there).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence

from google.adk.agents import BaseAgent
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
from .definition import AppSource, build_run_config
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


class UnknownApp(LookupError):
    """A client selected an app the server does not serve."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        what = repr(name) if name else "none named, and this server has several"
        super().__init__(f"App not found: {what} (this server has {', '.join(known)})")
        self.name = name


class AppRunners:
    """One app as the surfaces run it: the live agent and runner, the HTTP
    chat's (the same agent on a text model), and the tools the server
    completes, by name."""

    def __init__(
        self,
        name: str,
        agent: BaseAgent,
        chat_agent: BaseAgent,
        tools: Mapping[str, ToolSpec],
        session_service: BaseSessionService,
        *,
        plugins: Sequence[BasePlugin],
        chat_plugins: Sequence[BasePlugin],
        memory: MemoryStore | None,
        live_refusal: str | None = None,
        chat_refusal: str | None = None,
    ) -> None:
        self.name = name
        self.agent = agent
        self.chat_agent = chat_agent
        self.tools = tools
        self.live_refusal = live_refusal
        self.chat_refusal = chat_refusal
        self.runner = Runner(
            app=App(name=name, root_agent=agent, plugins=list(plugins)),
            session_service=session_service,
            memory_service=memory,  # ADK's load_memory and preload_memory read it
            auto_create_session=False,
        )
        self.chat_runner = Runner(
            app=App(name=name, root_agent=chat_agent, plugins=list(chat_plugins)),
            session_service=session_service,
            memory_service=memory,
            auto_create_session=False,
        )

    def describe_tools(self) -> list[dict[str, object]]:
        return [spec.describe() for spec in self.tools.values()]

    def warm_up(self) -> None:
        """Build now what the first live run would build with the event loop
        held (22 ms here, in the first conversation of each process): each
        agent's tool declarations (pydantic models and JSON schemas, cached
        by ADK per function) and the request model's own schema."""
        for agent in (self.agent, self.chat_agent):
            tools = [tool for tool in getattr(agent, "tools", ()) if isinstance(tool, BaseTool)]
            LlmRequest().append_tools(tools)

    async def close(self) -> None:
        await self.runner.close()
        await self.chat_runner.close()


class Agents:
    """Every app the server serves (``agent/apps.py``), and what the apps
    share: the live model's name, the run configurations, the live runs."""

    def __init__(
        self,
        settings: Settings,
        apps: Sequence[AppSource],
        session_service: BaseSessionService,
        memory: MemoryStore | None = None,
        plugins: Sequence[BasePlugin] = (),
    ) -> None:
        if not apps:
            raise ValueError("no app to serve")
        self.live_model_name = settings.live_model_name
        self.chat_model_name = settings.chat_model_name
        self.default_turn_detection: TurnDetection = "manual" if settings.push_to_talk else "server"
        self._run_configs = {
            mode: build_run_config(settings, mode) for mode in ("server", "manual")
        }
        self.live_runs_recorder = RunRecorder()
        # The server's own plugins first (they watch and never answer for
        # the agent), then the app's, then --plugin's: docs/agents.md.
        live_plugins: list[BasePlugin] = [self.live_runs_recorder]
        chat_plugins: list[BasePlugin] = []
        if memory is not None and settings.store_to_memory:
            live_plugins.append(TurnRecorder(memory, transcripts=settings.persist_transcripts))
            chat_plugins.append(ChatTurnRecorder(memory))  # a chat run is a turn
        self.apps: dict[str, AppRunners] = {}
        for source in apps:
            self.apps[source.name] = AppRunners(
                source.name,
                source.agent,
                source.chat_agent,
                source.tools,
                session_service,
                plugins=[*live_plugins, *source.plugins, *plugins],
                chat_plugins=[*chat_plugins, *source.plugins, *plugins],
                memory=memory,
                live_refusal=source.live_refusal,
                chat_refusal=source.chat_refusal,
            )
        self.default = next(iter(self.apps.values())) if len(self.apps) == 1 else None
        self.live_runs = 0

    @property
    def names(self) -> list[str]:
        return sorted(self.apps)

    def select(self, name: str | None) -> AppRunners:
        """The app a client named; with none named, the only app. Raises
        ``UnknownApp`` (naming the apps there are)."""
        if name is None:
            if self.default is not None:
                return self.default
            raise UnknownApp("", self.names)
        found = self.apps.get(name)
        if found is None:
            raise UnknownApp(name, self.names)
        return found

    def warm_up(self) -> None:
        for app in self.apps.values():
            app.warm_up()

    def run_config_for(self, turn_detection: TurnDetection | None) -> RunConfig:
        """The live run config of a connection that chose ``turn_detection``."""
        return self._run_configs[turn_detection or self.default_turn_detection]

    async def close(self) -> None:
        for app in self.apps.values():
            await app.close()
