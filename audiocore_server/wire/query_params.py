"""A request's query parameters, parsed strictly: one rule for every route
that takes them (the memory REST, ``/list-apps``, ``/run_live``).

A parameter is given once (a repeated one is refused, not silently the
last); a number is ASCII digits only — ``int()`` also takes Arabic-Indic or
fullwidth digits, signs, underscores and spaces, and ``str.isdigit`` passes
"²", which ``int()`` refuses — within bounds checked before it is
converted; a choice is one of its names exactly; a flag one of a few
spellings of true and false. Anything else is a ``QueryError`` saying what
was expected and what came, which a route answers with a 4xx.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TypeVar

from starlette.datastructures import QueryParams

T = TypeVar("T")

_ASCII_DIGITS = re.compile(r"[0-9]+")
_SHOWN = 60  # characters of a refused value echoed in the message
TRUE = frozenset({"true", "1", "yes", "on"})
FALSE = frozenset({"false", "0", "no", "off"})

Query = QueryParams | Mapping[str, Sequence[str]]


class QueryError(ValueError):
    """A query parameter that is not what the route takes (the message says
    which, what was expected and what came)."""


def shown(value: str) -> str:
    """``value`` as a message quotes it: ``repr``, cut."""
    return repr(value) if len(value) <= _SHOWN else repr(value[:_SHOWN]) + "…"


def one(query: Query, name: str, *, required: bool = False) -> str | None:
    """The parameter's value, None when absent; given twice or more, refused."""
    values = query.getlist(name) if isinstance(query, QueryParams) else query.get(name, ())
    if len(values) > 1:
        raise QueryError(f"{name}: given {len(values)} times, expected once")
    if not values:
        if required:
            raise QueryError(f"{name}: required")
        return None
    return values[0]


def integer(query: Query, name: str, *, default: int, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high`` in ASCII digits (no sign)."""
    raw = one(query, name)
    if raw is None:
        return default
    # Bounded in digits before ``int`` (which is quadratic in them).
    if len(raw) > len(str(high)) or not _ASCII_DIGITS.fullmatch(raw) or not low <= int(raw) <= high:
        raise QueryError(
            f"{name}: expected a whole number from {low} to {high} in ASCII digits, "
            f"got {shown(raw)}"
        )
    return int(raw)


def choice(query: Query, name: str, choices: Mapping[str, T], default: str) -> T:
    """The value one of ``choices``' names names (exactly, case included)."""
    raw = one(query, name)
    key = default if raw is None else raw
    if key not in choices:
        expected = ", ".join(f'"{c}"' for c in choices)
        raise QueryError(f"{name}: expected one of {expected}, got {shown(key)}")
    return choices[key]


def flag(query: Query, name: str) -> bool | None:
    """true/1/yes/on or false/0/no/off (any case); None when absent."""
    raw = one(query, name)
    if raw is None:
        return None
    if raw.lower() in TRUE:
        return True
    if raw.lower() in FALSE:
        return False
    raise QueryError(f"{name}: expected true or false, got {shown(raw)}")
