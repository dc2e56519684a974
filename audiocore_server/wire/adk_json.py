"""ADK events as ADK's own server sends them: shared by ``/run_live`` and
the session REST."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic_core
from google.adk.events import Event
from google.adk.events._internal_metadata import public_event


def event_json(event: Event) -> dict[str, Any]:
    """An event as ADK's server sends it (before the bytes are made JSON)."""
    dumped: dict[str, Any] = public_event(event).model_dump(
        exclude_none=True, by_alias=True, mode="json"
    )
    return dumped


def encode_event(data: Mapping[str, Any]) -> str:
    # Never NaN or Infinity, which no strict parser reads: null, as
    # strict_json.dumps writes them.
    return pydantic_core.to_json(data, inf_nan_mode="null").decode("utf-8")
