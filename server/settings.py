"""Server settings: one frozen dataclass, read from the environment once."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

ENV_PREFIX = "AUDIOCORE_"

# Model names used when Google credentials are present (``--model`` picks
# another). Both are Live models that answer in speech.
# Gemini API: "the default for most low-latency voice agent experiences",
# stable, last updated September 2026 —
# https://ai.google.dev/gemini-api/docs/models/gemini-3.8-live
GEMINI_API_LIVE_MODEL = "gemini-3.8-live"
# Vertex AI (Gemini Enterprise Agent Platform): generally available, model ID
# gemini-3.8-live (gemini-live-2.5-flash-native-audio is the GA 2.5 baseline) —
# https://docs.cloud.google.com/gemini-enterprise-agent-platform/models/guides/gemini-3-8-live
VERTEX_LIVE_MODEL = "gemini-3.8-live"
OFFLINE_MODEL = "offline"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def google_backend(env: Mapping[str, str]) -> str | None:
    """Which Google backend the environment configures: "vertex", "gemini-api" or None."""
    vertex = _truthy(env.get("GOOGLE_GENAI_USE_ENTERPRISE")) or _truthy(
        env.get("GOOGLE_GENAI_USE_VERTEXAI")
    )
    if vertex and env.get("GOOGLE_CLOUD_PROJECT"):
        return "vertex"
    if env.get("GOOGLE_API_KEY") or env.get("GEMINI_API_KEY"):
        return "gemini-api"
    return None


@dataclasses.dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1  # uvicorn worker processes (python -m server only)
    # "offline" selects the embedded offline model; anything else is a Gemini
    # Live model name. None: Gemini when credentials are present, else offline.
    model: str | None = None
    app_name: str = "audiocore"
    agent_instruction: str = (
        "You are a friendly voice assistant. Answer briefly. Use the tools: "
        "get_current_time for the time, get_weather for the weather, process_payment "
        "to pay someone (the user approves each payment), change_bgm to change the "
        "background music, get_location for where the user is."
    )
    data_dir: Path = Path("data")
    # Any ADK async database URL (sqlite+aiosqlite:///..., postgresql+asyncpg://...).
    # None: ADK's SqliteSessionService on data_dir/sessions.db.
    database_url: str | None = None
    # Where ADK's Gemini model reaches the Live API: None is Google's own
    # endpoint; a proxy, a regional endpoint or a local stand-in
    # (docs/gemini-live.md) is "https://host:port". genai always connects
    # with wss, whatever the scheme.
    gemini_base_url: str | None = None
    # A PEM file of the CAs to trust on that connection (instead of the
    # system's and certifi's), e.g. a local endpoint's self-signed cert.
    gemini_ca_file: Path | None = None
    # The model's voice (a prebuilt voice name such as "Kore") and language
    # (BCP-47, e.g. "en-US"); None: the model's defaults.
    voice: str | None = None
    language: str | None = None
    # Exact origins ("https://example.com"); same-origin and localhost are
    # always accepted unless allow_localhost is False. "*" accepts any origin.
    allowed_origins: tuple[str, ...] = ()
    allow_localhost: bool = True
    web_dir: Path = Path(__file__).resolve().parent.parent / "web"

    # Limits.
    max_message_bytes: int = 4 * 1024 * 1024
    max_image_bytes: int = 2 * 1024 * 1024
    max_text_chars: int = 16_000
    max_pending_requests: int = 100  # LiveRequestQueue entries (2 s of 20 ms audio, 5 s of 50 ms)
    max_buffered_output_s: float = 30.0  # model audio held for pacing, per socket
    max_pending_messages: int = 1000  # non-audio chunks waiting to be sent
    send_timeout_s: float = 10.0  # a client that reads nothing for this long is dropped
    hello_timeout_s: float = 2.0  # wait this long for `start` before using defaults
    tool_timeout_s: float = 60.0  # an approval or a browser tool's result, at most
    # How long a pending tool call waits for its client to resume the session
    # after the socket is gone (then it is cancelled).
    tool_grace_s: float = 30.0

    # Audio.
    model_input_rate: int = 16_000
    # Audio per message to the model (re-framed chunks); None: 20 ms for the
    # offline model, 50 ms for Gemini (see model_input_chunk_ms).
    input_chunk_ms: int | None = None
    output_frame_ms: int = 40  # paced frames sent to the client (size only: no added delay)
    output_lead_ms: int = 150  # how far ahead of real-time playback we may send
    # The turn detection of a client whose `start` does not choose one
    # (`turnDetection`): False "server" (the model's voice activity
    # detection), True "manual" (the client's activity_start/activity_end).
    push_to_talk: bool = False

    # Measurement (benchmarks): keep per-chunk latency samples and write a
    # summary of all connections to stats_path at shutdown.
    collect_timings: bool = False
    stats_path: Path | None = None

    @property
    def backend(self) -> str:
        """ "offline", "gemini-api" or "vertex"."""
        if self.model == OFFLINE_MODEL:
            return "offline"
        found = google_backend(os.environ)
        if found is None:
            return "offline"
        return found

    @property
    def live_model_name(self) -> str:
        backend = self.backend
        if backend == "offline":
            return OFFLINE_MODEL
        if self.model:
            return self.model
        return VERTEX_LIVE_MODEL if backend == "vertex" else GEMINI_API_LIVE_MODEL

    @property
    def model_input_chunk_ms(self) -> int:
        if self.input_chunk_ms is not None:
            return self.input_chunk_ms
        # Every message to Gemini costs about 160 µs of CPU in ADK and genai
        # (pydantic, JSON, base64, TLS) whatever its size; at 20 ms that is
        # 8 ms of CPU per second of a session's audio, and the server's main
        # cost (benchmarks/README.md). 50 ms chunks — the "balanced" size ADK
        # recommends (https://google.github.io/adk-docs/streaming/dev-guide/part5)
        # — cost 2.5 times less; a turn's last partial chunk is flushed at its
        # end, so push-to-talk turns wait for nothing.
        return 20 if self.backend == "offline" else 50

    @property
    def session_db_path(self) -> Path:
        return self.data_dir / "sessions.db"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Settings from AUDIOCORE_* variables; keyword overrides win."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(ENV_PREFIX + field.name.upper())
            if raw is None:
                continue
            values[field.name] = _parse(field, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def _parse(field: dataclasses.Field[object], raw: str) -> object:
    kind = str(field.type)
    if "tuple" in kind:
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if "Path" in kind:
        return Path(raw)
    if kind == "bool":
        return _truthy(raw)
    if kind == "int":
        return int(raw)
    if kind == "int | None":
        return int(raw) if raw.strip() else None
    if kind == "float":
        return float(raw)
    return raw or None
