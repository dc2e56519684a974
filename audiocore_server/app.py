"""The Starlette application: ``create_app(settings)``.

| path | what |
|---|---|
| ``/`` | the demo page (``web/``) |
| ``GET /healthz`` | liveness and the number of live sockets |
| ``GET /metrics`` | Prometheus text: loop lag, sockets, drops, refusals (``telemetry.py``) |
| ``POST /tokens`` | a signed token for a browser, with the API key (``credentials.py``) |
| ``WS /ws`` | our live protocol (docs/protocol.md) |
| ``WS /live`` | the seed project's BIDI dialect of it |
| ``WS /run_live`` | ADK's live protocol (``live/run_live.py``) |
| ``POST /phone/incoming`` | a Twilio call's webhook: TwiML (``phone/``; with an auth token only) |
| ``WS /phone/stream`` | a Twilio call's media stream (``phone/``) |
| ``WS /phone/telnyx`` | a Telnyx call's media stream (with a Telnyx stream token only) |
| ``/apps/…``, ``/list-apps`` | ADK's session REST routes (``http/session_rest.py``) |
| ``POST /api/chat``, ``POST /stream`` | AI SDK's HTTP chat (``http/chat.py``) |

Who may talk to the server at all is ``audiocore_server/gate/guard.py`` (Host, Origin,
the caps on live sockets) and ``audiocore_server/gate/credentials.py`` (the API key and
tokens, on every surface); CORS answers allowed origins. The
page is served with a Content Security Policy that allows only what it
loads.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect

from .agent.runners import UnknownApp
from .gate import redaction, twilio_signature
from .gate.credential_guard import CredentialGuard, live_admission
from .gate.credentials import SCOPE_KEY, TOKEN_PARAM, Credentials, Refused, client_address
from .gate.guard import LOCAL_ORIGIN, ConnectionLimits, HttpGuard, origin_allowed
from .gate.quotas import build_quotas
from .http.chat import ChatEndpoint
from .http.memory_rest import memory_routes
from .http.session_rest import rest_routes
from .http.token_route import token_route
from .live.budget import AddressBudgets
from .live.connection import LiveConnection
from .live.conversation import LiveParts
from .live.dialects import SEED, UI_STREAM, Dialect
from .live.run_live import AdkDialect, parse_query
from .live.time_limit import live_time_limit
from .ops.telemetry import CONTENT_TYPE, Telemetry
from .phone.call_dialect import TELNYX, TWILIO, CallDialect, Carrier
from .phone.incoming import incoming_route
from .phone.stream import caller, read_start
from .runtime import Runtime
from .settings import MODEL_KEY_VARIABLES, Settings, redact_url
from .wire import chunks, protocol
from .wire.route_path import route_path

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> Starlette:
    """The composition root's app: the shared parts (``Runtime``) built here,
    started and closed by the lifespan; each route gets the parts it uses."""
    settings = settings or Settings.from_env()
    runtime = Runtime(settings)
    sessions, agents = runtime.sessions, runtime.agents
    connections: set[LiveConnection] = set()
    telemetry = Telemetry(
        connections=lambda: len(connections),
        live_runs=lambda: agents.live_runs,
        totals=runtime.reaper.totals,
    )
    live_parts = LiveParts(
        settings,
        sessions,
        agents,
        runtime.tasks,
        runtime.delegations,
        AddressBudgets(
            share=settings.max_connections_per_client,
            rate_scale=settings.client_rate_scale,
            on_drop=lambda kind: telemetry.dropped.labels(kind).inc(),
        ),
        telemetry.turns,
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
            telemetry.start()
            if quotas is not None:
                quotas.start()
            yield
        finally:
            if quotas is not None:
                await quotas.close()
            await telemetry.close()
            if settings.stats_path is not None:
                runtime.reaper.write_stats(settings.stats_path, per_process=settings.workers > 1)
            await runtime.close()

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

    async def metrics(request: Request) -> Response:
        return Response(telemetry.exposition(), media_type=CONTENT_TYPE)

    async def serve(websocket: WebSocket, dialect: Dialect) -> None:
        """Run an accepted socket's conversation, if there is room for it."""
        client = websocket.client.host if websocket.client else ""
        refused = limits.admit(client)
        if refused is not None:
            reason, refusal = refused
            telemetry.refused.labels(reason).inc()
            with contextlib.suppress(Exception):
                await websocket.send_text(chunks.encode(chunks.Error(refusal)))
                await websocket.close(protocol.CLOSE_TRY_AGAIN_LATER, refusal)
            return
        connection = LiveConnection(websocket, live_parts, dialect)
        connections.add(connection)
        try:
            with live_time_limit(websocket.scope, connection.stop):
                await connection.run()
        finally:
            connections.discard(connection)
            limits.release(client)
            runtime.reaper.record(connection.metrics, still_open=len(connections))

    def refused(websocket: WebSocket) -> str | None:
        if not origin_allowed(
            websocket.headers.get("origin"), websocket.headers.get("host"), settings
        ):
            telemetry.refused.labels("origin").inc()
            return "origin not allowed"
        return None

    async def live(websocket: WebSocket) -> None:
        reason = refused(websocket)
        if reason is not None:
            await websocket.close(protocol.CLOSE_POLICY_VIOLATION, reason)
            return
        await websocket.accept()
        await serve(websocket, SEED if route_path(websocket.scope) == "/live" else UI_STREAM)

    async def run_live(websocket: WebSocket) -> None:
        # Refused before the handshake, as ADK's server does (a browser sees 403).
        reason = refused(websocket)
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
        try:
            agents.select(query.app_name)
        except UnknownApp:  # as ADK's server closes: no event first
            await websocket.close(protocol.CLOSE_POLICY_VIOLATION, "App not found")
            return
        await serve(websocket, AdkDialect(query, agents.run_config_for(None)))

    async def twilio_stream(websocket: WebSocket) -> None:
        """A Twilio call's media stream: Twilio's signature before the
        handshake (403)."""
        assert settings.twilio_auth_token is not None
        if not twilio_signature.verified(
            websocket.scope, settings.twilio_auth_token, settings.phone_public_url
        ):
            await refuse_call(websocket, "twilio_signature", "Twilio signature missing or wrong")
            return
        await serve_call(websocket, TWILIO)

    async def telnyx_stream(websocket: WebSocket) -> None:
        """A Telnyx call's media stream: the stream token in its URL
        (``?token=``, as the operator's ``stream_url`` names it) before the
        handshake (403)."""
        assert settings.telnyx_stream_token is not None
        given = websocket.query_params.get(TOKEN_PARAM, "")
        if not hmac.compare_digest(
            given.encode(errors="replace"), settings.telnyx_stream_token.encode()
        ):
            await refuse_call(websocket, "telnyx_token", "Telnyx stream token missing or wrong")
            return
        await serve_call(websocket, TELNYX)

    async def refuse_call(websocket: WebSocket, reason: str, why: str) -> None:
        telemetry.refused.labels(reason).inc()
        log.warning("refused phone stream from %s: %s", client_address(websocket.scope), why)
        await websocket.close(protocol.CLOSE_POLICY_VIOLATION, why)

    async def serve_call(websocket: WebSocket, carrier: Carrier) -> None:
        """A call's stream: its credentials in its ``start`` (close 1008,
        1013), then the conversation."""
        await websocket.accept()
        echo = settings.phone_echo_cancellation
        try:
            start = await read_start(websocket, settings.hello_timeout_s, carrier.decode)
            call = caller(start, credentials)
            if call.principal is None:
                dialect = CallDialect(
                    carrier, start, call.user_id, call.app, None, echo_cancellation=echo
                )
                await serve(websocket, dialect)
                return
            assert credentials is not None
            async with live_admission(credentials, quotas, call.principal) as principal:
                websocket.scope[SCOPE_KEY] = principal
                dialect = CallDialect(
                    carrier, start, call.user_id, call.app, call.user_key, echo_cancellation=echo
                )
                await serve(websocket, dialect)
        except protocol.ProtocolError as exc:
            await _close_quietly(websocket, exc.close_code, exc.reason)
        except Refused as exc:
            telemetry.refused.labels(exc.reason).inc()
            log.warning(
                "refused phone stream from %s: %s (token %s)",
                client_address(websocket.scope),
                exc.text,
                exc.token_id or "-",
            )
            code = (
                protocol.CLOSE_TRY_AGAIN_LATER
                if exc.reason in ("over_limit", "over_quota")
                else protocol.CLOSE_POLICY_VIOLATION
            )
            await _close_quietly(websocket, code, exc.text)
        except WebSocketDisconnect:
            return

    credentials = Credentials(settings) if settings.api_key is not None else None
    redaction.install()
    redaction.protect(
        settings.api_key,
        *settings.token_secrets,
        urlsplit(settings.database_url).password if settings.database_url else None,
        *(os.environ.get(name) for name in MODEL_KEY_VARIABLES),
        settings.twilio_auth_token,
        settings.telnyx_stream_token,
    )
    quotas = build_quotas(settings)
    routes = [
        Route("/healthz", healthz),
        *([token_route(settings, credentials.signer)] if credentials is not None else []),
        Route("/metrics", metrics),
        WebSocketRoute("/ws", live),
        WebSocketRoute("/live", live),
        WebSocketRoute("/run_live", run_live),
        *(
            [
                incoming_route(settings, lambda reason: telemetry.refused.labels(reason).inc()),
                WebSocketRoute("/phone/stream", twilio_stream),
            ]
            if settings.twilio_auth_token is not None
            else []
        ),
        *(
            [WebSocketRoute("/phone/telnyx", telnyx_stream)]
            if settings.telnyx_stream_token is not None
            else []
        ),
        *rest_routes(
            settings,
            sessions,
            runtime.store_worker,
            {name: app.agent for name, app in agents.apps.items()},
        ),
        *(
            memory_routes(settings, runtime.memory, agents.names)
            if runtime.memory is not None
            else []
        ),
        *ChatEndpoint(settings, sessions, agents).routes(),
        Mount("/", StaticFiles(directory=settings.web_dir, html=True, check_dir=False)),
    ]
    cors = Middleware(
        CORSMiddleware,
        allow_origins=list(settings.allowed_origins),
        allow_origin_regex=LOCAL_ORIGIN if settings.allow_localhost else None,
        allow_methods=["*"],
        allow_headers=["*"],
        allow_credentials=True,
    )
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(
                HttpGuard,
                settings=settings,
                on_refused=lambda reason: telemetry.refused.labels(reason).inc(),
            ),
            cors,
            Middleware(
                CredentialGuard,
                settings=settings,
                credentials=credentials,
                quotas=quotas,
                on_refused=lambda reason: telemetry.refused.labels(reason).inc(),
            ),
        ],
    )
    # Read by tests and benchmarks: the parts, and the live connections.
    app.state.runtime = runtime
    app.state.connections = connections
    return app


async def _close_quietly(websocket: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):
        await websocket.close(code, reason[:120])
