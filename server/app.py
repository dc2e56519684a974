"""The Starlette application: ``create_app(settings)``.

| path | what |
|---|---|
| ``/`` | the demo page (``web/``) |
| ``GET /healthz`` | liveness and the number of live sockets |
| ``WS /ws`` | our live protocol (docs/protocol.md) |
| ``WS /live`` | the seed project's BIDI dialect of it |
| ``WS /run_live`` | ADK's live protocol (``server/adk_live.py``) |
| ``/apps/…``, ``/list-apps`` | ADK's session REST routes (``server/rest.py``) |
| ``POST /api/chat``, ``POST /stream`` | AI SDK's HTTP chat (``server/http_chat.py``) |

Every request and socket must name an allowed host (localhost, the bind
address, ``--allowed-hosts``: a page whose name was rebound to this machine
does not), and, with an ``Origin``, come from an allowed origin (same
origin, localhost, or ``--allowed-origins``); CORS answers those. With an
API key set, the HTTP API and ``/run_live`` require it. Live sockets are
capped in all and per client address. The page is served with a Content
Security Policy that allows only what it loads.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from . import chunks, protocol
from .adk_live import AdkDialect, parse_query
from .budget import AddressBudgets
from .connection import LiveConnection
from .conversation import LiveParts
from .dialects import SEED, UI_STREAM, Dialect
from .http_chat import ChatEndpoint
from .rest import rest_routes
from .runtime import Runtime
from .settings import Settings, redact_url

log = logging.getLogger(__name__)

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
_LOCAL_ORIGIN = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?"
# Paths of the HTTP API: an API key, when set, guards these.
_API_PREFIXES = ("/apps/", "/list-apps", "/api/", "/stream")


def origin_allowed(origin: str | None, host: str | None, settings: Settings) -> bool:
    """Same origin, localhost (unless disabled), or an exact allowlist entry.

    No Origin header means no browser, and the check exists only to stop
    other sites' pages from using the user's browser against the server.
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


def host_allowed(host: str | None, settings: Settings) -> bool:
    """The Host header names this server: a guard against DNS rebinding,
    where a foreign page's own name points at 127.0.0.1 and Origin and Host
    agree."""
    if "*" in settings.allowed_hosts:
        return True
    if not host:
        return False
    name = urlsplit(f"//{host}").hostname
    if name is None:
        return False
    allowed = {*_LOCAL_HOSTS, *(h.lower() for h in settings.allowed_hosts)}
    if settings.host not in ("0.0.0.0", "::", ""):
        allowed.add(settings.host.lower().strip("[]"))
    allowed.update(
        urlsplit(origin).hostname or "" for origin in settings.allowed_origins if origin != "*"
    )
    return name in allowed


def api_key_ok(headers: Headers, settings: Settings) -> bool:
    """No key configured, or the request carries it (X-API-Key or Bearer)."""
    if settings.api_key is None:
        return True
    given = headers.get("x-api-key")
    if given is None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        given = token if scheme.lower() == "bearer" else None
    return given is not None and hmac.compare_digest(given.encode(), settings.api_key.encode())


# The page loads only its own scripts, worklets, styles and images; nobody
# may frame it. It talks to its own server, or to the live socket given in
# its ?server= parameter: WebSockets to any host are allowed, nothing else.
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "media-src 'self' blob:; connect-src 'self' ws: wss:; worker-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


class HttpGuard:
    """Before anything else sees a request or a socket: a foreign Host is
    refused (400; a socket, 403), a foreign Origin too (403), and, on the
    API, a missing key (401). Responses get the security headers."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self._headers = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if not host_allowed(headers.get("host"), self.settings):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": protocol.CLOSE_POLICY_VIOLATION})
            else:
                await PlainTextResponse("Bad Request: host not allowed", 400)(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        response = None
        if not origin_allowed(headers.get("origin"), headers.get("host"), self.settings):
            response = PlainTextResponse("Forbidden: origin not allowed", status_code=403)
        elif (
            scope["path"].startswith(_API_PREFIXES)
            and scope["method"] != "OPTIONS"
            and not api_key_ok(headers, self.settings)
        ):
            response = PlainTextResponse("Unauthorized: API key required", status_code=401)
        if response is not None:
            await response(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *self._headers]
            await send(message)

        await self.app(scope, receive, send_with_headers)


class ConnectionLimits:
    """Live sockets in all and per client address."""

    def __init__(self, settings: Settings) -> None:
        self.total = settings.max_connections
        self.per_client = settings.max_connections_per_client
        self._by_client: dict[str, int] = {}
        self._count = 0

    def admit(self, client: str) -> str | None:
        """Take a place for ``client``; the refusal's reason if none is left."""
        if self._count >= self.total:
            return "the server is full; try again later"
        if self._by_client.get(client, 0) >= self.per_client:
            return "too many connections from this address; try again later"
        self._count += 1
        self._by_client[client] = self._by_client.get(client, 0) + 1
        return None

    def release(self, client: str) -> None:
        self._count -= 1
        left = self._by_client[client] - 1
        if left:
            self._by_client[client] = left
        else:
            del self._by_client[client]


