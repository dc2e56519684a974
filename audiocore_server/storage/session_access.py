"""The sessions every surface opens: the store, the claims, and their care.

``SessionAccess`` wraps ADK's session service with what the server adds:
``open_session`` (the claimed session to run; see ``SessionClaims``),
the expiry of the page's sessions opened and never used, and the health
check of the database. The lease store follows the session store: with a
PostgreSQL ``--database-url`` the leases live in the same database,
otherwise in a file in the data directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
import os
import time
from collections.abc import AsyncIterator, Callable

import anyio
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig

from ..settings import Settings, is_postgres_url
from .claims import SessionClaims
from .leases import LeaseStore, SessionLeases
from .users import USER_ID, new_session_id, session_id_allowed

log = logging.getLogger(__name__)

HISTORY_LIMIT = 50
_PROBE_SESSION = "health-probe"


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
        from .pg_leases import PostgresLeases

        assert settings.database_url is not None
        return PostgresLeases(settings.database_url)
    return SessionLeases(settings.data_dir / "leases.db")


class SessionNotFound(Exception):
    """A client that names its sessions asked for one that does not exist."""


@dataclasses.dataclass(frozen=True)
class OpenedSession:
    session: Session
    resumed: bool
    notice: str | None  # for the client: why a requested session was not resumed


class SessionAccess:
    def __init__(self, settings: Settings, service: BaseSessionService, claims: SessionClaims):
        self.settings = settings
        self.app_name = settings.app_name
        self.app_names = [settings.app_name]  # the apps served (runtime.py sets them)
        self.service = service
        # Other processes may serve the same sessions (--workers, several
        # servers on one data directory, hosts on one PostgreSQL): see
        # claims.py and leases.py.
        self.claims = claims
        self._expiry: asyncio.Task[None] | None = None

    def for_app(self, app_name: str) -> SessionAccess:
        """The same store and claims, for the sessions of ``app_name``."""
        if app_name == self.app_name:
            return self
        view = copy.copy(self)
        view.app_name = app_name
        return view

    async def start(self) -> None:
        # Open the session store now (the SQLite file and its schema): a
        # store that cannot open fails the start, not the first connection.
        await self._probe()
        await self.claims.start()
        self._expiry = asyncio.create_task(self._expire_periodically())

    async def close(self) -> None:
        """Stop the expiry and the claims; the store is closed by its owner."""
        if self._expiry is not None:
            self._expiry.cancel()
            await asyncio.gather(self._expiry, return_exceptions=True)
        await self.claims.close()

    async def get(self, user_id: str, session_id: str) -> Session | None:
        return await self.service.get_session(
            app_name=self.app_name, user_id=user_id, session_id=session_id
        )

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
                    session = await self.get(user_id, requested)
                    # Exactly the id asked for: a store that normalises ids
                    # must not hand over a session under another name.
                    if session is not None and session.id == requested:
                        yield OpenedSession(session, resumed=True, notice=None)
                        return
                    if session is None and create_missing and keep_id:
                        session = await self.service.create_session(
                            app_name=self.app_name, user_id=user_id, session_id=requested
                        )
                        yield OpenedSession(session, resumed=False, notice=None)
                        return
            if not create_missing:
                raise SessionNotFound(requested)
            notice = "unknown sessionId; started a new session"
        session = await self.service.create_session(
            app_name=self.app_name, user_id=user_id, session_id=new_session_id()
        )
        async with self.claims.claim(session.id, on_taken):
            yield OpenedSession(session, resumed=False, notice=notice)

    async def expire_unused(self, now: float | None = None) -> int:
        """Delete the page's sessions that were opened and never used (no
        event) and are older than ``unused_session_ttl_s``; returns how many.
        A session being served is left alone."""
        now = time.time() if now is None else now
        found = await self.service.list_sessions(app_name=self.app_name, user_id=USER_ID)
        expired = 0
        for listed in found.sessions:
            if listed.last_update_time > now - self.settings.unused_session_ttl_s:
                continue
            if self.claims.holds(listed.id):
                continue
            session = await self.service.get_session(
                app_name=self.app_name,
                user_id=USER_ID,
                session_id=listed.id,
                config=GetSessionConfig(num_recent_events=1),
            )
            if session is not None and not session.events:
                await self.service.delete_session(
                    app_name=self.app_name, user_id=USER_ID, session_id=listed.id
                )
                expired += 1
        if expired:
            log.info("deleted %d sessions opened and never used", expired)
        return expired

    async def _expire_periodically(self) -> None:
        while True:
            try:
                for name in self.app_names:
                    await self.for_app(name).expire_unused()
            except Exception:  # the store is down: health says so; try later
                log.warning("expiring unused sessions failed", exc_info=True)
            await asyncio.sleep(min(3600.0, self.settings.unused_session_ttl_s))

    async def _probe(self) -> None:
        await self.get(USER_ID, _PROBE_SESSION)

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
                await self._probe()
        except TimeoutError:
            return f"the session database did not answer within {timeout_s:g} s"
        except Exception as exc:
            log.warning("session database check failed", exc_info=True)
            return f"the session database failed: {type(exc).__name__}"
        return None


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
