"""A user's front desk: a plain function, a FunctionTool writing state
through its tool context, a sub-agent to transfer to, and two tools of
confirm_agents/desk that ask for ADK's confirmation (``delete_file`` by
``require_confirmation``, ``book_room`` from its body, with a payload)."""

from __future__ import annotations

from typing import Any

from google.adk.agents import Agent
from google.adk.tools import FunctionTool
from google.adk.tools.tool_context import ToolContext

from audiocore_server.offline.model import OfflineLiveModel
from tests.server.confirm_agents.desk.agent import book_room, delete_file


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by its id."""
    return {"order_id": order_id, "status": "shipped"}


def add_note(note: str, tool_context: ToolContext) -> dict[str, Any]:
    """Add a note to the customer's file."""
    notes = [*tool_context.state.get("notes", []), note]
    tool_context.state["notes"] = notes
    return {"notes": len(notes)}


def check_stock(item: str) -> dict[str, Any]:
    """How many of an item are in stock."""
    return {"item": item, "in_stock": 3}


stock_agent = Agent(
    name="stock_agent",
    model=OfflineLiveModel(),
    description="Answers questions about stock.",
    instruction="You check stock.",
    tools=[check_stock],
)

root_agent = Agent(
    name="front_desk",
    model=OfflineLiveModel(),
    description="A front desk.",
    instruction="You help at the front desk.",
    tools=[
        lookup_order,
        FunctionTool(add_note),
        FunctionTool(delete_file, require_confirmation=True),
        book_room,
    ],
    sub_agents=[stock_agent],
)
