"""``POST /tokens``: a signed token for a browser, minted with the API key
(the key only: the guard refuses a token there)."""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..gate.tokens import DEFAULT_TTL_S, TokenClaims, TokenLimits, TokenSigner
from ..settings import Settings
from ..storage.users import RESERVED_USERS
from ..wire.http_body import HttpError, read_json_body

log = logging.getLogger(__name__)


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
