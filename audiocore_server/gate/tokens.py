"""Signed tokens for browsers: minted with the API key, checked without a
database.

A token is ``base64url(payload) "." base64url(HMAC-SHA256(secret, first part))``
(no padding), the payload compact JSON::

    {"v": 1, "kid": "…", "jti": "…", "owner": "…", "exp": 1767312000,
     "limits": {"maxSessions": 2, "liveMinutes": 30, "surfaces": ["ws"]}}

``jti`` is a random id (the one the log names), ``exp`` the expiry in Unix
seconds, ``kid`` the id of the secret that signed it. Secrets come from
``AUDIOCORE_TOKEN_SECRETS`` (comma-separated): the first signs, all verify,
so a secret is rotated by putting the new one first and dropping the old one
once its tokens have expired; hosts that share the secrets accept each
other's tokens. Without token secrets, the API key's HMAC with a fixed label
is the one secret (rotating the key then ends every token).

A token is checked before its payload is read: its length and alphabet, then
its signature against every secret in constant time. Whatever is wrong with
it raises ``TokenRefused`` with a short reason — never an exception of
another kind, never the token in the text.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..storage.users import API_USER_ID

MAX_TOKEN_CHARS = 2048  # refused unread past this: a token is about 250
DEFAULT_TTL_S = 600
MAX_TTL_S = 24 * 3600
# What a token may be limited to (``limits.surfaces``): audiocore_server/gate/credentials.py
# names every guarded path's surface.
SURFACES = ("ws", "live", "run_live", "phone", "rest", "chat", "tasks", "api")
MAX_SESSIONS = 1000
MAX_LIVE_MINUTES = 24 * 60.0
_DERIVE_LABEL = b"audiocore token secret v1"
_SIGNATURE_CHARS = 43  # 32 bytes in base64url without padding
# A token wherever it stands in a text (gate/redaction.py): the payload is
# base64url JSON, so it starts "eyJ"; the dot may be percent-encoded.
TOKEN_IN_TEXT = re.compile(rf"eyJ[A-Za-z0-9_-]*(?:\.|%2[Ee])[A-Za-z0-9_-]{{{_SIGNATURE_CHARS}}}")
_SHAPE = re.compile(rf"[A-Za-z0-9_-]{{2,{MAX_TOKEN_CHARS}}}\.[A-Za-z0-9_-]{{{_SIGNATURE_CHARS}}}")


class TokenRefused(Exception):
    """Why a token is not accepted: ``reason`` for the counters (``expired``
    or ``invalid``), the message for the client and the log."""

    def __init__(self, message: str, reason: str = "invalid", token_id: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.token_id = token_id  # known once the signature is good


@dataclasses.dataclass(frozen=True)
class TokenLimits:
    max_sessions: int | None = None  # live sockets of the owner at once, in this process
    live_minutes: float | None = None  # how long one live socket may last
    surfaces: tuple[str, ...] | None = None  # None: every surface a token may use

    def to_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {}
        if self.max_sessions is not None:
            shown["maxSessions"] = self.max_sessions
        if self.live_minutes is not None:
            shown["liveMinutes"] = self.live_minutes
        if self.surfaces is not None:
            shown["surfaces"] = list(self.surfaces)
        return shown

    @classmethod
    def from_json(cls, raw: object) -> TokenLimits:
        """``ValueError`` saying what was expected and what came."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise ValueError(f"limits: expected an object, got {type(raw).__name__}")
        unknown = sorted(set(raw) - {"maxSessions", "liveMinutes", "surfaces"})
        if unknown:
            raise ValueError(
                f"limits: unknown {unknown}; expected maxSessions, liveMinutes, surfaces"
            )
        sessions = raw.get("maxSessions")
        if sessions is not None and (
            type(sessions) is not int or not 1 <= sessions <= MAX_SESSIONS
        ):
            raise ValueError(
                f"limits.maxSessions: expected an integer 1 to {MAX_SESSIONS}, got {sessions!r}"
            )
        minutes = raw.get("liveMinutes")
        if minutes is not None and (
            type(minutes) not in (int, float) or not 0 < minutes <= MAX_LIVE_MINUTES
        ):
            raise ValueError(
                f"limits.liveMinutes: expected a number above 0, at most {MAX_LIVE_MINUTES:g}, "
                f"got {minutes!r}"
            )
        surfaces = raw.get("surfaces")
        if surfaces is not None and (
            not isinstance(surfaces, list) or not surfaces or not set(surfaces) <= set(SURFACES)
        ):
            raise ValueError(
                f"limits.surfaces: expected a non-empty list of {list(SURFACES)}, got {surfaces!r}"
            )
        return cls(
            sessions,
            float(minutes) if minutes is not None else None,
            tuple(surfaces) if surfaces is not None else None,
        )


@dataclasses.dataclass(frozen=True)
class TokenClaims:
    token_id: str
    owner: str
    expires_at: int  # Unix seconds
    limits: TokenLimits
    key_id: str


def secrets_from(token_secrets: Sequence[str], api_key: str | None) -> list[bytes]:
    """The signing secret first, then the others that verify. Without token
    secrets, one derived from the API key; none without either."""
    if token_secrets:
        return [s.encode() for s in token_secrets]
    if api_key is not None:
        return [hmac.new(api_key.encode(), _DERIVE_LABEL, hashlib.sha256).digest()]
    return []


def key_id(secret: bytes) -> str:
    """Names a secret in tokens and logs without revealing it."""
    return hashlib.sha256(b"audiocore kid\0" + secret).hexdigest()[:8]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenSigner:
    """Mints and checks tokens with ``secrets`` (the first signs)."""

    def __init__(self, secrets: Sequence[bytes], clock: Callable[[], float] = time.time) -> None:
        if not secrets:
            raise ValueError("expected at least one token secret, got none")
        self._keys = [(key_id(s), s) for s in secrets]
        self._clock = clock

    def mint(
        self, owner: str, ttl_s: float = DEFAULT_TTL_S, limits: TokenLimits | None = None
    ) -> tuple[str, TokenClaims]:
        """A token for ``owner`` (a user id, as ADK's API has them) and its claims."""
        if not isinstance(owner, str) or not API_USER_ID.fullmatch(owner):
            raise ValueError(f"owner: expected 1 to 128 of A-Z a-z 0-9 . _ : @ -, got {owner!r}")
        if type(ttl_s) not in (int, float) or not 0 < ttl_s <= MAX_TTL_S:
            raise ValueError(f"ttlSeconds: expected above 0, at most {MAX_TTL_S}, got {ttl_s!r}")
        kid, secret = self._keys[0]
        claims = TokenClaims(
            secrets.token_urlsafe(12),
            owner,
            int(self._clock() + ttl_s),
            limits or TokenLimits(),
            kid,
        )
        payload = {
            "v": 1,
            "kid": kid,
            "jti": claims.token_id,
            "owner": owner,
            "exp": claims.expires_at,
            "limits": claims.limits.to_json(),
        }
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return f"{body}.{_b64(self._sign(secret, body))}", claims

    def verify(self, token: str) -> TokenClaims:
        """The claims of a token signed by one of the secrets and not expired;
        ``TokenRefused`` otherwise."""
        if len(token) > MAX_TOKEN_CHARS + 1 + _SIGNATURE_CHARS:
            raise TokenRefused("token too long")
        if not token.isascii() or _SHAPE.fullmatch(token) is None:
            raise TokenRefused("malformed token")
        body, _, signature = token.partition(".")
        given = signature.encode("ascii")
        signed_by = None
        for kid, secret in self._keys:
            # Compared as text: base64's last character has spare bits, and
            # a signature must have one spelling only. Every secret is tried
            # (no early exit): the time taken does not say which matched.
            if hmac.compare_digest(_b64(self._sign(secret, body)).encode("ascii"), given):
                signed_by = kid
        if signed_by is None:
            raise TokenRefused("bad token signature")
        claims = _claims(body, signed_by)
        if claims.expires_at <= self._clock():
            raise TokenRefused("token expired", "expired", claims.token_id)
        return claims

    @staticmethod
    def _sign(secret: bytes, body: str) -> bytes:
        return hmac.new(secret, body.encode("ascii"), hashlib.sha256).digest()


def _claims(body: str, signed_by: str) -> TokenClaims:
    """A signed payload's claims. Ours, so a failure here is a secret shared
    with something else that signs other payloads: refused all the same."""
    try:
        payload = json.loads(_unb64(body))
        if not isinstance(payload, Mapping) or payload.get("v") != 1:
            raise ValueError("not a version 1 payload")
        token_id, owner, expires = payload["jti"], payload["owner"], payload["exp"]
        if not (isinstance(token_id, str) and isinstance(owner, str) and type(expires) is int):
            raise ValueError("jti, owner, exp: wrong types")
        limits = TokenLimits.from_json(payload.get("limits"))
    except (ValueError, KeyError, binascii.Error, UnicodeDecodeError):
        raise TokenRefused("malformed token payload") from None
    return TokenClaims(token_id, owner, expires, limits, signed_by)
