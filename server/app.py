"""The Starlette application: ``create_app(settings)``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from . import protocol
from .connection import LiveConnection
from .dialects import SEED, UI_STREAM
from .runtime import Runtime
from .settings import Settings

log = logging.getLogger(__name__)

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


def origin_allowed(origin: str | None, host: str | None, settings: Settings) -> bool:
    """Same origin, localhost (unless disabled), or an exact allowlist entry.

    No Origin header means no browser, and the check exists only to stop
    other sites' pages from opening sockets with the user's browser.
    """
    if origin is None:
        return True
    if "*" in settings.allowed_origins or origin in settings.allowed_origins:
        return True
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    if settings.allow_localhost and parts.hostname in _LOCAL_HOSTS:
        return True
    return host is not None and parts.netloc.lower() == host.lower()


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings.from_env()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        runtime = Runtime(settings)
        app.state.runtime = runtime
        log.info(
            "audiocore server: model %s, sessions %s",
            runtime.model_name,
            settings.database_url or settings.session_db_path,
        )
        try:
            await runtime.start()
            yield
        finally:
            if settings.stats_path is not None:
                runtime.write_stats(settings.stats_path)
            await runtime.close()

    connections: set[LiveConnection] = set()

    async def healthz(request: Request) -> JSONResponse:
        runtime: Runtime = request.app.state.runtime
        return JSONResponse(
            {"status": "ok", "model": runtime.model_name, "connections": len(connections)}
        )

    async def live(websocket: WebSocket) -> None:
        if not origin_allowed(
            websocket.headers.get("origin"), websocket.headers.get("host"), settings
        ):
            await websocket.close(protocol.CLOSE_POLICY_VIOLATION, "origin not allowed")
            return
        await websocket.accept()
        dialect = SEED if websocket.scope["path"].endswith("/live") else UI_STREAM
        connection = LiveConnection(websocket, websocket.app.state.runtime, dialect)
        connections.add(connection)
        try:
            await connection.run()
        finally:
            connections.discard(connection)

    routes = [
        Route("/healthz", healthz),
        WebSocketRoute("/ws", live),
        WebSocketRoute("/live", live),
        Mount("/", StaticFiles(directory=settings.web_dir, html=True, check_dir=False)),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.connections = connections  # read by tests: the live connections
    return app
