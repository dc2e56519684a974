"""Twilio's request signature: who may open a phone call's routes.

Every request Twilio makes — the incoming call's webhook, the media
stream's WebSocket upgrade — carries ``X-Twilio-Signature``: base64 of
HMAC-SHA1, keyed by the account's Auth Token, over the full URL exactly as
Twilio called it (scheme, host, path, query) followed by each POST
parameter, sorted by name (then value), as name and value with no
separators. A request
without it, or with another, is refused; the comparison takes constant
time. The token is never logged (``redaction.protect``, from ``app.py``).

Behind a proxy the URL Twilio signed is the public one, not the one the
server sees: ``Settings.phone_public_url`` names its scheme and host.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.types import Scope

SIGNATURE_HEADER = "x-twilio-signature"


def signature(auth_token: str, url: str, params: Iterable[tuple[str, str]] = ()) -> str:
    """The signature Twilio computes for ``url`` and its POST ``params``."""
    # A name given twice with one value counts once, as Twilio's own helpers
    # sign (twilio-python: each name's distinct values, sorted).
    payload = url + "".join(name + value for name, value in sorted(set(params)))
    digest = hmac.new(auth_token.encode(), payload.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def signed_url(scope: Scope, public_url: str | None) -> str:
    """The URL of a request as Twilio called it: ``public_url``'s scheme and
    host if set (a socket's scheme then ``wss``), else the request's own."""
    headers = Headers(scope=scope)
    path = scope.get("root_path", "") + scope["path"]
    query = scope.get("query_string", b"").decode("latin-1")
    if public_url is not None:
        scheme, _, host = public_url.rstrip("/").partition("://")
        if scope["type"] == "websocket":
            scheme = "wss" if scheme == "https" else "ws"
    else:
        scheme = scope.get("scheme", "http")
        host = headers.get("host", "")
    return f"{scheme}://{host}{path}" + (f"?{query}" if query else "")


def phone_url(scope: Scope, public_url: str | None, path: str) -> str:
    """The URL of ``path`` on this server, as the request came (for the
    TwiML that points Twilio at the stream: wss from an https request)."""
    base = signed_url(scope, public_url).split("?", 1)[0]
    scheme, _, rest = base.partition("://")
    host = rest.split("/", 1)[0]
    socket_scheme = "wss" if scheme in ("https", "wss") else "ws"
    return f"{socket_scheme}://{host}{path}"


def verified(
    scope: Scope,
    auth_token: str,
    public_url: str | None,
    params: Iterable[tuple[str, str]] = (),
) -> bool:
    """Whether the request carries Twilio's signature of its URL and ``params``."""
    given = Headers(scope=scope).get(SIGNATURE_HEADER)
    if not given:
        return False
    expected = signature(auth_token, signed_url(scope, public_url), params)
    return hmac.compare_digest(given.encode(errors="replace"), expected.encode())
