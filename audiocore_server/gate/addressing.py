"""Which app and user a request may name: one rule for ADK's session REST,
the memory REST and ``/run_live``. Clients of ADK's API name their own
users, of ADK's id shape, but never the server's own users, whose session
ids are the capability (``storage/users.py``)."""

from __future__ import annotations

from collections.abc import Collection

from ..storage.users import API_USER_ID, RESERVED_USERS


class NotAddressable(Exception):
    """An app or user a request may not name (each surface says it its way:
    404 on REST, a close on ``/run_live``)."""


def api_user_allowed(user_id: str) -> bool:
    return user_id not in RESERVED_USERS and API_USER_ID.fullmatch(user_id) is not None


def check_target(app_name: str, user_id: str, served_apps: Collection[str]) -> None:
    """``NotAddressable`` unless ``app_name`` is an app served and
    ``user_id`` a user ADK's API may name."""
    if app_name not in served_apps:
        raise NotAddressable(
            f"App not found: {app_name!r} (this server has {', '.join(sorted(served_apps))})"
        )
    if not api_user_allowed(user_id):
        raise NotAddressable(f"User not found: {user_id!r}")
