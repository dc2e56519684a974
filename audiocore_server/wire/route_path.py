"""The path a route of the app sees, wherever the app is mounted.

Mounted inside another app (``Mount("/voice", app=create_app(...))``),
Starlette keeps the full path in ``scope["path"]`` and the prefix in
``scope["root_path"]``: whatever compares a path with one of our routes
compares this instead.
"""

from __future__ import annotations

from starlette.types import Scope


def route_path(scope: Scope) -> str:
    """``scope["path"]`` without the mount's prefix: ``/ws`` for
    ``/voice/ws`` under ``/voice``, the path itself when not mounted."""
    path: str = scope["path"]
    prefix: str = scope.get("root_path", "")
    if prefix and path.startswith(prefix) and path[len(prefix) : len(prefix) + 1] in ("", "/"):
        return path[len(prefix) :] or "/"
    return path
