"""What ADK's request for a live connection asks of a model, read the same
way by every model the server offers (offline, OpenAI): whether the turns
are the client's, the agent's instruction, its function declarations, and
the Gemini built-in tools a model other than Gemini refuses."""

from __future__ import annotations

from collections.abc import Iterator

from google.adk.models.llm_request import LlmRequest
from google.genai import types

from .provider_error import ProviderError


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


def built_in_tools(llm_request: LlmRequest) -> list[str]:
    """The request's tools that only Gemini runs (``google_search``,
    ``code_execution``, ``url_context``, …), by their field's name."""
    found: list[str] = []
    for tool in (llm_request.config.tools or []) if llm_request.config else []:
        if not isinstance(tool, types.Tool):
            continue
        for name in type(tool).model_fields:
            if name != "function_declarations" and getattr(tool, name) is not None:
                found.append(name)
    return found


def refuse_built_in_tools(llm_request: LlmRequest, model: str) -> None:
    """``ProviderError`` naming the request's Gemini built-in tools, for a
    model (``model``: how the client is told of it) that cannot run them."""
    names = built_in_tools(llm_request)
    if names:
        raise ProviderError(
            f"the agent has Gemini built-in tools ({', '.join(names)}), which {model} "
            "cannot run: run the agent on Gemini, or give it function tools instead"
        )


def function_declarations(llm_request: LlmRequest) -> Iterator[types.FunctionDeclaration]:
    """The function declarations of the request's tools, in order."""
    for tool in (llm_request.config.tools or []) if llm_request.config else []:
        yield from getattr(tool, "function_declarations", None) or []
