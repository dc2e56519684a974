"""Who owns a session, and the shapes of the ids that name sessions.

No accounts: the demo page's user (``USER_ID``) and the HTTP chat's
(``CHAT_USER_ID``) hold sessions whose unguessable ids are the capability,
so neither is reachable through ADK's API, where clients name their own
users and sessions.
"""

from __future__ import annotations

import re
import secrets

USER_ID = "web"  # no accounts: possession of an unguessable session id is the capability
# The web user's sessions are capabilities: only ids of our own shape.
WEB_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{20,100}")
# Sessions that clients of ADK's API create and name themselves.
API_SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
API_USER_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
CHAT_USER_ID = "chat"  # the HTTP chat endpoint's sessions (audiocore_server/http/chat.py)
# Phone calls that name no user (audiocore_server/phone/): a new session each call.
PHONE_USER_ID = "phone"
# Users whose session ids are capabilities: not reachable through ADK's API.
RESERVED_USERS = frozenset({USER_ID, CHAT_USER_ID, PHONE_USER_ID})


def new_session_id() -> str:
    return secrets.token_urlsafe(24)  # 192 bits


def session_id_allowed(user_id: str, session_id: str) -> bool:
    """Whether ``session_id`` may name a session of ``user_id`` (matched whole)."""
    pattern = WEB_SESSION_ID if user_id == USER_ID else API_SESSION_ID
    return pattern.fullmatch(session_id) is not None
