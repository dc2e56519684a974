"""What the app shares between connections: the ADK runner and session store."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import re
import secrets
from pathlib import Path
from typing import Any

from google.adk.agents.run_config import RunConfig
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, Session

from .agent import build_agent, build_run_config
from .leases import SessionLeases
from .protocol import TurnDetection
from .settings import Settings

USER_ID = "web"  # no accounts: possession of an unguessable session id is the capability
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{20,100}$")
HISTORY_LIMIT = 50
# How long a connection waits for another process to give up a session:
# the owner's heartbeat expiry, plus a hand-over that is slow but alive.
LEASE_WAIT_S = 10.0

log = logging.getLogger(__name__)


@dataclasses.dataclass
class ConnectionTotals:
    connections: int = 0
    frames_sent: int = 0
    late_frames: int = 0
    concealed_frames: int = 0
    dropped_input_chunks: int = 0
    bargein_last_frame_s: list[float] = dataclasses.field(default_factory=list)
    latency_in: list[float] = dataclasses.field(default_factory=list)
    latency_out: list[float] = dataclasses.field(default_factory=list)


def new_session_id() -> str:
    return secrets.token_urlsafe(24)  # 192 bits


def build_session_service(settings: Settings) -> BaseSessionService:
    if settings.database_url:
        # Needs SQLAlchemy and the URL's async driver (google-adk[db]).
        from google.adk.sessions import DatabaseSessionService

        return DatabaseSessionService(db_url=settings.database_url)
    from .sessions import SharedConnectionSqliteSessionService

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return SharedConnectionSqliteSessionService(str(settings.session_db_path))


class Runtime:
    def __init__(self, settings: Settings, session_service: BaseSessionService | None = None):
        self.settings = settings
        self.session_service = session_service or build_session_service(settings)
        self.agent = build_agent(settings)
        self.default_turn_detection: TurnDetection = "manual" if settings.push_to_talk else "server"
        self._run_configs = {
            mode: build_run_config(settings, mode) for mode in ("server", "manual")
        }
        self.run_config = self._run_configs[self.default_turn_detection]
        self.model_name = settings.live_model_name
        self.runner = Runner(
            app_name=settings.app_name,
            agent=self.agent,
            session_service=self.session_service,
            auto_create_session=False,
        )
        self.connections: set[Any] = set()
        self.live: dict[str, Any] = {}  # session id -> the connection running it
        self.totals = ConnectionTotals()
        # Other processes on this machine may serve the same sessions
        # (--workers, or several servers on one data directory): see
        # leases.py. Servers on other machines sharing a database URL are not
        # coordinated by it.
        self.leases = SessionLeases(settings.data_dir / "leases.db")
        self._heartbeat: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.leases.heartbeat()  # our leases count only once we have beaten
        self._heartbeat = asyncio.create_task(self._keep_leases())

    async def _keep_leases(self) -> None:
        while True:
            await asyncio.sleep(self.leases.heartbeat_s)
            try:
                wanted = await self.leases.heartbeat()
            except Exception:  # e.g. the file locked past busy_timeout: retry
                log.exception("session lease heartbeat failed")
                continue
            for session_id in wanted:
                connection = self.live.get(session_id)
                if connection is not None:
                    connection.yield_session()

    def run_config_for(self, turn_detection: TurnDetection | None) -> RunConfig:
        """The live run config of a connection that chose ``turn_detection``."""
        return self._run_configs[turn_detection or self.default_turn_detection]

    async def open_session(self, session_id: str | None) -> tuple[Session, bool, str | None]:
        """(session, resumed, notice). An unknown id never falls back to another session."""
        notice = None
        if session_id is not None:
            session = None
            if _SESSION_ID.match(session_id):
                session = await self.session_service.get_session(
                    app_name=self.settings.app_name, user_id=USER_ID, session_id=session_id
                )
            if session is not None:
                return session, True, None
            notice = "unknown sessionId; started a new session"
        session = await self.session_service.create_session(
            app_name=self.settings.app_name, user_id=USER_ID, session_id=new_session_id()
        )
        return session, False, notice

    def record(self, connection: Any) -> None:
        """Fold a finished connection's counters into the app's totals."""
        totals = self.totals
        totals.connections += 1
        if connection.pacer is not None:
            totals.late_frames += connection.pacer.stats.late_frames
            totals.frames_sent += connection.pacer.stats.frames
            totals.concealed_frames += connection.pacer.stats.concealed_frames
        totals.dropped_input_chunks += connection.queue.dropped_chunks
        totals.bargein_last_frame_s += connection.bargein_last_frame_s
        if connection.latency_in is not None:
            totals.latency_in += connection.latency_in
            totals.latency_out += connection.latency_out

    def write_stats(self, path: Path) -> None:
        if self.settings.workers > 1:  # one file per worker process
            path = path.with_name(f"{path.name}.{os.getpid()}")
        path.write_text(json.dumps(dataclasses.asdict(self.totals)))

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
        try:
            await self.leases.close()
        finally:
            await self.runner.close()
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
