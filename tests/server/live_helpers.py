"""What the provider paths' end-to-end tests (test_gemini_*, test_openai_*)
share: a client session on /ws that waits until its provider connection is
ready, and reading the agent's words and errors off a ``Collector``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from server_helpers import Collector
from test_e2e import START_F32, connect


async def open_ready_session(
    url: str, endpoint: Any, ready: Callable[[Any], object], **start: Any
) -> tuple[Any, Collector]:
    """A client session whose provider connection is ``ready`` (a predicate
    on the endpoint's newest record), so no audio waits for it."""
    before = len(endpoint.records)
    ws, col, _ = await connect(url, {**START_F32, **start})
    await endpoint.wait_for_async(lambda rs: len(rs) > before and ready(rs[-1]))
    return ws, col


async def say(ws: Any, text: str) -> None:
    await ws.send(json.dumps({"type": "text", "text": text}))


def said(col: Collector, turn: int = -1) -> str:
    """The agent's words in a turn (its text deltas)."""
    turns: list[list[str]] = [[]]
    for _, m in col.messages:
        if m["type"] == "text-delta":
            turns[-1].append(m["delta"])
        elif m["type"] == "finish":
            turns.append([])
    return "".join([t for t in turns if t][turn])


def errors(col: Collector) -> list[str]:
    return [m["errorText"] for _, m in col.messages if m["type"] == "error"]
