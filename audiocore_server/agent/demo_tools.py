"""The default agent's tools: one of each kind, all working offline.

| tool | runs in | approval |
|---|---|---|
| ``get_current_time`` | server | no |
| ``get_weather`` | server | no |
| ``process_payment`` | server | yes |
| ``change_bgm`` | browser | no |
| ``get_location`` | browser | yes |

Who approves follows the seed project (its 003 notes and its code):
``change_bgm`` runs in the browser at once, the location and payments are
approved first. A deployment may choose otherwise
(``Settings.tools_requiring_approval``).

Nothing here leaves the machine: the weather is a fixed table and payments
are entries in a ledger kept in the session's state.
"""

from __future__ import annotations

import datetime
import math
import re
import secrets
import zoneinfo
from typing import Any

from google.adk.tools.tool_context import ToolContext

from ..storage.state_keys import LEDGER_STATE_KEY, TIME_ZONE_STATE_KEY
from ..tools.spec import ToolState, tool

# get_current_time answers in the IANA time zone the connected client
# declared (``start.timeZone``), and in UTC when there is none. ``temp:``
# state lives for one invocation — one live connection's run — and is never
# stored, so it is always the zone of the client now connected.

# (temperature °C, condition, humidity %): fixed, so answers are reproducible.
_WEATHER = {
    "tokyo": (18, "partly cloudy", 62),
    "paris": (14, "light rain", 81),
    "london": (12, "overcast", 77),
    "new york": (21, "sunny", 48),
    "san francisco": (16, "fog", 85),
    "sydney": (24, "clear", 55),
    "berlin": (11, "windy", 70),
}
# The tracks the demo page can play (it synthesises them).
BGM_TRACKS = ("jazz", "ambient", "lofi", "off")
_CURRENCY = re.compile(r"[A-Z]{3}")
MAX_PAYMENT = 10_000.0


def get_current_time(tool_context: ToolContext, timezone: str = "") -> dict[str, Any]:
    """Returns the current time: in the user's own time zone, or in another
    one if the user names it.

    Args:
      timezone: An IANA time zone name such as "Europe/Paris"; leave it empty
        for the user's own.
    """
    name = timezone or tool_context.state.get(TIME_ZONE_STATE_KEY) or "UTC"
    try:
        zone = zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return {"error": f"unknown time zone {name!r}"}
    now = datetime.datetime.now(zone)
    return {
        "time": now.strftime("%H:%M:%S"),
        "date": now.date().isoformat(),
        "timezone": name,
        "utcOffset": now.isoformat()[-6:],  # ±HH:MM: the instant, without a zone table
    }


def get_weather(location: str) -> dict[str, Any]:
    """Returns the current weather for a city.

    Args:
      location: The city, in English, e.g. "Tokyo".
    """
    entry = _WEATHER.get(location.strip().lower())
    if entry is None:
        known = ", ".join(name.title() for name in _WEATHER)
        return {"error": f"no weather data for {location!r}; known cities: {known}"}
    temperature, condition, humidity = entry
    return {
        "location": location.strip().title(),
        "temperatureC": temperature,
        "condition": condition,
        "humidity": humidity,
    }


@tool(approval=True)
def process_payment(
    amount: float, currency: str, recipient: str, state: ToolState
) -> dict[str, Any]:
    """Sends a payment. The user must approve every payment before it is made.

    Args:
      amount: The amount to pay, e.g. 5.0.
      currency: The ISO 4217 currency code, e.g. "EUR".
      recipient: Who receives the money.
    """
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        return {"success": False, "error": f"amount must be a number, got {amount!r}"}
    if not math.isfinite(amount) or not 0 < amount <= MAX_PAYMENT:
        return {
            "success": False,
            "error": f"amount must be more than 0 and at most {MAX_PAYMENT:g}",
        }
    code = currency.strip().upper() if isinstance(currency, str) else ""
    if not _CURRENCY.fullmatch(code):
        return {"success": False, "error": f"currency must be an ISO 4217 code, got {currency!r}"}
    name = recipient.strip() if isinstance(recipient, str) else ""
    if not name or len(name) > 100:
        return {"success": False, "error": "recipient must be a name of 1 to 100 characters"}
    entry = {
        "transactionId": f"txn_{secrets.token_hex(6)}",
        "amount": round(float(amount), 2),
        "currency": code,
        "recipient": name,
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    state[LEDGER_STATE_KEY] = [*state.get(LEDGER_STATE_KEY, []), entry]
    return {"success": True, **entry}


@tool(runs_in="browser")
def change_bgm(track: str) -> dict[str, Any]:
    """Changes the background music playing in the user's browser.

    Args:
      track: One of "jazz", "ambient", "lofi", or "off" to stop the music.
    """
    raise NotImplementedError("runs in the browser")


@tool(runs_in="browser", approval=True)
def get_location() -> dict[str, Any]:
    """Returns the user's location (latitude and longitude) from their browser."""
    raise NotImplementedError("runs in the browser")


DEMO_TOOLS = (get_current_time, get_weather, process_payment, change_bgm, get_location)
# The tools the demo's user approves unless tools_requiring_approval says
# otherwise (the seed project's TOOLS_REQUIRING_APPROVAL).
DEMO_APPROVALS = ("get_location", "process_payment")
