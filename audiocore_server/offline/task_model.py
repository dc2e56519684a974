"""The offline backend's model: a deterministic ``BaseLlm`` standing in for
the task agent's Gemini text model. It reads the objective (simple cues),
calls the task tools one after another, and answers with what they
computed. Each of its steps takes ``step_delay_s``
(``task_offline_delay_s``), so a task takes a noticeable time the way real
work would.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator, Callable
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

# What the offline backend understands in an objective, in the order written.
_PLAN_CUES: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], dict[str, Any]]], ...] = (
    (
        "sum_column",
        re.compile(
            r"\b(?:sum|add up|total)(?: of)?(?: the)? (?P<column>[\w-]+) column (?:of|in) "
            r"(?P<file>[^\s,;]+)",
            re.I,
        ),
        lambda m: {"file": _file_arg(m["file"]), "column": m["column"]},
    ),
    (
        "count_words",
        re.compile(r"\bcount(?: the)? words (?:in|of) (?P<file>[^\s,;]+)", re.I),
        lambda m: {"file": _file_arg(m["file"])},
    ),
    (
        "wait",
        re.compile(r"\bwait(?: for)? (?P<seconds>\d+(?:\.\d+)?) ?(?:s|sec|secs|seconds?)\b", re.I),
        lambda m: {"seconds": float(m["seconds"])},
    ),
    ("list_files", re.compile(r"\blist(?: the)? files\b", re.I), lambda m: {}),
)
OFFLINE_HELP = (
    "the offline backend can sum a column of a CSV file, count the words in a file, "
    "list the files, or wait a number of seconds"
)


def _file_arg(token: str) -> str:
    # The end of a sentence is not part of the name ("…of sales.csv.").
    return token[:-1] if token.endswith(".") and not token.endswith("..") else token


def offline_plan(objective: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls the offline backend makes for ``objective``, in order."""
    found = [
        (match.start(), name, build(match))
        for name, pattern, build in _PLAN_CUES
        for match in pattern.finditer(objective)
    ]
    return [(name, args) for _, name, args in sorted(found, key=lambda f: f[0])]


class OfflineTaskModel(BaseLlm):
    """Deterministic offline stand-in for the backend's Gemini text model."""

    model: str = "offline-tasks"
    step_delay_s: float = 0.0  # each answer (tool call or text) takes this long

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"offline-tasks"]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if self.step_delay_s > 0:
            await asyncio.sleep(self.step_delay_s)  # the "thinking": cancellable
        response = _next_step(llm_request.contents)
        # Honest usage: no tokens spent (and ADK's telemetry has its figure).
        response.usage_metadata = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=0, candidates_token_count=0, total_token_count=0
        )
        yield response


def _next_step(contents: list[types.Content]) -> LlmResponse:
    """The model's next move in the current task: the next tool call, or the answer."""
    start = max(
        (
            i
            for i, c in enumerate(contents)
            if c.role == "user" and any(p.text for p in c.parts or [])
        ),
        default=-1,
    )
    objective = (
        " ".join(p.text for p in contents[start].parts or [] if p.text) if start >= 0 else ""
    )
    results = [
        p.function_response
        for c in contents[start + 1 :]
        for p in c.parts or []
        if p.function_response
    ]
    if results and results[-1].name == "report_failure":
        reason = (results[-1].response or {}).get("reported", "")
        return _text(f"I could not do this task: {reason}")
    if results and "error" in (results[-1].response or {}):
        return _call("report_failure", {"reason": str((results[-1].response or {})["error"])})
    plan = offline_plan(objective)
    if not plan:
        return _call("report_failure", {"reason": f"I did not understand the task; {OFFLINE_HELP}"})
    if len(results) < len(plan):
        name, args = plan[len(results)]
        return _call(name, args)
    return _text(" ".join(_describe(r.name or "", r.response or {}) for r in results))


def _number(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return str(value)
    rounded = round(float(value), 6)
    return str(int(rounded)) if rounded.is_integer() else repr(rounded)


def _describe(tool: str, result: dict[str, Any]) -> str:
    if tool == "sum_column":
        return (
            f"The sum of the {result['column']} column in {result['file']} is "
            f"{_number(result['sum'])} ({result['rows']} rows)."
        )
    if tool == "count_words":
        return f"{result['file']} has {result['words']} words on {result['lines']} lines."
    if tool == "wait":
        return f"Waited {_number(result['waited'])} seconds."
    if tool == "list_files":
        files = ", ".join(f"{f['name']} ({f['bytes']} bytes)" for f in result["files"])
        return f"The files are: {files or 'none'}."
    return f"{tool} returned {json.dumps(result, sort_keys=True, default=str)}."


def _text(text: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def _call(name: str, args: dict[str, Any]) -> LlmResponse:
    return LlmResponse(
        content=types.Content(
            role="model", parts=[types.Part(function_call=types.FunctionCall(name=name, args=args))]
        )
    )
