"""Which model service runs, from the settings: the one place outside the
provider modules that names them. The offline models live in ``offline/``
(a test double, above this wing), so they are handed in."""

from __future__ import annotations

from collections.abc import Callable

from google.adk.models.base_llm import BaseLlm
from google.adk.models.google_llm import Gemini

from ..settings import Settings
from .gemini import LiveGemini, gemini_client_kwargs
from .openai_realtime import OpenAIRealtime

OfflineModel = Callable[[], BaseLlm]


def live_model(settings: Settings, offline: OfflineModel) -> BaseLlm:
    """The live model: OpenAI Realtime, the offline one, or Gemini Live."""
    if settings.backend == "openai":
        return OpenAIRealtime(
            model=settings.live_model_name,
            base_url=settings.openai_base_url,
            ca_file=str(settings.openai_ca_file) if settings.openai_ca_file else None,
            renew_after_s=settings.openai_renew_after_s,
        )
    if settings.backend == "offline":
        return offline()
    return LiveGemini(
        model=settings.live_model_name,
        base_url=settings.gemini_base_url,
        client_kwargs=gemini_client_kwargs(settings),
    )


def text_model(settings: Settings, name: str, offline: OfflineModel) -> BaseLlm:
    """A text model (the HTTP chat's, the task agent's): Gemini ``name``,
    reached as the live one is, or the offline one."""
    if settings.text_backend == "offline":
        return offline()
    return Gemini(
        model=name, base_url=settings.gemini_base_url, client_kwargs=gemini_client_kwargs(settings)
    )
