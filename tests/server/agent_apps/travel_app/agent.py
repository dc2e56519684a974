"""A user's travel app, declared as an ADK App with a plugin of its own."""

from __future__ import annotations

from typing import Any

from google.adk.agents import Agent
from google.adk.apps.app import App
from google.adk.plugins.base_plugin import BasePlugin

SEEN: list[str] = []


def search_flights(destination: str) -> dict[str, Any]:
    """Search flights to a destination."""
    return {"destination": destination, "flights": ["XY123"]}


class CountingPlugin(BasePlugin):
    """Records the tools it sees run, in SEEN."""

    def __init__(self) -> None:
        super().__init__(name="travel_counter")

    async def before_tool_callback(self, *, tool: Any, tool_args: Any, tool_context: Any) -> None:
        SEEN.append(f"travel_counter:{tool.name}")
        return None


app = App(
    name="travel_app",
    root_agent=Agent(
        name="travel_agent",
        model="gemini-2.5-flash",
        description="Books travel.",
        instruction="You book travel.",
        tools=[search_flights],
    ),
    plugins=[CountingPlugin()],
)
