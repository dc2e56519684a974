"""Who may talk to the server at all: the Host/Origin/API-key guard, the
security headers, and the caps on live sockets.

Every request and socket must name an allowed host (localhost, the bind
address, ``--allowed-hosts``: a page whose name was rebound to this machine
does not), and, with an ``Origin``, come from an allowed origin (same
origin, localhost, or ``--allowed-origins``). Credentials (the API key, the
tokens) are ``audiocore_server/gate/credentials.py``. Live sockets are capped in all and
per client address. Every refusal is counted by its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..settings import Settings
from ..wire import protocol

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
LOCAL_ORIGIN = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?"


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
    if settings.phone_public_url is not None:  # the name Twilio calls this server by
        allowed.add(urlsplit(settings.phone_public_url).hostname or "")
    return name in allowed


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
    refused (400; a socket, 403), a foreign Origin too (403). Responses get
    the security headers."""

    def __init__(
        self,
        app: ASGIApp,
        settings: Settings,
        on_refused: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.app = app
        self.settings = settings
        self._refused = on_refused
        self._headers = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if not host_allowed(headers.get("host"), self.settings):
            self._refused("host")
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": protocol.CLOSE_POLICY_VIOLATION})
            else:
                await PlainTextResponse("Bad Request: host not allowed", 400)(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        if not origin_allowed(headers.get("origin"), headers.get("host"), self.settings):
            self._refused("origin")
            response = PlainTextResponse("Forbidden: origin not allowed", status_code=403)
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

    def admit(self, client: str) -> tuple[str, str] | None:
        """Take a place for ``client``; if none is left, the refusal's
        reason (for the count) and text (for the client)."""
        if self._count >= self.total:
            return "server_full", "the server is full; try again later"
        if self._by_client.get(client, 0) >= self.per_client:
            return "address_full", "too many connections from this address; try again later"
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
