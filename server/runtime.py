"""What the app shares between connections: the ADK runner and session store."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import gc
import logging
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
from google.adk.agents.run_config import RunConfig
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig

from .agent import build_agent, build_run_config
from .claims import SessionClaims
from .delegation import Delegations
from .demo_tools import DEMO_TOOLS
from .leases import LeaseStore, SessionLeases
from .metrics import ConnectionMetrics, MetricsTotals
from .protocol import TurnDetection
from .settings import Settings, is_postgres_url
from .tasks import TaskManager
from .tasks.live_tools import build_live_tools
from .tools import spec_of

USER_ID = "web"  # no accounts: possession of an unguessable session id is the capability
# The web user's sessions are capabilities: only ids of our own shape.
WEB_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{20,100}")
# Sessions that clients of ADK's API create and name themselves.
API_SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
API_USER_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
CHAT_USER_ID = "chat"  # the HTTP chat endpoint's sessions (server/http_chat.py)
# Users whose session ids are capabilities: not reachable through ADK's API.
RESERVED_USERS = frozenset({USER_ID, CHAT_USER_ID})
HISTORY_LIMIT = 50
_GC_EVERY_S = 10.0


def _find_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` among the symbols the process has loaded
    (None elsewhere: musl, macOS). No library search: that would run
    ``ldconfig`` at import."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_malloc_trim = _find_malloc_trim()

log = logging.getLogger(__name__)


def new_session_id() -> str:
    return secrets.token_urlsafe(24)  # 192 bits


def session_id_allowed(user_id: str, session_id: str) -> bool:
    """Whether ``session_id`` may name a session of ``user_id`` (matched whole)."""
    pattern = WEB_SESSION_ID if user_id == USER_ID else API_SESSION_ID
    return pattern.fullmatch(session_id) is not None


class SessionNotFound(Exception):
    """A client that names its sessions asked for one that does not exist."""


def build_session_service(settings: Settings) -> BaseSessionService:
    if settings.database_url:
        # Needs SQLAlchemy and the URL's async driver (google-adk[db]).
        from .history import database_session_service

        return database_session_service(settings.database_url, settings.live_history_events)
    from .sessions import SharedConnectionSqliteSessionService

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return SharedConnectionSqliteSessionService(
        str(settings.session_db_path), live_history_events=settings.live_history_events
    )


def build_lease_store(settings: Settings) -> LeaseStore:
    """Where the sessions' leases live: beside the sessions. On PostgreSQL
    that is the database every host shares; otherwise a file in the data
    directory, which the processes of one machine share."""
    if is_postgres_url(settings.database_url):
        from .pg_leases import PostgresLeases  # asyncpg: google-adk[db]

        assert settings.database_url is not None
        return PostgresLeases(settings.database_url)
    return SessionLeases(settings.data_dir / "leases.db")


@dataclasses.dataclass(frozen=True)
class OpenedSession:
    session: Session
    resumed: bool
    notice: str | None  # for the client: why a requested session was not resumed


class Runtime:
    """The ADK runner, its agent and tools, the session store, the live run
    configurations, the session claims, the sessions' delegated tool calls,
    and the totals of finished connections."""

    def __init__(self, settings: Settings, session_service: BaseSessionService | None = None):
        self.settings = settings
        self.session_service = session_service or build_session_service(settings)
        # Other processes may serve the same sessions (--workers, several
        # servers on one data directory, hosts on one PostgreSQL): see
        # claims.py and leases.py.
        leases = build_lease_store(settings)
        self.claims = SessionClaims(leases)
        # Background tasks: their engine, and the live tools that drive it.
        self.tasks = TaskManager(settings, self.session_service, leases=leases)
        tools: list[Callable[..., Any]] = [*DEMO_TOOLS, *build_live_tools(self.tasks)]
        self.tools = {spec.name: spec for spec in (spec_of(f) for f in tools)}
        self.agent = build_agent(settings, list(self.tools.values()))
        self.default_turn_detection: TurnDetection = "manual" if settings.push_to_talk else "server"
        self._run_configs = {
            mode: build_run_config(settings, mode) for mode in ("server", "manual")
        }
        self.model_name = settings.live_model_name
        self.runner = Runner(
            app_name=settings.app_name,
            agent=self.agent,
            session_service=self.session_service,
            auto_create_session=False,
        )
        # The HTTP chat endpoint's: the same agent and tools on a text model.
        self.chat_model_name = settings.chat_model_name
        self.chat_runner = Runner(
            app_name=settings.app_name,
            agent=build_agent(settings, list(self.tools.values()), chat=True),
            session_service=self.session_service,
            auto_create_session=False,
        )
        self.totals = MetricsTotals()
        # ADK live runs in progress (``/healthz`` liveRuns): one per serving
        # socket; a run left behind by a closed socket would show here.
        self.live_runs = 0
        self._expiry: asyncio.Task[None] | None = None
        self._closed_since_gc = 0
        self._gc_at = -_GC_EVERY_S
        self.delegations = Delegations(
            timeout_s=settings.tool_timeout_s, grace_s=settings.tool_grace_s
        )

    async def expire_unused_sessions(self, now: float | None = None) -> int:
        """Delete the page's sessions that were opened and never used (no
        event) and are older than ``unused_session_ttl_s``; returns how many.
        A session being served is left alone."""
        now = time.time() if now is None else now
        app = self.settings.app_name
        found = await self.session_service.list_sessions(app_name=app, user_id=USER_ID)
        expired = 0
        for listed in found.sessions:
            if listed.last_update_time > now - self.settings.unused_session_ttl_s:
                continue
            if self.claims.holds(listed.id):
                continue
            session = await self.session_service.get_session(
                app_name=app,
                user_id=USER_ID,
                session_id=listed.id,
                config=GetSessionConfig(num_recent_events=1),
            )
            if session is not None and not session.events:
                await self.session_service.delete_session(
                    app_name=app, user_id=USER_ID, session_id=listed.id
                )
                expired += 1
        if expired:
            log.info("deleted %d sessions opened and never used", expired)
        return expired

    async def _expire_periodically(self) -> None:
        while True:
            try:
                await self.expire_unused_sessions()
            except Exception:  # the store is down: health says so; try later
                log.warning("expiring unused sessions failed", exc_info=True)
            await asyncio.sleep(min(3600.0, self.settings.unused_session_ttl_s))

    async def start(self) -> None:
        # Open the session store now (the SQLite file and its schema): a
        # store that cannot open fails the start, not the first connection.
        await self.session_service.get_session(
            app_name=self.settings.app_name, user_id=USER_ID, session_id="health-probe"
        )
        await self.claims.start()
        await self.tasks.start()
        self._expiry = asyncio.create_task(self._expire_periodically())

    def run_config_for(self, turn_detection: TurnDetection | None) -> RunConfig:
        """The live run config of a connection that chose ``turn_detection``."""
        return self._run_configs[turn_detection or self.default_turn_detection]

    @contextlib.asynccontextmanager
    async def open_session(
        self,
        requested: str | None,
        on_taken: Callable[[], None],
        *,
        user_id: str = USER_ID,
        create_missing: bool = True,
        keep_id: bool = False,
    ) -> AsyncIterator[OpenedSession]:
        """The session to run, claimed for the body (see ``SessionClaims``).

        ``requested`` is resumed if it names a stored session of ``user_id``
        exactly. Otherwise, with ``create_missing``, a session is created:
        under the requested id with ``keep_id`` (clients that name their
        sessions, such as chats), else under a new id with a notice (an
        unknown or malformed id never falls back to another session).
        Without ``create_missing``: ``SessionNotFound``. Raises ``SessionBusy``.
        """
        notice = None
        if requested is not None:
            if session_id_allowed(user_id, requested):
                async with self.claims.claim(requested, on_taken):
                    session = await self.session_service.get_session(
                        app_name=self.settings.app_name, user_id=user_id, session_id=requested
                    )
                    # Exactly the id asked for: a store that normalises ids
                    # must not hand over a session under another name.
                    if session is not None and session.id == requested:
                        yield OpenedSession(session, resumed=True, notice=None)
                        return
                    if session is None and create_missing and keep_id:
                        session = await self.session_service.create_session(
                            app_name=self.settings.app_name, user_id=user_id, session_id=requested
                        )
                        yield OpenedSession(session, resumed=False, notice=None)
                        return
            if not create_missing:
                raise SessionNotFound(requested)
            notice = "unknown sessionId; started a new session"
        session = await self.session_service.create_session(
            app_name=self.settings.app_name, user_id=user_id, session_id=new_session_id()
        )
        async with self.claims.claim(session.id, on_taken):
            yield OpenedSession(session, resumed=False, notice=notice)

    async def database_problem(self, timeout_s: float = 2.0) -> str | None:
        """Why the session database is unusable now, or None: the file
        deleted or not writable, or a query failing or hanging."""
        if not self.settings.database_url:
            path = self.settings.session_db_path
            if not path.exists():
                return f"the session file {path} is gone"
            if not os.access(path, os.R_OK | os.W_OK) or not os.access(path.parent, os.W_OK):
                return f"the session file {path} is not writable"
        try:
            with anyio.fail_after(timeout_s):
                await self.session_service.get_session(
                    app_name=self.settings.app_name, user_id=USER_ID, session_id="health-probe"
                )
        except TimeoutError:
            return f"the session database did not answer within {timeout_s:g} s"
        except Exception as exc:
            log.warning("session database check failed", exc_info=True)
            return f"the session database failed: {type(exc).__name__}"
        return None

    def record(self, metrics: ConnectionMetrics, *, still_open: int) -> None:
        """Fold a finished connection's metrics into the app's totals, and
        collect its garbage when it is cheap to.

        A connection leaves reference cycles (ADK's invocation context, its
        tasks and queues, tracebacks) that only a full collection frees; the
        tuned collector (``python -m server``) seldom runs one, so RSS grew
        by hundreds of MB over a load and stayed. A full collection stalls
        every stream for tens of ms: it runs when the last connection has
        closed, and under load at most every ``_GC_EVERY_S``.

        When the last one has closed, the C heap's free pages are handed back
        to the system too (glibc's ``malloc_trim``): glibc keeps them, in
        every thread's arena, and RSS would stay near the load's peak."""
        self.totals.add(metrics)
        self._closed_since_gc += 1
        now = time.monotonic()
        if (still_open == 0 or self._closed_since_gc >= 100) and now - self._gc_at >= _GC_EVERY_S:
            freed = gc.collect()
            self._gc_at, self._closed_since_gc = now, 0
            log.debug("collected %d objects of closed connections", freed)
            if still_open == 0 and _malloc_trim is not None:
                _malloc_trim(0)

    def write_stats(self, path: Path) -> None:
        self.totals.write(path, per_process=self.settings.workers > 1)

    async def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            await asyncio.gather(self._expiry, return_exceptions=True)
        try:
            await self.tasks.close()  # first: its workers write to the session store
            await self.delegations.close()
            await self.claims.close()
        finally:
            await self.runner.close()
            await self.chat_runner.close()
            close = getattr(self.session_service, "close", None)
            if close is not None:
                await close()


def session_history(session: Session) -> list[dict[str, str]]:
    """The conversation so far as {role, text}: typed and transcribed turns."""
    history: list[dict[str, str]] = []
    for event in session.events:
        if event.partial:
            continue
        if event.input_transcription and event.input_transcription.text:
            history.append({"role": "user", "text": event.input_transcription.text})
        elif event.output_transcription and event.output_transcription.text:
            history.append({"role": "assistant", "text": event.output_transcription.text})
        elif event.content and event.content.parts:
            text = "".join(p.text or "" for p in event.content.parts if not p.thought)
            if text:
                role = "user" if event.author == "user" else "assistant"
                history.append({"role": role, "text": text})
    return history[-HISTORY_LIMIT:]
