"""JSON too large for one call: parsed and written in pieces, in a thread.

One ``json.loads`` or ``json.dumps`` is one C call, and a C call holds the
GIL from start to end: a worker thread parsing a client's 8 MB body of small
objects (half a second) stops the event loop's thread for as long, and with
it every live conversation on the process. Python code in a thread gives the
GIL back every few milliseconds; one C call does not.

``loads`` reads a JSON text in pieces no larger than ``WINDOW`` characters:
a container that fits in the window is parsed by the C scanner in one call;
one that does not is walked here, element by element, each element again
parsed whole if it fits. Scalars are parsed by the C scanner (a long string
is one fast scan). The result equals ``json.loads`` (last duplicate key
wins), with ``NaN`` and ``Infinity`` refused as ``strict_json`` refuses them.

``dumps_list`` writes a list one element per call, for a response such as a
stored session's thousands of events.

Both are meant to run in a worker thread (``anyio.to_thread.run_sync``):
called on the event loop they would hold it just as long, in more calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from json.decoder import WHITESPACE, scanstring  # type: ignore[attr-defined]
from typing import Any

from . import strict_json

# Characters parsed in one C call, at most: tens of microseconds for text,
# a few milliseconds for the densest JSON (tiny objects, one per 8 bytes).
WINDOW = 32 * 1024
# Texts no longer than this are parsed in one call wherever they are.
SMALL = 64 * 1024


class TooDeep(ValueError):
    """Nested deeper than the caller allows."""


def loads(text: str | bytes | bytearray, max_depth: int) -> Any:
    """``strict_json.loads`` in calls of at most ``WINDOW`` characters each.

    Bytes are UTF-8, a byte order mark before them dropped (as
    ``json.loads`` drops it; in a str it is refused, as there).

    Raises ``strict_json.NonFiniteNumber``, ``TooDeep`` past ``max_depth``
    nested containers (counted where this walks; the C scanner's own limit
    applies inside a window), ``UnicodeDecodeError`` for bytes that are not
    UTF-8, and ``ValueError`` for anything else that is not JSON.
    """
    if len(text) <= SMALL:
        return strict_json.loads(text)
    if isinstance(text, str):
        if text.startswith("\ufeff"):  # refused, in json.loads's words
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    else:
        # RFC 8259: JSON between systems is UTF-8 (and may be read past a mark)
        text = bytes(text).decode("utf-8-sig")
    reader = _Reader(text, max_depth)
    value, end = reader.value(reader.skip(0), 1)
    if reader.skip(end) != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


class _Reader:
    def __init__(self, text: str, max_depth: int) -> None:
        self.text = text
        self.max_depth = max_depth

    def skip(self, i: int) -> int:
        end: int = WHITESPACE.match(self.text, i).end()
        return end

    def value(self, i: int, depth: int) -> tuple[Any, int]:
        text = self.text
        if i >= len(text):
            raise json.JSONDecodeError("Expecting value", text, i)
        opener = text[i]
        if opener not in "[{":
            return strict_json.DECODER.raw_decode(text, i)  # a scalar: one scan
        if depth > self.max_depth:
            raise TooDeep(f"expected JSON nested at most {self.max_depth} deep")
        if len(text) - i <= WINDOW:
            return strict_json.DECODER.raw_decode(text, i)
        try:  # most containers are small: one call over the window
            value, end = strict_json.DECODER.raw_decode(text[i : i + WINDOW])
        except strict_json.NonFiniteNumber:
            raise
        except ValueError:  # larger than the window (or broken): walk it
            return self.array(i, depth) if opener == "[" else self.object(i, depth)
        return value, i + end

    def array(self, i: int, depth: int) -> tuple[list[Any], int]:
        text = self.text
        items: list[Any] = []
        i = self.skip(i + 1)
        if text.startswith("]", i):
            return items, i + 1
        while True:
            item, i = self.value(i, depth + 1)
            items.append(item)
            i, closed = self.after_element(i, "]")
            if closed:
                return items, i

    def object(self, i: int, depth: int) -> tuple[dict[str, Any], int]:
        text = self.text
        members: dict[str, Any] = {}
        i = self.skip(i + 1)
        if text.startswith("}", i):
            return members, i + 1
        while True:
            if not text.startswith('"', i):
                raise json.JSONDecodeError("Expecting property name", text, i)
            key, i = scanstring(text, i + 1)
            i = self.skip(i)
            if not text.startswith(":", i):
                raise json.JSONDecodeError("Expecting ':' delimiter", text, i)
            members[key], i = self.value(self.skip(i + 1), depth + 1)
            i, closed = self.after_element(i, "}")
            if closed:
                return members, i

    def after_element(self, i: int, closer: str) -> tuple[int, bool]:
        """After a container's element, which ends at ``i``: the next
        element's start and False (past a comma), or the index past
        ``closer`` and True."""
        i = self.skip(i)
        if self.text.startswith(",", i):
            return self.skip(i + 1), False
        if self.text.startswith(closer, i):
            return i + 1, True
        raise json.JSONDecodeError("Expecting ',' delimiter", self.text, i)


def dumps_list(items: Iterable[Any]) -> str:
    """A JSON array written one element per ``strict_json.dumps`` call."""
    return "[" + ",".join(strict_json.dumps(item) for item in items) + "]"
