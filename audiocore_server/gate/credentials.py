"""What a credential is, and who it proves: one rule for every surface.
With an API key configured, every request and socket carries credentials,
except ``GET /healthz``, the demo page's files and CORS preflights.

Credentials are the key (``X-API-Key``, or ``Authorization: Bearer``) or a
token that the key minted (``audiocore_server/gate/tokens.py``): ``Authorization: Bearer``
on HTTP; on a WebSocket also ``?token=`` or a ``Sec-WebSocket-Protocol``
entry ``audiocore.token.<token>`` (what a browser can send). ``POST
/tokens`` and ``/metrics`` take the key only.

``Credentials.check`` reads them (``Refused`` says why not); the guard
(``credential_guard.py``) runs it once, before the routes, and puts the
verified ``Principal`` into the ASGI scope, where the surfaces read it
(``principal_of``). A token binds its owner: REST paths and ``/run_live``
must name it as their user (here), ``/ws`` and ``/live`` clients' ``userKey``
must be it or absent (``owners.bind_user_key``, at the opening). A token's
``maxSessions`` caps its owner's live sockets in this process, its
``liveMinutes`` how long each may last (``live/time_limit.py``).
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
import time
from collections.abc import Callable
from pathlib import Path

from starlette.datastructures import Headers, QueryParams
from starlette.types import Scope

from ..settings import Settings
from ..wire.route_path import route_path
from .tokens import TokenClaims, TokenRefused, TokenSigner, secrets_from

log = logging.getLogger(__name__)

SCOPE_KEY = "audiocore.principal"
# Where a credential may ride besides the headers (X-API-Key, Authorization):
# a socket's query parameter of this name (read after percent-decoding, as
# every query is), and a Sec-WebSocket-Protocol entry with this prefix.
# gate/redaction.py keeps both out of every log line.
TOKEN_PARAM = "token"
SUBPROTOCOL_PREFIX = "audiocore.token."
# Offered beside the token entry, it is the one the server accepts (so the
# token is not echoed in the response).
SUBPROTOCOL = "audiocore"
LIVE_SURFACES = frozenset({"ws", "live", "run_live", "phone"})
# Twilio's requests carry its signature, not ours: the phone routes check
# it themselves, and a call's stream its credentials in the ``start``
# message's custom parameters (``Credentials.check_given``).
PHONE_PATHS = frozenset({"/phone/incoming", "/phone/stream", "/phone/telnyx"})
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


class Refused(Exception):
    """A request or socket refused: ``reason`` counted, ``text`` told."""

    def __init__(self, reason: str, text: str, token_id: str | None = None) -> None:
        super().__init__(text)
        self.reason = reason
        self.text = text
        self.token_id = token_id


def surface_of(scope: Scope, web_dir: Path) -> str | None:
    """Which surface a request or socket is, for credentials and a token's
    ``surfaces``; None for what stays open."""
    path = route_path(scope)
    if path in PHONE_PATHS:
        return "phone"
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


def client_address(scope: Scope) -> str:
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
        return self._principal(key, token, surface, _users_named(scope, surface))

    def check_given(self, credential: str | None, surface: str, user: str | None) -> Principal:
        """The principal of a credential given in a message (a phone call's
        ``token`` parameter: the key or a token) for ``user``; ``Refused``."""
        if credential is not None and ("." not in credential or self._is_key(credential)):
            return self._principal(credential, None, surface, [])
        return self._principal(None, credential, surface, [user] if user is not None else [])

    def _principal(
        self, key: str | None, token: str | None, surface: str, users: list[str]
    ) -> Principal:
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
        if any(user != claims.owner for user in users):
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
    for entry in offered_subprotocols(headers):
        if entry.startswith(SUBPROTOCOL_PREFIX):
            return entry[len(SUBPROTOCOL_PREFIX) :]
    return QueryParams(scope.get("query_string", b"")).get(TOKEN_PARAM)


def offered_subprotocols(headers: Headers) -> list[str]:
    return [
        entry.strip()
        for value in headers.getlist("sec-websocket-protocol")
        for entry in value.split(",")
    ]


def _users_named(scope: Scope, surface: str) -> list[str]:
    """The users a REST path or a ``/run_live`` query names (several
    ``user_id`` are refused by the route itself; none may be another's)."""
    if surface == "rest":
        parts = route_path(scope).split("/")  # "", "apps", app, "users", user, …
        return [parts[4]] if len(parts) > 4 and parts[3] == "users" else []
    if surface == "run_live":
        return QueryParams(scope.get("query_string", b"")).getlist("user_id")
    return []
