"""A travel team: a coordinator that hands the conversation to a flights
agent or a hotels agent (ADK's ``transfer_to_agent``), each with a tool of
its own; either can hand it back."""

from __future__ import annotations

from typing import Any

from google.adk.agents import Agent

FLIGHTS = [
    {"flight": "TT 101", "from": "AMS", "to": "LIS", "departs": "08:10", "price_eur": 129},
    {"flight": "TT 317", "from": "AMS", "to": "LIS", "departs": "17:45", "price_eur": 98},
    {"flight": "TT 240", "from": "LIS", "to": "AMS", "departs": "12:30", "price_eur": 115},
]
HOTELS = [
    {"hotel": "Casa do Rio", "city": "Lisbon", "price_eur_per_night": 110},
    {"hotel": "Alfama Rooms", "city": "Lisbon", "price_eur_per_night": 85},
    {"hotel": "Canal House", "city": "Amsterdam", "price_eur_per_night": 160},
]


def search_flights(origin: str, destination: str, date: str) -> dict[str, Any]:
    """Flights between two airports on a date, cheapest first.

    Args:
        origin: the departure airport's code, such as AMS.
        destination: the arrival airport's code, such as LIS.
        date: the day of travel, YYYY-MM-DD.
    """
    found = [f for f in FLIGHTS if f["from"] == origin.upper() and f["to"] == destination.upper()]
    return {"date": date, "flights": sorted(found, key=lambda f: f["price_eur"])}


def search_hotels(city: str, nights: int) -> dict[str, Any]:
    """Hotels in a city, cheapest first, with the price of the stay.

    Args:
        city: the city, such as Lisbon.
        nights: how many nights.
    """
    found = [h for h in HOTELS if h["city"].lower() == city.lower()]
    return {
        "city": city,
        "hotels": [
            {**h, "stay_eur": h["price_eur_per_night"] * nights}
            for h in sorted(found, key=lambda h: h["price_eur_per_night"])
        ],
    }


flights_agent = Agent(
    name="flights_agent",
    model="gemini-2.5-flash",
    description="Finds flights between airports.",
    instruction="You find flights. Hand anything else back to the coordinator.",
    tools=[search_flights],
)

hotels_agent = Agent(
    name="hotels_agent",
    model="gemini-2.5-flash",
    description="Finds hotels in a city.",
    instruction="You find hotels. Hand anything else back to the coordinator.",
    tools=[search_hotels],
)

root_agent = Agent(
    name="coordinator",
    model="gemini-2.5-flash",
    description="Plans trips with the flights and hotels agents.",
    instruction=(
        "You plan trips. Transfer to flights_agent for flights and to hotels_agent for hotels."
    ),
    sub_agents=[flights_agent, hotels_agent],
)
