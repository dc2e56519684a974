"""Thin WebSocket server bridging browser audio to a Google ADK live agent."""

from .app import create_app
from .settings import Settings

__all__ = ["Settings", "create_app"]
