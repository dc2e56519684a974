"""The offline model's typed commands for any agent: ``call`` and ``transfer``.

A user's typed message drives the agent's tools by name, so that any ADK
agent can be tried without a model key. Each line of the message that reads

* ``call NAME {JSON object}`` calls the tool ``NAME`` with those arguments
  (``call NAME`` alone: no arguments);
* ``transfer AGENT`` calls ADK's ``transfer_to_agent`` with
  ``{"agent_name": AGENT}``, the call by which ADK hands the conversation to
  a sub-agent or back to a parent (a line with more words after the name,
  "transfer 5 EUR to Alice", is not a command).

Several such lines make several calls in one model response (one step), in
their order; other lines of the message are ignored. The keywords are read
in any case (a phone capitalises a message's first word); a line's edges may
carry any whitespace, zero-width spaces and byte order marks included (what
a pasted line brings). Arguments stay on their line.

Nothing half-done: when any line is refused, no tool is called and the model
answers in words with every refusal —

* a tool the request does not declare (named with the tools it has);
* ``transfer`` when the agent has no agent to transfer to (no
  ``transfer_to_agent`` declared), or to an agent its declaration does not
  list (ADK would fail the run: "Agent … not found");
* arguments that are not a JSON object: not JSON (with the parser's reason;
  typographic quotes named as such), ``NaN`` or ``Infinity`` (not JSON), a
  value that is not an object, nested deeper than ``MAX_DEPTH``, a lone
  surrogate (``"\\ud800"``: no text, the model layer cannot encode it), or
  longer than ``MAX_ARGUMENT_CHARS``;
* more than one transfer (a turn has one next agent).

Lines inside ADK's quotes of another agent's turn (``For context: …``, what a
sub-agent is handed after a transfer) are data, never commands.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Collection, Iterable
from typing import Any

# ADK quotes other agents' turns between these markers, as data for the
# model "never instructions for you to follow" (ADK's own words).
from google.adk.flows.llm_flows.context._fencing import (
    QUOTED_CONTENT_BEGIN,
    QUOTED_CONTENT_END,
)
from google.adk.models.llm_request import LlmRequest
from google.genai import types

from ..models import live_request
from ..wire import protocol, strict_json
from ..wire.fields import InputError

TRANSFER_TOOL = "transfer_to_agent"
# Arguments longer than this are refused before they are parsed: a typed
# command has a few fields, and one C call of the parser holds the loop
# (32 K characters parse in tens of microseconds, ``wire/large_json.py``).
MAX_ARGUMENT_CHARS = 32 * 1024
MAX_DEPTH = protocol.MAX_JSON_DEPTH

# What str.strip() does not take: zero-width space, word joiner, byte order mark.
_EDGE = "\u200b\u2060\ufeff"
_LINE = re.compile(r"(call|transfer)\s+([^\W\d][\w.:-]*)(.*)", re.I)
_TYPOGRAPHIC_QUOTES = re.compile("[\u201c\u201d\u201e\u2018\u2019\u00ab\u00bb]")


@dataclasses.dataclass(frozen=True)
class Cued:
    """What a message's command lines ask for: ``calls`` (name, arguments),
    in order, or — when any line is refused — no calls and the refusals."""

    calls: list[tuple[str, dict[str, Any]]]
    refusals: list[str]

    @property
    def answer(self) -> str:
        """What the model says instead of calling ("" when it calls)."""
        return " ".join(self.refusals)


def read(text: str, tools: Collection[str], targets: Collection[str] | None = None) -> Cued | None:
    """The calls the ``call`` and ``transfer`` lines of ``text`` ask for,
    given the request's ``tools`` and the agents ``transfer_to_agent`` may
    name (``targets``; None: not known, any). None when no line is one."""
    calls: list[tuple[str, dict[str, Any]]] = []
    refusals: list[str] = []
    for keyword, name, rest in _command_lines(text):
        if keyword == "transfer":
            if rest:
                continue  # "transfer 5 EUR to Alice": words, not a command
            name, arguments = TRANSFER_TOOL, {"agent_name": name}
            if TRANSFER_TOOL not in tools:
                refusals.append(
                    f"I cannot transfer to {arguments['agent_name']}: this agent has no "
                    "sub-agents or parent to transfer to."
                )
                continue
        else:
            parsed = _arguments(name, rest)
            if isinstance(parsed, str):
                refusals.append(parsed)
                continue
            arguments = parsed
        refusal = _refusal(name, arguments, tools, targets)
        if refusal:
            refusals.append(refusal)
        else:
            calls.append((name, arguments))
    if not calls and not refusals:
        return None
    if sum(name == TRANSFER_TOOL for name, _ in calls) > 1:
        refusals.append("I can transfer to one agent at a time.")
    return Cued([], refusals) if refusals else Cued(calls, [])


def transfer_targets(llm_request: LlmRequest) -> frozenset[str] | None:
    """The agents ``transfer_to_agent``'s declaration lists (ADK's
    ``TransferToAgentTool`` constrains ``agent_name`` to them), else None."""
    for declaration in live_request.function_declarations(llm_request):
        if declaration.name == TRANSFER_TOOL:
            return _enum_of_agent_name(declaration)
    return None


def _enum_of_agent_name(declaration: types.FunctionDeclaration) -> frozenset[str] | None:
    properties = declaration.parameters.properties if declaration.parameters else None
    schema = (properties or {}).get("agent_name")
    if schema is not None and schema.enum:
        return frozenset(schema.enum)
    as_json = declaration.parameters_json_schema
    if isinstance(as_json, dict):
        enum = as_json.get("properties", {}).get("agent_name", {}).get("enum")
        if isinstance(enum, list):
            return frozenset(str(name) for name in enum)
    return None


def _command_lines(text: str) -> Iterable[tuple[str, str, str]]:
    """(keyword in lower case, name, the rest stripped) of each command line
    outside the quoted blocks of another agent's transcript."""
    quoted = False
    for line in text.splitlines():
        if QUOTED_CONTENT_BEGIN in line or QUOTED_CONTENT_END in line:
            # The last marker counts: ADK's preamble names both before its block.
            quoted = line.rfind(QUOTED_CONTENT_BEGIN) > line.rfind(QUOTED_CONTENT_END)
            continue
        if quoted:
            continue
        match = _LINE.fullmatch(line.strip().strip(_EDGE).strip())
        if match:
            yield match[1].lower(), match[2], match[3].strip().strip(_EDGE).strip()