def create_app(settings: Settings | None = None) -> Starlette:
    """The composition root's app: the shared parts (``Runtime``) built here,
    started and closed by the lifespan; each route gets the parts it uses."""
    settings = settings or Settings.from_env()
    runtime = Runtime(settings)
    sessions, agents = runtime.sessions, runtime.agents
    live_parts = LiveParts(
        settings,
        sessions,
        agents,
        runtime.tasks,
        runtime.delegations,
        AddressBudgets(rate_scale=settings.client_rate_scale),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        log.info(
            "audiocore server: model %s, sessions %s",
            settings.live_model_name,
            redact_url(settings.database_url)
            if settings.database_url
            else settings.session_db_path,
        )
        try:
            await runtime.start()
            yield
        finally:
            if settings.stats_path is not None:
                runtime.reaper.write_stats(settings.stats_path, per_process=settings.workers > 1)
            await runtime.close()

    connections: set[LiveConnection] = set()

    async def healthz(request: Request) -> JSONResponse:
        """Liveness, and whether the session database is usable (503 if not)."""
        problem = await sessions.database_problem()
        body: dict[str, object] = {
            "status": "ok" if problem is None else "unavailable",
            "model": agents.live_model_name,
            "connections": len(connections),
            "liveRuns": agents.live_runs,
        }
        if problem is not None:
            body["database"] = problem
        return JSONResponse(body, status_code=200 if problem is None else 503)

    limits = ConnectionLimits(settings)

    async def serve(websocket: WebSocket, dialect: Dialect) -> None:
        """Run an accepted socket's conversation, if there is room for it."""
        client = websocket.client.host if websocket.client else ""
        refusal = limits.admit(client)
        if refusal is not None:
            with contextlib.suppress(Exception):
                await websocket.send_text(chunks.encode(chunks.Error(refusal)))
                await websocket.close(protocol.CLOSE_TRY_AGAIN_LATER, refusal)
            return
        connection = LiveConnection(websocket, live_parts, dialect)
        connections.add(connection)
        try:
            await connection.run()
        finally:
            connections.discard(connection)
            limits.release(client)
            runtime.reaper.record(connection.metrics, still_open=len(connections))

    def refused(websocket: WebSocket) -> str | None:
        if not origin_allowed(
            websocket.headers.get("origin"), websocket.headers.get("host"), settings
        ):
            return "origin not allowed"
        return None

    async def live(websocket: WebSocket) -> None:
        reason = refused(websocket)
        if reason is not None:
            await websocket.close(protocol.CLOSE_POLICY_VIOLATION, reason)
            return
        await websocket.accept()
        await serve(websocket, SEED if websocket.scope["path"] == "/live" else UI_STREAM)

    async def run_live(websocket: WebSocket) -> None:
        # Refused before the handshake, as ADK's server does (a browser sees 403).
        reason = refused(websocket)
        if reason is None and not api_key_ok(websocket.headers, settings):
            reason = "API key required"
        if reason is None:
            params = websocket.query_params
            try:
                query = parse_query({k: params.getlist(k) for k in params}, settings)
            except ValueError as exc:
                reason = str(exc)
        if reason is not None:
            await websocket.close(protocol.CLOSE_POLICY_VIOLATION, reason[:120])
            return
        await websocket.accept()
        if query.app_name != settings.app_name:
            await websocket.close(protocol.CLOSE_POLICY_VIOLATION, "App not found")
            return
        await serve(websocket, AdkDialect(query, agents.run_config_for(None)))

    routes = [
        Route("/healthz", healthz),
        WebSocketRoute("/ws", live),
        WebSocketRoute("/live", live),
        WebSocketRoute("/run_live", run_live),
        *rest_routes(settings, sessions, agents.agent),
        *ChatEndpoint(settings, sessions, agents).routes(),
        Mount("/", StaticFiles(directory=settings.web_dir, html=True, check_dir=False)),
    ]
    cors = Middleware(
        CORSMiddleware,
        allow_origins=list(settings.allowed_origins),
        allow_origin_regex=_LOCAL_ORIGIN if settings.allow_localhost else None,
        allow_methods=["*"],
        allow_headers=["*"],
        allow_credentials=True,
    )
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(HttpGuard, settings=settings), cors],
    )
    # Read by tests and benchmarks: the parts, and the live connections.
    app.state.runtime = runtime
    app.state.connections = connections
    return app
