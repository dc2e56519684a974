"""Secrets out of text the user will see or hear.

An external agent's progress (its messages, plans, tool titles) is shown on
the task card and may be read aloud; what it echoes of its environment must
not be. ``redact`` replaces with ``[redacted]`` whatever looks like a
secret: a bearer or basic credential, a password in a URL
(``scheme://user:pass@host``), an environment assignment whose name
contains KEY, TOKEN, SECRET or PASSWORD (``API_KEY=…``, ``"token": "…"``),
and the shapes of the common API keys. It is a screen, not a proof: it errs
on the side of hiding.
"""

from __future__ import annotations

import re

from .records import clip

REDACTED = "[redacted]"
# Times the text kept: how much of a longer text ``screened`` looks at, so
# a secret that starts in the kept part is whole when it is looked for.
REDACT_MARGIN = 4

# Every run before a literal is bounded, and a match starts only where a
# word does: otherwise a long run of letters costs quadratic time.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization: Bearer abc… / Basic abc…
    (re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}", re.I), rf"\1 {REDACTED}"),
    # scheme://user:password@host — the user stays, the password goes.
    (
        re.compile(r"\b([a-z][a-z0-9+.-]{0,30}://[^\s:/@]{0,100}):[^\s/@]{1,200}@", re.I),
        rf"\1:{REDACTED}@",
    ),
    # NAME=value, NAME: value, "name": "value" for secret-looking names.
    (
        re.compile(
            r"""(?<![A-Za-z0-9_.-])(?P<name>["']?[A-Za-z0-9_.-]{0,40}(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD)"""
            r"""[A-Za-z0-9_.-]{0,40}["']?)(?P<sep>\s{0,3}[=:]\s{0,3})"""
            r"""(?P<value>"[^"]{0,500}"|'[^']{0,500}'|[^\s,;&]+)""",
            re.I,
        ),
        rf"\g<name>\g<sep>{REDACTED}",
    ),
    # Key shapes: OpenAI/Anthropic "sk-…", Google "AIza…", GitHub "gh?_…",
    # Slack "xox?-…", AWS access key ids.
    (
        re.compile(
            r"\b(?:sk-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}|gh[pousr]_[A-Za-z0-9]{20,}"
            r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})"
        ),
        REDACTED,
    ),
    # JWTs. A JWT starts where a run of its characters does, not at any
    # ``\b``: "-" is one of them, so "eyJ-eyJ-…" would start a scan to the
    # end of the run at every "eyJ" (quadratic) and fail each time.
    # The literal comes first, its check behind it, so the engine searches
    # for "eyJ" instead of trying the check at every position.
    (
        re.compile(
            r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
        ),
        REDACTED,
    ),
)


def redact(text: str) -> str:
    """``text`` with whatever looks like a secret replaced by ``[redacted]``."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def screened(text: str, limit: int) -> str:
    """``text`` as it may be shown or logged: on one line, redacted, at most
    ``limit`` characters (redacted before it is cut: a secret across the
    cut is hidden whole, not left as a prefix too short to look like one)."""
    return clip(redact(" ".join(text[: REDACT_MARGIN * limit].split())), limit)
