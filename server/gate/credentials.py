"""One rule for every surface: with an API key configured, every request
and socket carries credentials, except ``GET /healthz``, the demo page's
files and CORS preflights.

Credentials are the key (``X-API-Key``, or ``Authorization: Bearer``) or a
token that the key minted (``server/gate/tokens.py``): ``Authorization: Bearer``
on HTTP; on a WebSocket also ``?token=`` or a ``Sec-WebSocket-Protocol``
entry ``audiocore.token.<token>`` (what a browser can send). ``POST
/tokens`` and ``/metrics`` take the key only.

``CredentialGuard`` checks them once, before the routes: the verified
``Principal`` goes into the ASGI scope, where the surfaces read it
(``principal_of``). A token binds its owner: REST paths and ``/run_live``
must name it as their user (here), ``/ws`` and ``/live`` clients' ``userKey``
must be it or absent (``bind_user_key``, at the opening). A token's
``maxSessions`` caps its owner's live sockets in this process, its
``liveMinutes`` how long each may last (``live_time_limit``).

Every refusal is counted by its reason and logged as one line with the
surface, the client's address and the token's id if known — never the key
or the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import logging
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
from starlette.datastructures import Headers, QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..live.shutdown import Shutdown
from ..settings import Settings
from ..storage.users import RESERVED_USERS
from ..wire import protocol
from ..wire.http_body import HttpError, read_json_body
from .quotas import OwnerQuotas, QuotaExceeded
from .tokens import DEFAULT_TTL_S, TokenClaims, TokenLimits, TokenRefused, TokenSigner, secrets_from

log = logging.getLogger(__name__)

SCOPE_KEY = "audiocore.principal"
SUBPROTOCOL_PREFIX = "audiocore.token."
# Offered beside the token entry, it is the one the server accepts (so the
# token is not echoed in the response).
SUBPROTOCOL = "audiocore"
_LIVE_SURFACES = frozenset({"ws", "live", "run_live"})
_KEY_ONLY = frozenset({"tokens", "metrics"})


@dataclasses.dataclass(frozen=True)
class Principal:
    """Who a request or socket speaks for. The API key: anyone (``owner``
    None); a token: its owner, within its limits."""

    owner: str | None = None
    token: TokenClaims | None = None
    quota_seconds: float | None = None  # what the owner's daily quota leaves (quotas.py)

    @property
    def token_id(self) -> str | None:
        return self.token.token_id if self.token is not None else None

    @property
    def live_seconds(self) -> float | None:
        """How long one live socket may last (None: no limit)."""
        minutes = self.token.limits.live_minutes if self.token is not None else None
        token_s = minutes * 60 if minutes is not None else None
        limits = [s for s in (token_s, self.quota_seconds) if s is not None]
        return min(limits) if limits else None


KEY_HOLDER = Principal()


def principal_of(scope: Scope) -> Principal | None:
    """The verified principal (None: the server requires no credentials)."""
    principal: Principal | None = scope.get(SCOPE_KEY)
    return principal


@contextlib.contextmanager
def live_time_limit(scope: Scope, stop: Callable[[Shutdown], None]) -> Iterator[None]:
    """While a live socket runs: stopped (1008) once its token's
    ``liveMinutes`` are over."""
    principal = principal_of(scope)
    seconds = principal.live_seconds if principal is not None else None
    if seconds is None:
        yield
        return
    over = Shutdown(
        protocol.CLOSE_POLICY_VIOLATION,
        "live time limit reached",
        error="this token's live time is over; connect again with a new one",
    )
    timer = asyncio.get_running_loop().call_later(seconds, stop, over)
    try:
        yield
    finally:
        timer.cancel()


_TOKEN_IN_URL = re.compile(r"([?&]token=)[^&\s\"]+")


class RedactTokens(logging.Filter):
    """uvicorn logs every socket's path with its query: a ``?token=`` there
    is logged as ``token=***``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN_IN_URL.sub(r"\1***", arg) if isinstance(arg, str) else arg
                for arg in record.args
            )
        return True


