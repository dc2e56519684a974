"""OpenAI's Realtime API as an ADK model: ``--model openai:<name>``.

``OpenAIRealtime`` is a ``BaseLlm`` whose live connection (``connect``) is
opened with the official ``openai`` package's realtime client
(``AsyncOpenAI(...).realtime.connect(model=…)``), so ADK's runner, sessions,
tools, approvals, delegation, tasks and memory run on it unchanged — the
seam the offline model uses. This module opens the connection and says what
the session is (``session_config``: ADK's live request → the GA
``session.update``); ``openai_connection.py`` translates the events both ways.

The key comes from ``OPENAI_API_KEY`` when a connection opens; it is never
logged and never leaves for the browser (the SDK sends it only in the
``Authorization`` header of the handshake). docs/providers.md has the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from openai import AsyncOpenAI
from websockets.exceptions import ConnectionClosed, InvalidStatus

from . import live_request, model_link, played_audio
from .openai_connection import AUDIO_FORMAT, OpenAIRealtimeConnection, closed_error
from .openai_recovery import RENEW_AFTER_S, RecoveringConnection, Session
from .provider_error import ProviderError

API_KEY_ENV = "OPENAI_API_KEY"
# Input transcription is off on the service unless a model is named; this
# one is among those the GA session accepts (docs/providers.md).
TRANSCRIPTION_MODEL = "gpt-4o-mini-transcribe"
# The largest event read from the service. The SDK lifts websockets' limit
# (max_size=None); the service's events are small (audio deltas, a
# response's items as text), so 16 MiB is far above any, and a frame past it
# ends the session instead of being read whole into memory.
MAX_EVENT_BYTES = 16 * 2**20


class OpenAIRealtime(BaseLlm):
    """An OpenAI realtime model (``model`` is its name, e.g. "gpt-realtime-2")."""

    base_url: str | None = None  # None: OpenAI's own (https://api.openai.com/v1)
    ca_file: str | None = None  # PEM of the CAs to trust instead of the system's
    # A session is replaced by a new one this long after it opened, at the
    # next quiet moment (the service ends it at 60 minutes): openai_recovery.py.
    renew_after_s: float = RENEW_AFTER_S

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"gpt-.*realtime.*", r"gpt-audio.*"]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        raise NotImplementedError(
            "an OpenAI realtime model answers live connections only; the HTTP chat and the "
            "background tasks run on Gemini or the offline model (docs/providers.md)"
        )
        yield  # pragma: no cover - makes this an async generator, as the base declares

    def connect(
        self, llm_request: LlmRequest
    ) -> contextlib.AbstractAsyncContextManager[BaseLlmConnection]:
        return self._connect(llm_request)

    @contextlib.asynccontextmanager
    async def _connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
        live_request.refuse_built_in_tools(llm_request, "OpenAI Realtime")
        played = played_audio.current()

        async def open_session() -> Session:
            return await self._open_session(llm_request, played)

        connection = RecoveringConnection(
            open_session,
            await open_session(),
            model_link.current(),
            renew_after_s=self.renew_after_s,
        )
        try:
            yield connection
        finally:
            await connection.close()

    async def _open_session(
        self, llm_request: LlmRequest, played: played_audio.PlayedAudio | None
    ) -> Session:
        """One session of the service, configured for ADK's live request."""
        key = os.environ.get(API_KEY_ENV)
        if not key:
            raise ProviderError(f"no OpenAI API key: set {API_KEY_ENV}")
        client = AsyncOpenAI(api_key=key, base_url=self.base_url, max_retries=0)
        # No permessage-deflate, as the SDK has it without a limit.
        options: dict[str, Any] = {"max_size": MAX_EVENT_BYTES, "compression": None}
        if self.ca_file is not None:
            # The realtime socket is websockets', not httpx's: its TLS comes
            # from these options (the TypedDict does not declare "ssl").
            options["ssl"] = ssl.create_default_context(cafile=self.ca_file)
        manager = client.realtime.connect(
            model=self.model,
            websocket_connection_options=options,  # type: ignore[arg-type]
        )
        try:
            realtime = await manager.enter()
        except InvalidStatus as exc:
            await client.close()
            status = exc.response.status_code
            raise ProviderError(f"the model service refused the connection: HTTP {status}") from exc
        except BaseException:
            await client.close()
            raise
        connection = OpenAIRealtimeConnection(
            realtime, manual=live_request.manual_turns(llm_request), played=played
        )

        async def close() -> None:
            try:
                await connection.close()
            finally:
                await client.close()

        try:
            await realtime.send_raw(json.dumps(session_config(llm_request)))
        except ConnectionClosed as exc:  # a refused key: closed at once with 3000
            await close()
            raise closed_error(exc) from exc
        return Session(connection, close)


def session_config(llm_request: LlmRequest) -> dict[str, Any]:
    """The ``session.update`` for ADK's live request: audio at 24 kHz both
    ways, the agent's instruction and tools, the turn detection."""
    live = llm_request.live_connect_config
    audio_in: dict[str, Any] = {
        "format": AUDIO_FORMAT,
        # null: manual turns — the client commits and asks for each answer.
        "turn_detection": None
        if live_request.manual_turns(llm_request)
        else {"type": "server_vad", "create_response": True, "interrupt_response": True},
    }
    if live.input_audio_transcription is not None:
        audio_in["transcription"] = {"model": TRANSCRIPTION_MODEL}
    audio_out: dict[str, Any] = {"format": AUDIO_FORMAT}
    voice = _voice(live.speech_config)
    if voice is not None:
        audio_out["voice"] = voice
    session: dict[str, Any] = {
        "type": "realtime",
        "output_modalities": ["audio"],
        "instructions": live_request.instruction(llm_request),
        "audio": {"input": audio_in, "output": audio_out},
        "tools": function_tools(llm_request),
    }
    return {"type": "session.update", "session": session}


def function_tools(llm_request: LlmRequest) -> list[dict[str, Any]]:
    """ADK's function declarations as Realtime function tools."""
    return [
        {
            "type": "function",
            "name": decl.name,
            "description": decl.description or "",
            "parameters": _parameters(decl),
        }
        for decl in live_request.function_declarations(llm_request)
    ]


def _parameters(decl: types.FunctionDeclaration) -> dict[str, Any]:
    if isinstance(decl.parameters_json_schema, dict):
        return decl.parameters_json_schema
    if decl.parameters is not None:
        schema: dict[str, Any] = _json_schema(
            decl.parameters.model_dump(mode="json", exclude_none=True)
        )
        return schema
    return {"type": "object", "properties": {}}


def _json_schema(schema: Any) -> Any:
    """genai's ``Schema`` (types in capitals: "OBJECT") as JSON Schema."""
    if isinstance(schema, list):
        return [_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: value.lower() if key == "type" and isinstance(value, str) else _json_schema(value)
        for key, value in schema.items()
    }


def _voice(speech: types.SpeechConfig | None) -> str | None:
    prebuilt = speech.voice_config.prebuilt_voice_config if speech and speech.voice_config else None
    return prebuilt.voice_name.lower() if prebuilt and prebuilt.voice_name else None
