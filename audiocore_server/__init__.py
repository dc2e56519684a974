"""Thin WebSocket server bridging browser audio to a Google ADK live agent.

``create_app(settings)`` is the Starlette app (to serve, or to mount in
another app: ``audiocore_server.embed``); ``Settings`` its settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .settings import Settings

__all__ = ["Settings", "create_app"]


def __getattr__(name: str) -> Any:
    # Imported at first use: importing the package (or one of its modules
    # alone, such as settings) loads neither ADK nor the model clients.
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "Settings":
        from .settings import Settings

        return Settings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
