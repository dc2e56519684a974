"""Owners: whose memory and tasks a request or conversation uses, and who
may act for whom. One rule, written once:

* ``key:<userKey>`` — a client that named its user key (``/ws``, ``/live``,
  the HTTP chat's ``userKey``, the memory REST's header); under a token,
  the token's owner is the key, and naming another is refused;
* ``user:<user_id>`` — a user of ADK's API (the session and memory REST,
  ``/run_live``), never one of the server's own shared users;
* ``session:<user_id>:<session_id>`` — the tasks of a session that names
  no key (its session id is the capability).
"""

from __future__ import annotations

import logging

from starlette.types import Scope

from ..storage.users import RESERVED_USERS
from .credentials import client_address, principal_of

log = logging.getLogger(__name__)

KEY_PREFIX = "key:"


class NotOwner(Exception):
    """A user key that is not the token's own; each surface maps it to its
    close code (1008) or status (403)."""


def key_owner(user_key: str) -> str:
    return f"{KEY_PREFIX}{user_key}"


def is_key_owner(owner: object) -> bool:
    return isinstance(owner, str) and owner.startswith(KEY_PREFIX)


def api_user_owner(user_id: str) -> str | None:
    """The owner an ADK user id names; None for the server's own users
    (shared ids, not people)."""
    return None if user_id in RESERVED_USERS else f"user:{user_id}"


def session_owner(user_id: str, session_id: str) -> str:
    """The owner of the tasks of a session that names no key: session ids
    are unique per ADK user, so the pair is."""
    return f"session:{user_id}:{session_id}"


def bind_user_key(scope: Scope, user_key: str | None) -> str | None:
    """A client's user key under its credentials: a token's owner must be
    it, or stands for it when absent. ``NotOwner`` for another user's key."""
    principal = principal_of(scope)
    if principal is None or principal.owner is None:
        return user_key
    if user_key is not None and user_key != principal.owner:
        log.warning(
            "refused %s from %s: userKey is not the token's owner (token %s)",
            scope.get("path", "?"),
            client_address(scope),
            principal.token_id,
        )
        raise NotOwner("userKey: not the token's owner")
    return principal.owner
