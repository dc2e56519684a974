"""The composition root: every part the handlers share, built once.

``Runtime(settings)`` builds the parts in order — the session store and its
claims (``SessionAccess``), the background-task engine, the agent with its
tools and runners (``Agents``), the sessions' delegated tool calls, and the
connection reaper (``ConnectionReaper``) — and starts and closes them. It is
a container, not a locator: ``audiocore_server/app.py`` hands each handler the parts
it uses, and no handler sees the runtime.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from google.adk.sessions import BaseSessionService

from .agent.apps import check_approval_names, load_apps, load_plugins
from .agent.definition import AppSource, build_task_model, demo_source, user_source
from .agent.demo_tools import DEMO_APPROVALS, DEMO_TOOLS
from .agent.runners import Agents, warm_up
from .http.session_worker import StoreWorker
from .memory.store import MemoryStore
from .memory.tool import memory_tool_spec
from .ops.reaper import ConnectionReaper
from .settings import Settings, is_postgres_url
from .storage.claims import SessionClaims
from .storage.session_access import SessionAccess, build_lease_store, build_session_service
from .tasks import TaskManager
from .tasks.live_tools import build_live_tools
from .tools.delegation import Delegations
from .tools.spec import spec_of, with_approvals


class Runtime:
    def __init__(self, settings: Settings, session_service: BaseSessionService | None = None):
        self.settings = settings
        service = session_service or build_session_service(settings)
        leases = build_lease_store(settings)
        self.sessions = SessionAccess(settings, service, SessionClaims(leases))
        # The same store from a process of its own, for the REST.
        self.store_worker = StoreWorker(settings)
        self._expiry: asyncio.Task[None] | None = None
        # Background tasks: their engine, and the live tools that drive it.
        self.tasks = TaskManager(settings, service, build_task_model(settings), leases=leases)
        # Long-term memory: the turns stored as they end (and the demo's
        # user_memory tool).
        self.memory: MemoryStore | None = None
        if settings.memory:
            self.memory = build_memory_store(settings)
        loaded = load_apps(settings.agents_dir, [settings.agent] if settings.agent else [])
        if loaded:
            requiring = settings.tools_requiring_approval or ()
            check_approval_names(requiring, [app.root_agent for app in loaded])
            sources = [user_source(settings, app, requiring) for app in loaded]
        else:
            sources = [self._demo(settings)]
        self.agents = Agents(
            settings, sources, service, memory=self.memory, plugins=load_plugins(settings.plugins)
        )
        self.sessions.app_names = self.store_worker.app_names = self.agents.names
        self.delegations = Delegations(
            timeout_s=settings.tool_timeout_s, grace_s=settings.tool_grace_s
        )
        self.reaper = ConnectionReaper()

    def _demo(self, settings: Settings) -> AppSource:
        """The demo agent: its tools, the background tasks' and memory's."""
        tools: list[Callable[..., Any]] = [*DEMO_TOOLS, *build_live_tools(self.tasks)]
        requiring = settings.tools_requiring_approval
        if requiring is None:
            requiring = DEMO_APPROVALS
        specs = with_approvals([spec_of(f) for f in tools], requiring)
        if self.memory is not None:
            injected = settings.max_memory_injection if settings.inject_memory_context else 0
            specs.append(memory_tool_spec(self.memory, max_injection=injected))
        return demo_source(settings, specs)

    async def start(self) -> None:
        warm_up()  # before any socket: not in a conversation's way
        self.agents.warm_up()
        await self.sessions.start()
        await self.tasks.start()
        self._expiry = asyncio.create_task(self.store_worker.expire_periodically())

    async def close(self) -> None:
        try:
            await self.tasks.close()  # first: its workers write to the session store
            await self.delegations.close()
            await self.sessions.close()
            if self._expiry is not None:
                self._expiry.cancel()
            await self.store_worker.close()
        finally:
            await self.agents.close()
            if self.memory is not None:
                await self.memory.close()
            close = getattr(self.sessions.service, "close", None)
            if close is not None:
                await close()


def build_memory_store(settings: Settings) -> MemoryStore:
    """The memory store the settings name: PostgreSQL with a PostgreSQL
    ``database_url``, else SQLite in the data directory."""
    if is_postgres_url(settings.database_url):
        from .memory.postgres import PostgresMemoryStore

        assert settings.database_url is not None
        return PostgresMemoryStore(settings.database_url, max_facts=settings.max_memories_per_owner)
    from .memory.sqlite import SqliteMemoryStore

    return SqliteMemoryStore(settings.memory_db_path, max_facts=settings.max_memories_per_owner)
