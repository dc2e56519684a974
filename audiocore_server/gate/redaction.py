"""Credentials out of every log line, however a client spelled them.

The server reads a query after percent-decoding it, so ``?tok%65n=…`` is a
token and ``?token=%61%62…`` a key; uvicorn logs the raw path. Redaction
reads a logged query the same way (each name and value decoded) and hides
the value of every credential parameter (``credentials.TOKEN_PARAM``),
and of any parameter whose decoded value holds a secret or a token; in
the rest of a line it hides tokens (``tokens.TOKEN_IN_TEXT``), bearer
credentials, subprotocol entries (``credentials.SUBPROTOCOL_PREFIX``) and
the protected secrets themselves (the API key, the token secrets) as
written or percent-encoded.

It is installed once per process as a log record factory: every record
of every logger is scrubbed before any handler sees it, whatever the
handlers are (uvicorn replaces its own when it starts).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import quote, quote_plus, unquote_plus

from .credentials import SUBPROTOCOL_PREFIX, TOKEN_PARAM
from .tokens import TOKEN_IN_TEXT

HIDDEN = "***"
_QUERY = re.compile(r"\?([^\s\"'<>]*)")
_BEARER = re.compile(r"(?i)\b(bearer\s+)\S+")
_ENTRY = re.compile(re.escape(SUBPROTOCOL_PREFIX) + r"[^\s,\"']+")
_MIN_SECRET_CHARS = 8  # shorter strings are no secret worth a scan of every line

_secrets: set[str] = set()
_installed = False


def protect(*secrets: str | None) -> None:
    """Hide these in every log line from now on (an app's API key, its
    token secrets)."""
    for secret in secrets:
        if secret and len(secret) >= _MIN_SECRET_CHARS:
            _secrets.update({secret, quote(secret, safe=""), quote_plus(secret)})


def scrub(text: str) -> str:
    """``text`` with every credential in it hidden."""
    text = _QUERY.sub(_scrub_query, text)
    text = TOKEN_IN_TEXT.sub(HIDDEN, text)
    text = _BEARER.sub(rf"\g<1>{HIDDEN}", text)
    text = _ENTRY.sub(SUBPROTOCOL_PREFIX + HIDDEN, text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, HIDDEN)
    return text


def _scrub_query(match: re.Match[str]) -> str:
    pairs = []
    for pair in match.group(1).split("&"):
        name, eq, value = pair.partition("=")
        decoded = unquote_plus(value)
        if eq and (unquote_plus(name) == TOKEN_PARAM or _holds_a_secret(decoded)):
            value = HIDDEN
        pairs.append(f"{name}{eq}{value}")
    return "?" + "&".join(pairs)


def _holds_a_secret(value: str) -> bool:
    return TOKEN_IN_TEXT.search(value) is not None or any(s in value for s in _secrets)


def install() -> None:
    """Scrub every log record of this process, once."""
    global _installed
    if _installed:
        return
    _installed = True
    make_record = logging.getLogRecordFactory()

    def scrubbed_record(*args: object, **kwargs: object) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: logging reports it as usual
            return record
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        return record

    logging.setLogRecordFactory(scrubbed_record)
