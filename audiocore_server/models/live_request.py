"""What ADK's request for a live connection asks of a model, read the same
way by every model the server offers (offline, OpenAI): whether the turns
are the client's, the agent's instruction, its function declarations."""

from __future__ import annotations

from collections.abc import Iterator

from google.adk.models.llm_request import LlmRequest
from google.genai import types


def manual_turns(llm_request: LlmRequest) -> bool:
    """True when the run config disables automatic activity detection: the
    client's activity edges are the turns."""
    realtime = llm_request.live_connect_config.realtime_input_config
    detection = realtime.automatic_activity_detection if realtime else None
    return bool(detection and detection.disabled)


def instruction(llm_request: LlmRequest) -> str:
    """The system instruction as text ("" when there is none)."""
    given = llm_request.config.system_instruction if llm_request.config else None
    if isinstance(given, str):
        return given
    if isinstance(given, types.Content):
        return "\n".join(p.text for p in given.parts or [] if p.text)
    return ""


def function_declarations(llm_request: LlmRequest) -> Iterator[types.FunctionDeclaration]:
    """The function declarations of the request's tools, in order."""
    for tool in (llm_request.config.tools or []) if llm_request.config else []:
        yield from getattr(tool, "function_declarations", None) or []
