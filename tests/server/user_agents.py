"""Agents of a user's kind, for ``--agent tests.server.user_agents:<name>``
(the agents folder of the tests is tests/server/agent_apps)."""

from __future__ import annotations

from typing import Any

from google.adk.agents import Agent
from google.adk.plugins.base_plugin import BasePlugin
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


class ToolCounter(BasePlugin):
    """A plugin given with --plugin: records the tools it sees run."""

    seen: list[str] = []

    def __init__(self) -> None:
        super().__init__(name="tool_counter")

    async def before_tool_callback(self, *, tool: Any, tool_args: Any, tool_context: Any) -> None:
        ToolCounter.seen.append(tool.name)
        return None
