"""The credentials check before the routes: every request and socket that
needs credentials is checked once (``Credentials.check``), refused with its
status or close code, or let through with its ``Principal`` in the scope;
a token owner's live sockets and daily minutes are held while a socket
lives.

Every refusal is counted by its reason and logged as one line with the
surface, the client's address and the token's id if known — never the key
or the token.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable

import anyio
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..settings import Settings
from ..wire import protocol
from .credentials import (
    LIVE_SURFACES,
    SCOPE_KEY,
    SUBPROTOCOL,
    Credentials,
    Principal,
    Refused,
    client_address,
    offered_subprotocols,
    surface_of,
)
from .quotas import OwnerQuotas, QuotaExceeded

log = logging.getLogger(__name__)


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
        if surface is None or surface == "phone":  # phone: see credentials.PHONE_PATHS
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
        if surface not in LIVE_SURFACES:
            await self.app(scope, receive, _accepting_offered(scope, send))
            return
        admission = live_admission(credentials, self.quotas, principal)
        try:
            principal = await admission.__aenter__()
        except Refused as exc:
            await self._refuse(scope, receive, send, surface, exc)
            return
        try:
            scope[SCOPE_KEY] = principal
            await self.app(scope, receive, _accepting_offered(scope, send))
        finally:
            await admission.__aexit__(None, None, None)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, surface: str, refused: Refused
    ) -> None:
        self._refused(refused.reason)
        log.warning(
            "refused %s from %s: %s (token %s)",
            surface,
            client_address(scope),
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


@contextlib.asynccontextmanager
async def live_admission(
    credentials: Credentials, quotas: OwnerQuotas | None, principal: Principal
) -> AsyncIterator[Principal]:
    """Hold a live socket for ``principal`` while the body runs: a place
    under its token's ``maxSessions`` and its owner's quota (the principal
    given back carries what the quota leaves); ``Refused`` if there is none."""
    if not credentials.admit(principal):
        raise Refused("over_limit", "too many live sessions for this token", principal.token_id)
    ticket = None
    try:
        if quotas is not None and principal.owner is not None:
            try:
                ticket = await quotas.admit(principal.owner)
            except QuotaExceeded as exc:
                raise Refused("over_quota", str(exc), principal.token_id) from None
            except Exception:  # the store is away: closed, not open
                log.warning("quota store failed; socket refused", exc_info=True)
                raise Refused("over_quota", "quotas unavailable", principal.token_id) from None
            principal = dataclasses.replace(principal, quota_seconds=ticket.seconds_left)
        yield principal
    finally:
        credentials.release(principal)
        if ticket is not None and quotas is not None:
            # Even when the socket's task is cancelled: a row left behind
            # would count against the owner until it expires.
            with anyio.CancelScope(shield=True):
                await quotas.release(ticket)


def _accepting_offered(scope: Scope, send: Send) -> Send:
    """A client that offered subprotocols (a token entry among them) gets
    one of them back, as RFC 6455 requires of a server that picks one and
    browsers of any answer: ``audiocore`` if offered, else the entry."""
    offered = offered_subprotocols(Headers(scope=scope))
    if not offered:
        return send
    chosen = SUBPROTOCOL if SUBPROTOCOL in offered else offered[0]

    async def accept_with_subprotocol(message: Message) -> None:
        if message["type"] == "websocket.accept" and message.get("subprotocol") is None:
            message = {**message, "subprotocol": chosen}
        await send(message)

    return accept_with_subprotocol
