"""The offline live model's cues for an agent's permission requests.

The server hands the model a task agent's question as a user turn
(``tasks/acp_permissions.py``): the model asks it aloud. The user's short
answer — "yes, always" / "always allow" to allow, "no" / "reject" / "deny"
to reject — becomes a call of ``respond_agent_permission``; the server
accepts it only for a request it told and the user answered
(``tasks/live_tools.heard_after``), so a cue said when nothing is pending
gets the tool's error back, told as it is.
"""

from __future__ import annotations

import re
from typing import Any

from ..tasks.acp_permissions import PROMPT_PREFIX

TOOL = "respond_agent_permission"

_ASKED = re.compile(
    rf"^{re.escape(PROMPT_PREFIX)}(perm_[0-9a-f]+) for task (\S+)\] The agent working on "
    r"the task asks permission to: (.*?)\. Ask the user",
    re.S,
)
_ALWAYS = re.compile(
    r"^\s*(?:yes[,!.]?\s*)?(?:always(?: allow(?: it)?)?|allow(?: it)? always)\s*[.!]?\s*$", re.I
)
_REJECT = re.compile(
    r"^\s*(?:no|reject|deny)(?: it)?(?:[,.!]?\s*(?:reject|deny)(?: it)?)?\s*[.!]?\s*$", re.I
)


def told(text: str) -> str | None:
    """What the model says when handed a permission question, else None."""
    asked = _ASKED.match(text)
    if asked is None:
        return None
    _, task_id, title = asked.groups()
    return (
        f"The agent working on your task {task_id} asks permission to {title}. "
        "Say yes, always to allow it, or no to reject it."
    )


def call_for(text: str, tools: set[str]) -> dict[str, Any] | None:
    """The arguments of a ``respond_agent_permission`` call the user's
    answer asks for, else None."""
    if TOOL not in tools:
        return None
    if _ALWAYS.match(text):
        return {"decision": "always"}
    if _REJECT.match(text):
        return {"decision": "reject"}
    return None
