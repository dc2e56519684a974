"""An OpenAI realtime conversation as the items that rebuild it on a new
session (``openai_recovery.py``).

The service keeps a session's conversation and nothing survives it: a
session that ends (a dropped socket, its 60-minute limit) takes the
conversation with it, and the next one knows only what it is given. Items
are all it takes (``conversation.item.create``): messages as text (it takes
no assistant audio), and function calls with their outputs, so that an
answer owed after a tool continues on the new session.

A ``Transcript`` keeps the items as the conversation makes them, in order:
the earlier turns ADK gives at the start (``history``), the user's typed
words and the transcript of their speech, the model's answers as their
transcript, its calls and their outputs. ``answered`` marks the point every
input before has been answered at (a response ended); what came after it is
given again from the ``ModelLink`` instead (the user's words themselves,
audio included), so the rebuild leaves those items out — but not the
outputs of calls: they are answers the tools gave once and must not give
again.
"""

from __future__ import annotations

import json
from typing import Any

from google.genai import types

Item = dict[str, Any]

# What a rebuild carries at most: the latest answered items (an hour of
# conversation is a few hundred), and so much of each item's text or tool
# output. Kept whole, a long session's transcript would grow without bound
# and be sent again whole on every new session.
MAX_ITEMS = 200
MAX_ITEM_CHARS = 8_000


def history_items(history: list[types.Content]) -> list[Item]:
    """The session's earlier turns as text messages (tool calls and answers
    are left out: their outcome is in the words)."""
    items = []
    for content in history:
        text = " ".join(p.text for p in content.parts or [] if p.text and not p.thought)
        if text:
            items.append(_message("assistant" if content.role == "model" else "user", text))
    return items


class Transcript:
    def __init__(self) -> None:
        self._items: list[Item] = []
        self._answered = 0  # items before this index have been answered
        self._outputs_after = 0  # function outputs after it, with no response yet

    def history(self, contents: list[types.Content]) -> None:
        self._items += history_items(contents)
        self._answered = len(self._items)

    def user_text(self, text: str) -> None:
        if text:
            self._items.append(_message("user", text))

    def user_speech(self, transcript: str) -> None:
        if transcript:
            self._items.append(_message("user", transcript))

    def model_words(self, transcript: str) -> None:
        if transcript:
            self._items.append(_message("assistant", transcript))

    def model_calls(self, calls: list[types.FunctionCall]) -> None:
        for call in calls:
            self._items.append(
                {
                    "type": "function_call",
                    "call_id": call.id or "",
                    "name": call.name or "",
                    "arguments": json.dumps(call.args or {}, default=str),
                }
            )

    def tool_output(self, call_id: str, output: str) -> None:
        item = {"type": "function_call_output", "call_id": call_id, "output": _bounded(output)}
        self._items.append(item)
        self._outputs_after += 1

    def answered(self) -> None:
        """A response ended: everything before it has had its answer. The
        oldest items go past ``MAX_ITEMS``, never leaving an output whose
        call went first."""
        drop = max(0, len(self._items) - MAX_ITEMS)
        while drop < len(self._items) and self._items[drop]["type"] == "function_call_output":
            drop += 1
        del self._items[:drop]
        self._answered = len(self._items)
        self._outputs_after = 0

    def rebuild(self) -> tuple[list[Item], bool]:
        """The items for a new session, and whether an answer is owed after
        them (tool outputs the model has not answered yet)."""
        kept = self._items[: self._answered] + [
            item for item in self._items[self._answered :] if item["type"] == "function_call_output"
        ]
        # The items left out are given again (the ModelLink): forget them.
        self._items = kept
        self._answered = len(kept) - self._outputs_after
        return [dict(item) for item in kept], self._outputs_after > 0


def _message(role: str, text: str) -> Item:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": _bounded(text)}]}


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_ITEM_CHARS else text[: MAX_ITEM_CHARS - 1] + "…"
