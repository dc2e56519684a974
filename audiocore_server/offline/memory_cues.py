"""The offline model's memory cues: typed words that call ``user_memory``,
answers read from what it returns, and what it was told of its user when
the conversation started.

* "remember that …" → remember the rest;
* "what do you know about me" → recall the newest facts and the profile;
* "what do you remember about …" → recall what matches;
* "forget …" → forget the facts that match;
* "what were you told about me" → no call: the memories the instruction
  carried at connect (``memory_tool.memory_context``), one per line, each
  a JSON string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..memory.tool import CONTEXT_END, CONTEXT_START, NO_MEMORY

TOOL = "user_memory"

CUES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], dict[str, Any]]], ...] = (
    (
        re.compile(r"\bremember that\s+(.+)", re.I | re.S),
        lambda m: {"action": "remember", "text": m[1].strip().rstrip(".")},
    ),
    (
        re.compile(r"\bwhat do you (?:know|remember) about me\b", re.I),
        lambda m: {"action": "recall"},
    ),
    (
        re.compile(r"\bwhat do you (?:remember|know) about\s+(.+)", re.I | re.S),
        lambda m: {"action": "recall", "query": m[1].strip().rstrip("?.")},
    ),
    (
        re.compile(r"\bforget (?:that |about )?(.+)", re.I | re.S),
        lambda m: {"action": "forget", "query": m[1].strip().rstrip(".")},
    ),
)
_TOLD = re.compile(r"\bwhat were you told about me\b", re.I)
_TOLD_LINE = re.compile(r'^- \[(mem_[0-9a-f]{12})\] ("(?:[^"\\]|\\.)*")$', re.M)


def call_for(text: str, tools: set[str]) -> dict[str, Any] | None:
    """The ``user_memory`` arguments a cue in ``text`` asks for, if any."""
    if TOOL not in tools:
        return None
    for pattern, build in CUES:
        match = pattern.search(text)
        if match:
            return build(match)
    return None


def told(text: str, instruction: str) -> str | None:
    """The answer to "what were you told about me", read from the
    instruction the model connected with; None for other text."""
    if not _TOLD.search(text):
        return None
    if NO_MEMORY in instruction:
        return NO_MEMORY
    start, end = instruction.find(CONTEXT_START), instruction.find(CONTEXT_END)
    facts = _TOLD_LINE.findall(instruction[start:end]) if 0 <= start < end else []
    if not facts:
        return "I was told nothing about you when we started."
    # Each fact is a JSON string (``memory_tool.framed``).
    listed = "; ".join(f"{json.loads(fact)} ({memory_id})" for memory_id, fact in facts)
    return f"When we started I was told {len(facts)} things about you: {listed}."


def answer(result: dict[str, Any]) -> str:
    """What the model says of ``user_memory``'s ``result``."""
    if "error" in result:
        return (
            str(result["error"])
            if result.get("memory") is False
            else f"I could not: {result['error']}"
        )
    action = result.get("action")
    if result.get("target") == "profile":
        managed = result["profile"]["managed"]
        return f"Your profile's notes now say: {managed}." if managed else "I cleared my notes."
    if action == "remember":
        fact = result["remembered"]
        return f"I will remember that {fact['text']} ({fact['id']})."
    if action == "replace":
        fact = result["remembered"]
        return f"Corrected: {fact['text']} ({fact['id']})."
    if action == "forget":
        gone = result.get("forgotten") or []
        if not gone:
            return f"There was nothing to forget: {result.get('note', 'no such memory')}."
        return f"I forgot {len(gone)} memories: {', '.join(gone)}."
    if action == "recall":
        memories = result.get("memories") or []
        profile = result.get("profile") or {}
        parts = [f"{m['text']} ({m['id']})" for m in memories]
        about = f"about {result['query']}" if result.get("query") else "about you"
        said = (
            f"I remember {about}: {'; '.join(parts)}." if parts else f"I remember nothing {about}."
        )
        sections = [s for s in (profile.get("user"), profile.get("managed")) if s]
        if sections and not result.get("query"):
            said += " Your profile says: " + " ".join(sections)
        return said
    return f"{TOOL} returned {result}."
