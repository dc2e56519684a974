"""A support desk agent: every kind of tool an ADK agent can have.

* ``lookup_order``: a plain function, run as soon as the model calls it;
* ``issue_refund``: ADK's own confirmation (``FunctionTool(...,
  require_confirmation=True)``): ADK asks the user before it runs;
* ``schedule_callback``: asks for confirmation from inside, with
  ``tool_context.request_confirmation``, then runs again once answered;
* ``show_order_page``: a browser tool (``@tool(runs_in="browser")``): served
  by audiocore_server, the page runs it; its body never runs there;
* ``faq``: from an MCP server on stdio (``faq_server.py`` beside this file),
  launched with this Python when the agent first lists its tools.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from google.adk.agents import Agent
from google.adk.tools import FunctionTool, ToolContext
from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
from mcp import StdioServerParameters

from audiocore_server.tools.spec import tool

ORDERS: dict[str, dict[str, Any]] = {
    "A-1001": {"status": "shipped", "items": ["headphones"], "total_eur": 89.0},
    "A-1002": {"status": "processing", "items": ["desk lamp", "bulbs"], "total_eur": 42.5},
}


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order: its status, items and total.

    Args:
        order_id: the order's id, such as A-1001.
    """
    order = ORDERS.get(order_id)
    if order is None:
        return {"error": f"no order {order_id}"}
    return {"order_id": order_id, **order}


def issue_refund(order_id: str, amount_eur: float, reason: str) -> dict[str, Any]:
    """Refund part or all of an order (the user confirms first).

    Args:
        order_id: the order to refund.
        amount_eur: how much, in euros.
        reason: why, in the customer's words.
    """
    order = ORDERS.get(order_id)
    if order is None:
        return {"error": f"no order {order_id}"}
    if not 0 < amount_eur <= order["total_eur"]:
        return {"error": f"expected an amount up to {order['total_eur']} EUR, got {amount_eur}"}
    return {"refunded_eur": amount_eur, "order_id": order_id, "reason": reason}


def schedule_callback(phone: str, when: str, tool_context: ToolContext) -> dict[str, Any]:
    """Schedule a phone call back to the customer (they confirm the time).

    Args:
        phone: the number to call.
        when: when to call, such as "tomorrow 10:00".
    """
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        # First call: ask; ADK calls the tool again with the user's answer.
        tool_context.request_confirmation(
            hint=f"Call {phone} back {when}?", payload={"phone": phone, "when": when}
        )
        return {"status": "waiting for the customer's confirmation"}
    if not confirmation.confirmed:
        return {"status": "not scheduled: the customer declined"}
    return {"status": "scheduled", "phone": phone, "when": when}


@tool(runs_in="browser")
def show_order_page(order_id: str) -> dict[str, Any]:
    """Open the order's page in the customer's browser.

    Args:
        order_id: the order to show.
    """
    # Served by audiocore_server, the page runs this tool and returns its
    # result; only a plain ADK runner would get here.
    return {"error": "show_order_page runs in the browser"}


faq_server = McpToolset(
    connection_params=StdioConnectionParams(
        server_params=StdioServerParameters(
            command=sys.executable, args=[str(Path(__file__).with_name("faq_server.py"))]
        ),
        timeout=30,
    ),
    tool_filter=["faq"],
)

root_agent = Agent(
    name="support_desk",
    model="gemini-2.5-flash",
    description="A shop's support desk: orders, refunds, call-backs and FAQs.",
    instruction=(
        "You are a shop's support desk. Look orders up before you answer about "
        "them, refund only what the customer asks for, and answer policy "
        "questions with the faq tool."
    ),
    tools=[
        lookup_order,
        FunctionTool(issue_refund, require_confirmation=True),
        schedule_callback,
        show_order_page,
        faq_server,
    ],
)
