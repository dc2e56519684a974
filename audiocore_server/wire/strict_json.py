"""JSON as RFC 8259 has it, in both directions.

Python's ``json`` reads and writes ``NaN``, ``Infinity`` and ``-Infinity``,
which are not JSON: a browser's ``JSON.parse`` (and so the AI SDK's stream
parser) rejects a frame holding one. Clients' texts are parsed with
``loads``, which refuses them (the surfaces answer as for any bad input).
Everything the server sends is written with ``dumps``, which never writes
them: a non-finite number that still reaches the wire (a server tool's own
result, the model's arguments) is sent as ``null`` and logged, rather than
failing the frame that carries it.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

log = logging.getLogger(__name__)


class NonFiniteNumber(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a client's JSON."""


def _refuse(token: str) -> Any:
    raise NonFiniteNumber(f"expected finite numbers, got {token} (not JSON)")


# ``json.loads`` with it; its ``raw_decode`` reads one value at an index.
DECODER = json.JSONDecoder(parse_constant=_refuse)


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads`` that raises ``NonFiniteNumber`` for the non-JSON constants."""
    if isinstance(text, str) and not text.startswith("\ufeff"):
        # The common case, without the decoder json.loads builds per call
        # (a byte order mark: json.loads's own refusal, below).
        return DECODER.decode(text)
    return json.loads(text, parse_constant=_refuse)


def dumps(obj: Any) -> str:
    """Compact UTF-8 JSON; non-finite numbers become ``null``."""
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:  # rare: pay for the walk only then
        log.warning("a non-finite number in outgoing JSON was sent as null")
        return json.dumps(finite(obj), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def finite(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by ``None``."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj
