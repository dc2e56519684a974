"""A user's travel agent with one plain function: the second app of the folder."""

from __future__ import annotations

from typing import Any

from google.adk.agents import Agent

from audiocore_server.offline.model import OfflineLiveModel


def search_flights(destination: str) -> dict[str, Any]:
    """Search flights to a destination."""
    return {"destination": destination, "flights": ["XY123"]}


root_agent = Agent(
    name="travel_agent",
    model=OfflineLiveModel(),
    description="Books travel.",
    instruction="You book travel.",
    tools=[search_flights],
)
