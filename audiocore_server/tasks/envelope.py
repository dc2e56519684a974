"""The prompt a task's external agent is given: the envelope around the objective.

It carries what the agent cannot see from where it runs: the objective, the
last few turns of the voice conversation (taken from the live session when
the task is started, ``voice_context``), the user's time zone and language,
the earlier results when the agent could not keep its own history, the
tasks stopped while it worked on them (told once: ``acp_sessions.py``), and
the shape of the answer we want back — ``{speech, inline}``: a short answer
that can be spoken, then optionally a line ``Inline:`` and Markdown to show
on the user's screen (code, links, lists). Every part is bounded.
"""

from __future__ import annotations

import re
from typing import Any

from .acp_permissions import PROMPT_PREFIX
from .records import TaskRecord, clip

MAX_CONTEXT_TURNS = 6
MAX_TURN_CHARS = 300
MAX_EARLIER_RESULTS = 3
SPEECH_MARK = "Speech:"
INLINE_MARK = "Inline:"
_INLINE_LINE = re.compile(r"^[ \t]*Inline:[ \t]*\n?", re.M)
CANCELLED_HEADING = "Stopped by the user before you finished them (cancelled: do not resume them):"
# The server's own turns in the live session (a task's outcome, a permission
# question) are not the user's words.
SERVER_TURN_PREFIXES = ("[background task ", PROMPT_PREFIX)


def voice_context(
    history: list[dict[str, str]], time_zone: str | None, language: str | None
) -> dict[str, Any]:
    """What a task keeps of the conversation it was started in (bounded)."""
    turns = [
        {"role": t["role"], "text": clip(" ".join(t["text"].split()), MAX_TURN_CHARS)}
        for t in history
        if t.get("text") and not t["text"].startswith(SERVER_TURN_PREFIXES)
    ]
    return {
        "turns": turns[-MAX_CONTEXT_TURNS:],
        "timeZone": time_zone,
        "language": language,
    }


def envelope(
    record: TaskRecord, earlier: list[TaskRecord], cancelled: list[dict[str, str]] | None = None
) -> str:
    """The prompt for ``record``; ``earlier``: results to recall (the agent's
    session is new and the owner had tasks before); ``cancelled``: tasks
    ({id, objective}) the agent was working on when they were cancelled."""
    context = record.context or {}
    lines = [f"Task {record.id} for a user talking to a voice assistant.", "", "Objective:"]
    lines.append(record.objective)
    turns = context.get("turns") or []
    if turns:
        lines += ["", "The last turns of the conversation (for context):"]
        lines += [f"- {t.get('role', '?')}: {t.get('text', '')}" for t in turns]
    prefs = [
        f"time zone {context['timeZone']}" if context.get("timeZone") else "",
        f"language {context['language']}" if context.get("language") else "",
    ]
    if any(prefs):
        lines += ["", "The user's preferences: " + ", ".join(p for p in prefs if p) + "."]
    if earlier:
        lines += ["", "Earlier tasks of this user (your history of them was lost):"]
        lines += [
            f"- {clip(t.objective, MAX_TURN_CHARS)} -> {clip(t.result or '', MAX_TURN_CHARS)}"
            for t in earlier[-MAX_EARLIER_RESULTS:]
        ]
    if cancelled:
        lines += ["", CANCELLED_HEADING]
        lines += [f"- {c['id']}: {clip(c['objective'], MAX_TURN_CHARS)}" for c in cancelled]
    lines += [
        "",
        "Answer in two parts. First the speech: one or two plain sentences that can be "
        "read aloud (no Markdown, no code, no links). Then, only if there is more to show, "
        f"a line starting with '{INLINE_MARK}' followed by Markdown (code blocks, links, "
        "lists) to show on the user's screen.",
    ]
    return "\n".join(lines)


def split_answer(text: str) -> tuple[str, str | None]:
    """The speech and the inline part (Markdown, as written) of an agent's
    reply: the inline part starts at the first line that starts with
    ``Inline:``; a ``Speech:`` before the speech is dropped."""
    found = _INLINE_LINE.search(text)
    speech, inline = (text[: found.start()], text[found.end() :]) if found else (text, "")
    speech = speech.strip().removeprefix(SPEECH_MARK).strip()
    inline = inline.strip("\n").rstrip()
    if not speech:  # all of it shown, nothing to say: its first line is said
        speech = " ".join(inline.split("\n", 1)[0].split())
    return speech, inline or None
