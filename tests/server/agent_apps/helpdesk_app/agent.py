"""A user's help desk agent: a plain function, an ADK FunctionTool, a
browser tool, callbacks, and a sub-agent. The tools record their calls in
CALLS, so a test can tell a tool ran (and how often)."""

from __future__ import annotations

from typing import Any

from google.adk.agents import Agent
from google.adk.tools import FunctionTool, LongRunningFunctionTool
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.tool_context import ToolContext

from audiocore_server.tools.spec import tool

CALLS: list[tuple[str, dict[str, Any]]] = []
CALLBACKS: list[str] = []


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by its id."""
    CALLS.append(("lookup_order", {"order_id": order_id}))
    return {"order_id": order_id, "status": "shipped"}


def add_note(note: str, tool_context: ToolContext) -> dict[str, Any]:
    """Add a note to the customer's file."""
    CALLS.append(("add_note", {"note": note}))
    notes = [*tool_context.state.get("notes", []), note]
    tool_context.state["notes"] = notes
    return {"notes": len(notes)}


@tool(runs_in="browser")
def show_order_page(order_id: str) -> dict[str, Any]:
    """Open the order's page in the user's browser."""
    raise NotImplementedError("runs in the browser")


def _before_tool(tool: Any, args: dict[str, Any], tool_context: ToolContext) -> None:
    CALLBACKS.append(f"before_tool:{tool.name}")


def _after_tool(
    tool: Any, args: dict[str, Any], tool_context: ToolContext, tool_response: Any
) -> None:
    CALLBACKS.append(f"after_tool:{tool.name}")


def check_stock(item: str) -> dict[str, Any]:
    """How many of an item are in stock."""
    CALLS.append(("check_stock", {"item": item}))
    return {"item": item, "in_stock": 3}


def open_ticket(subject: str) -> dict[str, Any]:
    """Open a ticket that a person answers later."""
    CALLS.append(("open_ticket", {"subject": subject}))
    return {"status": "pending", "ticket": "T-1"}


summarizer = Agent(
    name="summarizer",
    model="gemini-2.5-flash",
    description="Summarizes a text.",
    instruction="Summarize what you are given in one sentence.",
)

stock_agent = Agent(
    name="stock_agent",
    model="gemini-2.5-flash",
    description="Answers questions about stock.",
    instruction="You check stock.",
    tools=[check_stock],
)

root_agent = Agent(
    name="helpdesk",
    model="gemini-2.5-flash",
    description="A help desk for orders.",
    instruction="You help customers with their orders.",
    tools=[
        lookup_order,
        FunctionTool(add_note),
        show_order_page,
        LongRunningFunctionTool(open_ticket),
        AgentTool(summarizer),
    ],
    sub_agents=[stock_agent],
    before_tool_callback=_before_tool,
    after_tool_callback=_after_tool,
)
