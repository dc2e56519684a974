"""Agents of a user's kind, for ``--agent tests.server.user_agents:<name>``
(the agents folder of the tests is tests/server/agent_apps)."""

from __future__ import annotations

from google.adk.agents import Agent
from google.adk.tools import google_search


def _look_up(order_id: str) -> dict[str, str]:
    """Look up an order by its id."""
    return {"order_id": order_id, "status": "shipped"}


# Gemini's built-in search beside a function tool: it passes through to
# Gemini, and a model that cannot run it refuses it by name.
search_agent = Agent(
    name="searcher",
    model="gemini-2.5-flash",
    instruction="Search the web when asked.",
    tools=[google_search, _look_up],
)
