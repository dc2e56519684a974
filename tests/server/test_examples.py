"""The example agents (``examples/``) load with ADK's own loader, as
``adk web examples`` and ``--agents-dir examples`` load them, and run on ADK's
Runner with the offline model, driven by typed ``call`` and ``transfer``
lines — the support desk's MCP tool from a real MCP server on stdio."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
from google.adk.agents import BaseAgent, LlmAgent
from google.adk.cli.utils.agent_loader import AgentLoader
from google.adk.events import Event
from google.adk.runners import InMemoryRunner
from google.adk.tools import FunctionTool
from google.adk.tools.mcp_tool import McpToolset
from google.genai import types

from audiocore_server.offline.model import OfflineLiveModel
from audiocore_server.tools.spec import spec_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def agents_of(root: BaseAgent) -> Iterator[BaseAgent]:
    yield root
    for sub_agent in root.sub_agents:
        yield from agents_of(sub_agent)


def load(name: str) -> BaseAgent:
    """A fresh load: the module's agents as the user's file builds them (an
    earlier test's offline models replaced nothing of it)."""
    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[module]
    root = AgentLoader(str(EXAMPLES)).load_agent(name)
    assert isinstance(root, BaseAgent)
    return root


def offline(root: BaseAgent) -> BaseAgent:
    """``root`` with every agent on the offline model (as the server's
    offline mode runs a user's agent)."""
    for agent in agents_of(root):
        assert isinstance(agent, LlmAgent)
        agent.model = OfflineLiveModel()
    return root


def converse(
    root: BaseAgent, *texts: str, before_close: Callable[[], None] = lambda: None
) -> list[list[Event]]:
    """The events of each typed turn, in one session; the runner closed
    (with it the toolsets, and so the MCP server's process)."""

    async def scenario() -> list[list[Event]]:
        runner = InMemoryRunner(agent=root, app_name=root.name)
        try:
            session = await runner.session_service.create_session(app_name=root.name, user_id="u")
            turns = []
            for text in texts:
                message = types.Content(role="user", parts=[types.Part(text=text)])
                turns.append(
                    [
                        event
                        async for event in runner.run_async(
                            user_id="u", session_id=session.id, new_message=message
                        )
                    ]
                )
            before_close()
            return turns
        finally:
            await runner.close()

    return asyncio.run(scenario())


def said(events: list[Event]) -> tuple[str, str]:
    """Who answered a turn last, and what."""
    last = events[-1]
    parts = last.content.parts or [] if last.content else []
    return last.author, "".join(p.text for p in parts if p.text)


def called(events: list[Event]) -> list[tuple[str, str | None, dict[str, Any] | None]]:
    return [
        (e.author, p.function_call.name, p.function_call.args)
        for e in events
        for p in (e.content.parts or [] if e.content else [])
        if p.function_call
    ]


def test_adks_loader_finds_both_examples_written_for_a_gemini_model() -> None:
    assert AgentLoader(str(EXAMPLES)).list_agents() == ["support_desk", "travel_team"]
    for name in ("support_desk", "travel_team"):
        models = {agent.name: getattr(agent, "model", None) for agent in agents_of(load(name))}
        assert set(models.values()) == {"gemini-2.5-flash"}, models


def test_support_desk_declares_every_kind_of_tool() -> None:
    root = load("support_desk")
    assert isinstance(root, LlmAgent)
    by_name = {getattr(t, "name", None) or getattr(t, "__name__", ""): t for t in root.tools}
    refund = by_name["issue_refund"]
    # ADK's own confirmation (no public accessor for the flag).
    assert isinstance(refund, FunctionTool) and refund._require_confirmation is True
    assert callable(by_name["schedule_callback"])
    show_order_page = by_name["show_order_page"]
    assert callable(show_order_page) and spec_of(show_order_page).runs_in == "browser"
    assert any(isinstance(t, McpToolset) for t in root.tools)


def faq_servers() -> list[int]:
    """The pids of this process's children running the example's MCP server."""
    found = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if any(arg.endswith("faq_server.py") for arg in child.cmdline()):
                found.append(child.pid)
    return found


def test_support_desk_runs_offline_with_its_mcp_server() -> None:
    root = offline(load("support_desk"))
    running: list[list[int]] = []
    order, faq, refused = converse(
        root,
        'call lookup_order {"order_id": "A-1001"}',
        'call faq {"topic": "returns"}',
        "call nope",
        before_close=lambda: running.append(faq_servers()),
    )
    assert called(order) == [("support_desk", "lookup_order", {"order_id": "A-1001"})]
    assert said(order) == (
        "support_desk",
        'lookup_order returned {"items": ["headphones"], "order_id": "A-1001", '
        '"status": "shipped", "total_eur": 89.0}.',
    )
    # The MCP server's own answer came back through the toolset.
    assert called(faq) == [("support_desk", "faq", {"topic": "returns"})]
    assert "Items can be returned within 30 days of delivery" in said(faq)[1]
    # What the model was declared, MCP tool and confirmation tools included.
    assert said(refused) == (
        "support_desk",
        "I have no tool named nope; my tools are: faq, issue_refund, lookup_order, "
        "schedule_callback, show_order_page.",
    )
    # One server ran (on stdio, a child of this process); runner.close()
    # closed the toolset, and the server's process with it.
    assert len(running[0]) == 1
    assert faq_servers() == []


def test_travel_team_transfers_and_each_agent_runs_its_tool() -> None:
    root = offline(load("travel_team"))
    to_flights, flights, back, to_hotels, hotels = converse(
        root,
        "transfer flights_agent",
        'call search_flights {"origin": "AMS", "destination": "LIS", "date": "2026-12-20"}',
        "transfer coordinator",
        "transfer hotels_agent",
        'call search_hotels {"city": "Lisbon", "nights": 2}',
    )
    assert called(to_flights) == [
        ("coordinator", "transfer_to_agent", {"agent_name": "flights_agent"})
    ]
    assert to_flights[-1].author == "flights_agent"
    assert said(flights) == (
        "flights_agent",
        'search_flights returned {"date": "2026-12-20", "flights": ['
        '{"departs": "17:45", "flight": "TT 317", "from": "AMS", "price_eur": 98, "to": "LIS"}, '
        '{"departs": "08:10", "flight": "TT 101", "from": "AMS", "price_eur": 129, "to": "LIS"}'
        "]}.",
    )
    assert called(back) == [("flights_agent", "transfer_to_agent", {"agent_name": "coordinator"})]
    assert back[-1].author == "coordinator"
    assert to_hotels[-1].author == "hotels_agent"
    assert said(hotels)[0] == "hotels_agent"
    assert '"hotel": "Alfama Rooms", "price_eur_per_night": 85, "stay_eur": 170' in said(hotels)[1]
