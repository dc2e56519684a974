"""Which session state keys a client may write: one rule for every surface
that takes state from a client (the session REST's ``state`` and
``stateDelta``, a ``/run_live`` request's ``state_delta``).

ADK's ``State`` prefixes (google/adk/sessions/state.py) decide where a key
lands:

* ``app:`` is stored once per app and merged into every session of every
  user, reserved users included: refused, or one client writes everyone's
  state (and, made large, slows every session open).
* ``user:`` is shared by the sessions of one user. A client names its own
  user on these surfaces, so it writes only what that user's other
  sessions see: allowed, as ADK allows it.
* ``temp:`` lives for one invocation and is never stored: allowed.

The server's own keys are refused whatever their prefix: ``task_owner``
(``state_keys.OWNER_STATE_KEY``: whose background tasks a session's tools
count and see; written by the server for ``/ws`` clients with a user key),
and ``ledger`` (``state_keys.LEDGER_STATE_KEY``: the payments the user
approved, appended to by ``process_payment`` alone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.adk.sessions.state import State

from .state_keys import LEDGER_STATE_KEY, OWNER_STATE_KEY

SERVER_KEYS = frozenset({OWNER_STATE_KEY, LEDGER_STATE_KEY})


class ForbiddenState(ValueError):
    """State a client may not write; the message says which key and why."""


def check_client_state(state: Mapping[str, Any], where: str) -> None:
    """Raise ``ForbiddenState`` for the first key of ``state`` (the field
    named ``where``) that a client may not write."""
    for key in state:
        if key.startswith(State.APP_PREFIX):
            raise ForbiddenState(
                f"{where}: key {key!r} not allowed: {State.APP_PREFIX!r} state is shared "
                "by every user's sessions"
            )
        if key in SERVER_KEYS:
            raise ForbiddenState(f"{where}: key {key!r} not allowed: the server's own")
