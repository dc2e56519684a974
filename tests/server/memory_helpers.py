"""What the memory tests over /ws (test_user_memory) and /api/chat
(test_chat_memory) share: reading a turn's answer and its user_memory call
(the same UI chunks on both surfaces), and the app's memory store.
"""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from audiocore_server.memory.store import MemoryStore
from audiocore_server.runtime import Runtime


def answer(turn: list[dict[str, Any]]) -> str:
    return "".join(m["delta"] for m in turn if m["type"] == "text-delta")


def memory_output(turn: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The turn's one user_memory call: its input and its output."""
    call = next(m for m in turn if m["type"] == "tool-input-available")
    assert call["toolName"] == "user_memory", call
    output = next(m for m in turn if m["type"] == "tool-output-available")
    assert output["toolCallId"] == call["toolCallId"]
    return call["input"], output["output"]


def store_of(client: TestClient) -> MemoryStore:
    runtime: Runtime = client.app.state.runtime  # type: ignore[attr-defined]
    assert runtime.memory is not None
    return runtime.memory