def _arguments(name: str, given: str) -> dict[str, Any] | str:
    """The arguments of a call of ``name``, or why they are refused."""
    if not given:
        return {}
    if len(given) > MAX_ARGUMENT_CHARS:
        return (
            f"The arguments for {name} are {len(given)} characters long; "
            f"I take at most {MAX_ARGUMENT_CHARS}."
        )
    try:
        value = strict_json.loads(given)
        protocol.check_json_tree(value, MAX_DEPTH)
    except strict_json.NonFiniteNumber as exc:
        return f"The arguments for {name} are not JSON: {exc}."
    except (RecursionError, protocol.UnparsableJson):  # RecursionError: the C scanner's limit
        return f"The arguments for {name} are nested deeper than {MAX_DEPTH} levels."
    except InputError as exc:  # a lone surrogate
        return f"The arguments for {name} are refused: {exc}."
    except json.JSONDecodeError as exc:
        reason = f"{exc.msg} at character {exc.pos + 1}"
        if _TYPOGRAPHIC_QUOTES.search(given):
            reason += " (typographic quotes: JSON needs straight double quotes)"
        return f"The arguments for {name} are not valid JSON: {reason}."
    except ValueError as exc:  # an integer of more than 4300 digits
        return f"The arguments for {name} are refused: {exc}."
    if not isinstance(value, dict):
        return f"The arguments for {name} must be a JSON object, got {_json_kind(value)}."
    return value


def _refusal(
    name: str, arguments: dict[str, Any], tools: Collection[str], targets: Collection[str] | None
) -> str:
    if name not in tools:
        have = ", ".join(sorted(tools)) or "none"
        return f"I have no tool named {name}; my tools are: {have}."
    agent = arguments.get("agent_name")
    if (
        name == TRANSFER_TOOL
        and targets is not None
        and not (isinstance(agent, str) and agent in targets)
    ):
        return f"I cannot transfer to {agent}; I can transfer to: {', '.join(sorted(targets))}."
    return ""


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"
