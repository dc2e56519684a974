"""A desk agent whose tools ask for ADK's confirmation every way ADK has.

* ``delete_file``: ``FunctionTool(require_confirmation=True)``;
* ``transfer``: ``require_confirmation`` a callable (over 100 asks);
* ``book_room``: ``tool_context.request_confirmation`` in its body, with a
  payload (the nights) the user may change;
* ``ring_bell``: a plain ``FunctionTool`` that the deployment names in
  ``tools_requiring_approval``.

``RUNS`` counts each tool's effect (what runs only once confirmed), and
``PAYLOADS`` what ``book_room`` was confirmed with: the tests read both.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from google.adk.agents import Agent
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext

RUNS: Counter[str] = Counter()
PAYLOADS: list[Any] = []


def delete_file(path: str) -> dict[str, Any]:
    """Delete a file."""
    RUNS["delete_file"] += 1
    return {"deleted": path}


def needs_review(amount: float) -> bool:
    return amount > 100


def transfer(amount: float) -> dict[str, Any]:
    """Transfer money."""
    RUNS["transfer"] += 1
    return {"transferred": amount}


def book_room(room: str, tool_context: ToolContext) -> dict[str, Any]:
    """Book a room."""
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        tool_context.request_confirmation(
            hint=f"Book {room}? Say how many nights.", payload={"nights": 1}
        )
        return {"status": "awaiting confirmation"}
    if not confirmation.confirmed:
        return {"status": "not booked"}
    RUNS["book_room"] += 1
    PAYLOADS.append(confirmation.payload)
    tool_context.state["booked"] = room
    return {"booked": room, "nights": (confirmation.payload or {}).get("nights")}


def ring_bell(times: int) -> dict[str, Any]:
    """Ring the bell."""
    RUNS["ring_bell"] += 1
    return {"rang": times}


root_agent = Agent(
    name="desk",
    model="gemini-2.0-flash",  # the server's model stands in for it
    instruction="You help at the front desk.",
    tools=[
        FunctionTool(delete_file, require_confirmation=True),
        FunctionTool(transfer, require_confirmation=needs_review),
        book_room,
        FunctionTool(ring_bell),
    ],
)