def redact_tokens_in_server_logs() -> None:
    """Add ``RedactTokens`` to uvicorn's loggers, once."""
    for name in ("uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokens) for f in logger.filters):
            logger.addFilter(RedactTokens())


class Refused(Exception):
    """A request or socket refused: ``reason`` counted, ``text`` told."""

    def __init__(self, reason: str, text: str, token_id: str | None = None) -> None:
        super().__init__(text)
        self.reason = reason
        self.text = text
        self.token_id = token_id


def bind_user_key(scope: Scope, user_key: str | None) -> str | None:
    """A live client's ``userKey`` under its credentials: a token's owner
    must be it, or stands for it when absent. ``ProtocolError`` (1008)
    for another user's key."""
    principal = principal_of(scope)
    if principal is None or principal.owner is None:
        return user_key
    if user_key is not None and user_key != principal.owner:
        log.warning(
            "refused %s from %s: userKey is not the token's owner (token %s)",
            scope.get("path", "?"),
            _client(scope),
            principal.token_id,
        )
        raise protocol.ProtocolError(
            protocol.CLOSE_POLICY_VIOLATION, "userKey: not the token's owner"
        )
    return principal.owner


def surface_of(scope: Scope, web_dir: Path) -> str | None:
    """Which surface a request or socket is, for credentials and a token's
    ``surfaces``; None for what stays open."""
    path: str = scope["path"]
    if scope["type"] == "websocket":
        return {"/ws": "ws", "/live": "live", "/run_live": "run_live"}.get(path, "api")
    if scope["method"] == "OPTIONS" or path == "/healthz":
        return None
    if path.startswith("/apps/") or path == "/list-apps":
        return "rest"
    if path in ("/api/chat", "/stream") or path.startswith("/api/chat/"):
        return "chat"
    if path in ("/metrics", "/tokens"):
        return path[1:]
    if "tasks" in path.split("/"):
        return "tasks"
    if scope["method"] in ("GET", "HEAD") and _page_file(path, web_dir):
        return None
    return "api"


def _page_file(path: str, web_dir: Path) -> bool:
    """Whether ``path`` names one of the demo page's files."""
    if path == "/":
        return True
    root = web_dir.resolve()
    try:
        target = (root / path.lstrip("/")).resolve()
    except (OSError, ValueError):
        return False
    return target.is_relative_to(root) and target.is_file()


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return client[0] if client else "?"


class Credentials:
    """The key and the token signer of one app, and the live sockets each
    token owner holds in this process."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        if settings.api_key is None:
            raise ValueError("credentials: expected an API key, got none")
        self._key = settings.api_key.encode()
        self.signer = TokenSigner(secrets_from(settings.token_secrets, settings.api_key), clock)
        self._live: dict[str, int] = {}

    def check(self, scope: Scope, surface: str) -> Principal:
        """The principal of a request or socket on ``surface``; ``Refused``."""
        headers = Headers(scope=scope)
        key = headers.get("x-api-key")
        scheme, _, bearer = headers.get("authorization", "").partition(" ")
        token = bearer.strip() if scheme.lower() == "bearer" else None
        if scope["type"] == "websocket" and key is None and token is None:
            token = _socket_token(scope, headers)
        if key is None and token is not None and ("." not in token or self._is_key(token)):
            key, token = token, None  # a Bearer that is no token: the key
        if key is not None:
            if not self._is_key(key):
                raise Refused("bad_key", "wrong API key")
            return KEY_HOLDER
        if token is None:
            raise Refused("no_credentials", "credentials required: API key or token")
        if surface in _KEY_ONLY:
            raise Refused("key_only", f"{surface}: the API key is required, not a token")
        try:
            claims = self.signer.verify(token)
        except TokenRefused as exc:
            raise Refused(f"token_{exc.reason}", str(exc), exc.token_id) from None
        allowed = claims.limits.surfaces
        if allowed is not None and surface not in allowed:
            raise Refused("token_surface", f"token not valid for {surface}", claims.token_id)
        if any(user != claims.owner for user in _users_named(scope, surface)):
            raise Refused("wrong_owner", "user is not the token's owner", claims.token_id)
        return Principal(claims.owner, claims)

    def _is_key(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(errors="replace"), self._key)

    def admit(self, principal: Principal) -> bool:
        """Take a live socket for a token's owner, if under its ``maxSessions``."""
        claims = principal.token
        if claims is None:
            return True
        held = self._live.get(claims.owner, 0)
        cap = claims.limits.max_sessions
        if cap is not None and held >= cap:
            return False
        self._live[claims.owner] = held + 1
        return True

    def release(self, principal: Principal) -> None:
        claims = principal.token
        if claims is None:
            return
        left = self._live[claims.owner] - 1
        if left:
            self._live[claims.owner] = left
        else:
            del self._live[claims.owner]


def _socket_token(scope: Scope, headers: Headers) -> str | None:
    for entry in _offered(headers):
        if entry.startswith(SUBPROTOCOL_PREFIX):
            return entry[len(SUBPROTOCOL_PREFIX) :]
    return QueryParams(scope.get("query_string", b"")).get("token")


def _offered(headers: Headers) -> list[str]:
    return [
        entry.strip()
        for value in headers.getlist("sec-websocket-protocol")
        for entry in value.split(",")
    ]


def _users_named(scope: Scope, surface: str) -> list[str]:
    """The users a REST path or a ``/run_live`` query names (several
    ``user_id`` are refused by the route itself; none may be another's)."""
    if surface == "rest":
        parts = scope["path"].split("/")  # "", "apps", app, "users", user, …
        return [parts[4]] if len(parts) > 4 and parts[3] == "users" else []
    if surface == "run_live":
        return QueryParams(scope.get("query_string", b"")).getlist("user_id")
    return []


class CredentialGuard:
    """Refuses what lacks credentials (401; a socket, close 1008 before
    accept, 1013 past a token's ``maxSessions``) and puts the principal in
    the scope. Inactive without an API key."""

    def __init__(
        self,
        app: ASGIApp,
        settings: Settings,
        credentials: Credentials | None,
        quotas: OwnerQuotas | None = None,
        on_refused: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.app = app
        self.web_dir = settings.web_dir
        self.credentials = credentials
        self.quotas = quotas
        self._refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        credentials = self.credentials
        if credentials is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        surface = surface_of(scope, self.web_dir)
        if surface is None:
            await self.app(scope, receive, send)
            return
        try:
            principal = credentials.check(scope, surface)
        except Refused as exc:
            await self._refuse(scope, receive, send, surface, exc)
            return
        scope[SCOPE_KEY] = principal
        if scope["type"] == "http":
            await self.app(scope, receive, send)
            return
        if surface not in _LIVE_SURFACES:
            await self.app(scope, receive, _accepting_offered(scope, send))
            return
        if not credentials.admit(principal):
            over = Refused(
                "over_limit", "too many live sessions for this token", principal.token_id
            )
            await self._refuse(scope, receive, send, surface, over)
            return
        ticket = None
        try:
            if self.quotas is not None and principal.owner is not None:
                try:
                    ticket = await self.quotas.admit(principal.owner)
                except QuotaExceeded as exc:
                    quota = Refused("over_quota", str(exc), principal.token_id)
                    await self._refuse(scope, receive, send, surface, quota)
                    return
                except Exception:  # the store is away: closed, not open
                    log.warning("quota store failed; socket refused", exc_info=True)
                    away = Refused("over_quota", "quotas unavailable", principal.token_id)
                    await self._refuse(scope, receive, send, surface, away)
                    return
                scope[SCOPE_KEY] = dataclasses.replace(principal, quota_seconds=ticket.seconds_left)
            await self.app(scope, receive, _accepting_offered(scope, send))
        finally:
            credentials.release(principal)
            if ticket is not None and self.quotas is not None:
                # Even when the socket's task is cancelled: a row left behind
                # would count against the owner until it expires.
                with anyio.CancelScope(shield=True):
                    await self.quotas.release(ticket)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, surface: str, refused: Refused
    ) -> None:
        self._refused(refused.reason)
        log.warning(
            "refused %s from %s: %s (token %s)",
            surface,
            _client(scope),
            refused.text,
            refused.token_id or "-",
        )
        if scope["type"] == "websocket":
            code = (
                protocol.CLOSE_TRY_AGAIN_LATER
                if refused.reason in ("over_limit", "over_quota")
                else protocol.CLOSE_POLICY_VIOLATION
            )
            await send({"type": "websocket.close", "code": code, "reason": refused.text})
            return
        status = 429 if refused.reason == "over_limit" else 401
        await PlainTextResponse(f"Unauthorized: {refused.text}", status)(scope, receive, send)


def _accepting_offered(scope: Scope, send: Send) -> Send:
    """A client that offered subprotocols (a token entry among them) gets
    one of them back, as RFC 6455 requires of a server that picks one and
    browsers of any answer: ``audiocore`` if offered, else the entry."""
    offered = _offered(Headers(scope=scope))
    if not offered:
        return send
    chosen = SUBPROTOCOL if SUBPROTOCOL in offered else offered[0]

    async def accept_with_subprotocol(message: Message) -> None:
        if message["type"] == "websocket.accept" and message.get("subprotocol") is None:
            message = {**message, "subprotocol": chosen}
        await send(message)

    return accept_with_subprotocol


def token_route(settings: Settings, signer: TokenSigner) -> Route:
    """``POST /tokens`` (the key only, checked by the guard): ``{"owner",
    "ttlSeconds"?, "limits"?}`` → ``{"token", "tokenId", "owner",
    "expiresAt", "limits"}``."""

    async def mint(request: Request) -> Response:
        try:
            body = await read_json_body(request, 64 * 1024, settings.body_timeout_s)
        except HttpError as exc:
            return JSONResponse({"detail": exc.detail}, exc.status, headers=exc.headers)
        try:
            token, claims = _mint(signer, body)
        except ValueError as exc:
            return JSONResponse({"detail": str(exc)}, 422)
        log.info("token %s minted for %s", claims.token_id, claims.owner)
        return JSONResponse(
            {
                "token": token,
                "tokenId": claims.token_id,
                "owner": claims.owner,
                "expiresAt": claims.expires_at,
                "limits": claims.limits.to_json(),
            }
        )

    return Route("/tokens", mint, methods=["POST"])


def _mint(signer: TokenSigner, body: Any) -> tuple[str, TokenClaims]:
    if not isinstance(body, dict):
        raise ValueError(f"expected a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - {"owner", "ttlSeconds", "limits"})
    if unknown:
        raise ValueError(f"unknown {unknown}; expected owner, ttlSeconds, limits")
    owner = body.get("owner")
    if not isinstance(owner, str):
        raise ValueError(f"owner: expected a string, got {type(owner).__name__}")
    if owner in RESERVED_USERS:
        raise ValueError(f"owner: {owner!r} is reserved")
    return signer.mint(
        owner,
        body.get("ttlSeconds", DEFAULT_TTL_S),
        TokenLimits.from_json(body.get("limits")),
    )
