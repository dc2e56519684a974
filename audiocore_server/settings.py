"""Server settings: one frozen dataclass, read from the environment once."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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
# The HTTP chat endpoint's text model (the same on both backends).
CHAT_MODEL = "gemini-2.5-flash"
# The background tasks' backend agent: a text model too.
TASK_MODEL = CHAT_MODEL
OFFLINE_MODEL = "offline"
# ``--model openai:<name>`` selects OpenAI's Realtime API (docs/providers.md).
OPENAI_PREFIX = "openai:"
# OpenAI's realtime models take and give PCM16 at this rate only.
OPENAI_AUDIO_RATE = 24_000


def _page_dir() -> Path:
    """The demo page: package data once installed (audiocore-server puts it
    in audiocore_server/web/), else the checkout's web/ beside the package."""
    package = Path(__file__).resolve().parent
    installed = package / "web"
    return installed if installed.is_dir() else package.parent / "web"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


# The model services' keys, read from the environment by their client
# libraries: never in a log (gate/redaction.py).
MODEL_KEY_VARIABLES = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY")


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
    # "offline" selects the embedded offline model; "openai:<name>" an OpenAI
    # Realtime model (key from OPENAI_API_KEY); anything else is a Gemini
    # Live model name. None: Gemini when credentials are present, else offline.
    model: str | None = None
    chat_model: str | None = None  # the HTTP chat's text model; None: CHAT_MODEL
    # When set, every surface but /healthz and the page's files requires it
    # (X-API-Key, or Authorization: Bearer) or a token it minted
    # (audiocore_server/gate/credentials.py).
    api_key: str | None = None
    # Secrets that sign and verify tokens (audiocore_server/gate/tokens.py): the first
    # signs, all verify (rotation). Empty: one derived from api_key.
    token_secrets: tuple[str, ...] = ()
    # The Twilio account's Auth Token: it verifies X-Twilio-Signature on the
    # phone routes (docs/telephony.md). None: the phone routes are off.
    twilio_auth_token: str | None = None
    # A secret the Telnyx media stream's URL carries (``?token=``, in the
    # stream_url the operator gives Telnyx). None: the Telnyx route is off.
    telnyx_stream_token: str | None = None
    # The server's public base URL as Twilio calls it ("https://host[:port]"),
    # when a proxy in front changes the scheme or host Twilio signed. None:
    # the request's own (Host header; https and wss for http and ws behind
    # TLS termination only if the proxy says so in the scope's scheme).
    phone_public_url: str | None = None
    # Cancel the caller's echo of the agent in the server on every call
    # (docs/audio.md, "In the server"): a phone line returns the answer from
    # the handset's loudspeaker or the line's hybrid, and no browser cancels
    # it (docs/telephony.md, "The caller's echo").
    phone_echo_cancellation: bool = True
    # Listen beyond localhost without an API key (refused otherwise).
    insecure_no_auth: bool = False
    # The apps served (audiocore_server/agent/apps.py): the agents of a folder
    # read as `adk web DIR` reads it, and/or one agent as module:attribute;
    # neither: the demo agent, as app_name.
    agents_dir: Path | None = None
    agent: str | None = None
    # ADK plugins (module:attribute, each a BasePlugin or a class of one taken
    # without arguments) run for every app, after the app's own.
    plugins: tuple[str, ...] = ()
    app_name: str = "audiocore"
    agent_instruction: str = (
        "You are a friendly voice assistant. Answer briefly. Use the tools: "
        "get_current_time for the time, get_weather for the weather, process_payment "
        "to pay someone (the user approves each payment), change_bgm to change the "
        "background music, get_location for where the user is. For work that takes a "
        "while, start_task starts a background task and answers at once; get_task_status "
        "and cancel_task follow it up. Keep talking while tasks run."
    )
    # The tools the user approves before each call (the seed project's
    # TOOLS_REQUIRING_APPROVAL): every other tool runs at once, a browser
    # tool in the browser. A name no app has a tool of stops the start.
    # None: the demo's (get_location, process_payment), none for user apps.
    tools_requiring_approval: tuple[str, ...] | None = None
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
    # The same two for OpenAI's Realtime API (--model openai:<name>): None is
    # OpenAI's own endpoint; else "https://host:port/v1" (wss is derived).
    openai_base_url: str | None = None
    openai_ca_file: Path | None = None
    # An OpenAI realtime session is replaced by a new one, the conversation
    # rebuilt there, this long after it opened, at the next quiet moment:
    # the service ends sessions at 60 minutes (docs/providers.md).
    openai_renew_after_s: float = 3300.0
    # The model's voice (a prebuilt voice name such as "Kore") and language
    # (BCP-47, e.g. "en-US"); None: the model's defaults.
    voice: str | None = None
    language: str | None = None
    # Exact origins ("https://example.com"); same-origin and localhost are
    # always accepted unless allow_localhost is False. "*" accepts any origin.
    allowed_origins: tuple[str, ...] = ()
    allow_localhost: bool = True
    # Host names (the Host header, without the port) the server answers to,
    # besides localhost names, the bind address and the allowed origins'
    # hosts: a guard against DNS rebinding. "*" accepts any.
    allowed_hosts: tuple[str, ...] = ()
    web_dir: Path = _page_dir()

    # Limits.
    max_message_bytes: int = 4 * 1024 * 1024
    max_image_bytes: int = 2 * 1024 * 1024
    max_text_chars: int = 16_000
    max_http_body_bytes: int = 8 * 1024 * 1024  # REST and chat requests (413 past it)
    # A REST or chat request's body must arrive in full within this (408 past
    # it): a body declared and never sent would hold its socket for ever.
    body_timeout_s: float = 10.0
    max_header_bytes: int = 16 * 1024  # a request's line and headers (431 past it)
    header_timeout_s: float = 10.0  # a request's headers must arrive within this
    max_connections: int = 1000  # live sockets, in all
    max_connections_per_client: int = 50  # live sockets from one client address
    max_pending_requests: int = 100  # LiveRequestQueue entries (2 s of 20 ms audio, 5 s of 50 ms)
    max_buffered_output_s: float = 30.0  # model audio held for pacing, per socket
    max_pending_messages: int = 1000  # non-audio chunks waiting to be sent
    # A client past a message kind's rate (audiocore_server/live/budget.py) has what it
    # sends dropped; this many dropped in a row closes it (1008).
    max_dropped_messages: int = 1000
    client_rate_scale: float = 1.0  # multiplies every message kind's rate (not its burst)
    # A send that cannot complete for this long drops the client (1008).
    # Sends block only once the kernel's socket buffers are full, so a
    # client that stops reading is dropped this long after that, not after
    # it stopped (see README "Security and operations").
    send_timeout_s: float = 10.0
    # A model that owes an answer (it started one, or a tool's output went
    # to it) and sends nothing for this long is stalled: its session is
    # replaced where it can be (Gemini with a handle, OpenAI:
    # docs/providers.md), else the socket gets an error and close 1011 (the
    # session stays).
    model_stall_timeout_s: float = 10.0
    hello_timeout_s: float = 2.0  # wait this long for `start` before using defaults
    tool_timeout_s: float = 60.0  # an approval or a browser tool's result, at most
    # How long a pending tool call waits for its client to resume the session
    # after the socket is gone (then it is cancelled).
    tool_grace_s: float = 30.0
    # A session opened and never used (no event) is deleted after this long.
    unused_session_ttl_s: float = 24 * 3600.0
    max_api_sessions_per_user: int = 1000  # sessions a REST user may hold (429 past it)
    # A REST user's session not updated for this long is deleted (0: never).
    api_session_ttl_s: float = 30 * 24 * 3600.0
    # A token owner's live sockets at once and live minutes per UTC day,
    # across processes and hosts (audiocore_server/gate/quotas.py); None: no quota.
    max_live_sessions_per_owner: int | None = None
    live_minutes_per_owner_per_day: float | None = None
    # Events an open session holds in memory besides those ADK may still look
    # up (tool calls and answers, actions): the newest this many, trimmed
    # every this many (audiocore_server/storage/history.py; about 20 voice turns); the store
    # keeps all. 0: all.
    live_history_events: int = 50

    # Background tasks (audiocore_server/tasks/).
    task_model: str | None = None  # the backend agent's Gemini text model; None: TASK_MODEL
    task_offline_delay_s: float = 1.0  # offline backend model: each step takes this long
    max_queued_tasks: int = 5  # tasks waiting per owner (besides the running one)
    max_running_tasks: int = 8  # tasks this process runs at once; the rest wait queued
    max_task_owners: int = 200  # owners with work queued or running in this process
    max_task_objective_chars: int = 2_000
    max_task_result_chars: int = 4_000
    max_task_records: int = 50  # kept per owner; the oldest finished ones go first
    max_task_steps: int = 30  # model calls in one task's backend run
    max_delivery_attempts: int = 3  # claims of one outcome before its delivery fails
    task_timeout_s: float = 600.0  # a backend run longer than this fails
    task_cancel_grace_s: float = 5.0  # an aborted run that has not stopped is cancelled
    # Who does the tasks' work: "adk" (the backend agent in this server) or
    # "acp" (an Agent Client Protocol agent the server runs, docs/acp.md).
    task_backend: str = "adk"
    acp_command: str | None = None  # the agent's command line (shlex-split)
    acp_cwd: Path | None = None  # where it works; None: data_dir/task_files
    acp_projects_root: Path | None = None  # the projects a task may name (directories in it)
    acp_fs: bool = False  # serve its fs/read_text_file and fs/write_text_file (in acp_cwd)
    acp_prompt_timeout_s: float = 300.0  # a prompt without an answer by then fails its task
    acp_permission_timeout_s: float = 120.0  # an unanswered permission request is rejected
    acp_status_timeout_s: float = 5.0  # the agent's own status of a task, asked (else ours)
    acp_restart_backoff_s: float = 1.0  # the first wait before restarting a dead agent

    # Long-term memory (audiocore_server/memory/store.py, docs/memory.md), in
    # data_dir/memory.db. False: no user_memory tool, nothing stored.
    memory: bool = True
    inject_memory_context: bool = True  # the owner's profile and facts told at connect
    max_memory_injection: int = 10  # facts told at connect, the newest first
    store_to_memory: bool = True  # each finished turn kept as a searchable record
    persist_transcripts: bool = True  # spoken turns' transcriptions among them
    max_memories_per_owner: int = 1_000  # facts per owner (a clear error past it)

    # Audio.
    model_input_rate: int = 16_000
    # Audio per message to the model (re-framed chunks); None: 50 ms for
    # every model (see model_input_chunk_ms).
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
        """ "offline", "openai", "gemini-api" or "vertex"."""
        if self.model == OFFLINE_MODEL:
            return "offline"
        if self.model and self.model.startswith(OPENAI_PREFIX):
            return "openai"
        found = google_backend(os.environ)
        if found is None:
            return "offline"
        return found

    @property
    def live_model_name(self) -> str:
        backend = self.backend
        if backend == "offline":
            return OFFLINE_MODEL
        if backend == "openai":
            return (self.model or "").removeprefix(OPENAI_PREFIX)
        if self.model:
            return self.model
        return VERTEX_LIVE_MODEL if backend == "vertex" else GEMINI_API_LIVE_MODEL

    @property
    def text_backend(self) -> str:
        """Where the HTTP chat and the background tasks' text model runs: as
        the live model, but Gemini or offline beside an OpenAI live model."""
        if self.backend == "openai":
            return google_backend(os.environ) or "offline"
        return self.backend

    @property
    def chat_model_name(self) -> str:
        if self.text_backend == "offline":
            return OFFLINE_MODEL
        return self.chat_model or CHAT_MODEL

    @property
    def task_model_name(self) -> str:
        if self.text_backend == "offline":
            return OFFLINE_MODEL
        return self.task_model or TASK_MODEL

    @property
    def model_audio_rate(self) -> int:
        """The rate of the audio the model is sent (the mic path converts the
        client's rate to it in one pass)."""
        return OPENAI_AUDIO_RATE if self.backend == "openai" else self.model_input_rate

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
        # end, so push-to-talk turns wait for nothing. The offline model and
        # OpenAI's take the same: ADK's path costs the same per message
        # whatever the model (capacity, benchmarks/README.md).
        return 50

    @property
    def session_db_path(self) -> Path:
        return self.data_dir / "sessions.db"

    @property
    def memory_db_path(self) -> Path:
        return self.data_dir / "memory.db"

    def __repr__(self) -> str:
        """Fit for a log or a test report: no API key, no database password."""
        shown = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if (
                field.name in ("api_key", "twilio_auth_token", "telnyx_stream_token")
                and value is not None
            ):
                value = "***"
            elif field.name == "token_secrets" and value:
                value = ("***",) * len(value)
            elif field.name == "database_url" and value is not None:
                value = redact_url(value)
            shown.append(f"{field.name}={value!r}")
        return f"Settings({', '.join(shown)})"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, /, **overrides: Any) -> Settings:
        """Settings from AUDIOCORE_* variables; keyword overrides win."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            name = ENV_PREFIX + field.name.upper()
            raw = env.get(name)
            if raw is None:
                continue
            values[field.name] = parse_value(field.name, str(field.type), raw, source=name)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]

    def problems(self) -> list[str]:
        """What is wrong with these settings, one line each (empty: fine)."""
        found = []
        if not 0 <= self.port <= 65535:
            found.append(f"port: expected 0 to 65535, got {self.port}")
        if self.workers < 1:
            found.append(f"workers: expected at least 1, got {self.workers}")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            limit = field.name.startswith(
                (
                    "max_",
                    "tool_timeout",
                    "body_timeout",
                    "send_timeout",
                    "model_stall",
                    "openai_renew",
                    "header_",
                    "task_timeout",
                    "task_cancel",
                    "acp_prompt",
                    "acp_permission",
                    "acp_status",
                    "acp_restart",
                )
            )
            if limit and isinstance(value, (int, float)) and not value > 0:
                found.append(f"{field.name}: expected more than 0, got {value}")
        for origin in self.allowed_origins:
            if origin != "*" and not origin.startswith(("http://", "https://")):
                found.append(f"allowed_origins: expected http(s)://host[:port], got {origin!r}")
        if not self.client_rate_scale > 0:
            found.append(f"client_rate_scale: expected more than 0, got {self.client_rate_scale}")
        if self.live_history_events < 0:
            found.append(
                f"live_history_events: expected 0 (all) or more, got {self.live_history_events}"
            )
        if self.api_session_ttl_s < 0:
            found.append(
                f"api_session_ttl_s: expected 0 (never) or more, got {self.api_session_ttl_s}"
            )
        if self.task_offline_delay_s < 0:
            found.append(
                f"task_offline_delay_s: expected 0 or more, got {self.task_offline_delay_s}"
            )
        if self.backend == "openai" and not self.live_model_name:
            found.append(f"model: expected {OPENAI_PREFIX}<model name>, got {self.model!r}")
        found.extend(self._task_backend_problems())
        found.extend(self._model_service_problems())
        if self.api_key is not None and len(self.api_key) < 16:
            found.append("api_key: expected at least 16 characters")
        minutes = self.live_minutes_per_owner_per_day
        if minutes is not None and not minutes > 0:
            found.append(f"live_minutes_per_owner_per_day: expected more than 0, got {minutes}")
        if self.telnyx_stream_token is not None and len(self.telnyx_stream_token) < 16:
            found.append("telnyx_stream_token: expected at least 16 characters")
        public = self.phone_public_url
        if public is not None and not re.fullmatch(r"https?://[^/?#\s]+", public):
            found.append(f"phone_public_url: expected http(s)://host[:port], got {public!r}")
        if any(len(secret) < 32 for secret in self.token_secrets):
            found.append("token_secrets: expected at least 32 characters each")
        if self.api_key is None and not self.insecure_no_auth and not is_local_host(self.host):
            found.append(
                f"host: {self.host} is reachable from other machines and no API key is set: "
                "set AUDIOCORE_API_KEY, or pass --insecure-no-auth to serve it without one"
            )
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            probe = self.data_dir / ".write-test"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            found.append(f"data_dir: {self.data_dir} is not a writable directory ({exc.strerror})")
        return found

    def _task_backend_problems(self) -> list[str]:
        if self.task_backend not in TASK_BACKENDS:
            return [
                f"task_backend: expected one of {', '.join(TASK_BACKENDS)}, "
                f"got {self.task_backend!r}"
            ]
        if self.task_backend != "acp":
            return []
        try:
            command = shlex.split(self.acp_command or "")
        except ValueError as exc:
            return [f"acp_command: cannot split {self.acp_command!r} ({exc})"]
        if not command:
            return ['acp_command: expected the ACP agent\'s command line with task_backend "acp"']
        if self.acp_cwd is not None and not self.acp_cwd.is_dir():
            return [f"acp_cwd: {self.acp_cwd} is not a directory"]
        if self.acp_projects_root is not None and not self.acp_projects_root.is_dir():
            return [f"acp_projects_root: {self.acp_projects_root} is not a directory"]
        return []

    def _model_service_problems(self) -> list[str]:
        """Where a model service is reached and the CAs trusted there: told
        at startup, not as a failure of every live session."""
        found = []
        for service in ("gemini", "openai"):
            url = getattr(self, f"{service}_base_url")
            if url is not None:
                parts = urlsplit(url)
                if parts.scheme not in ("http", "https") or not parts.hostname:
                    found.append(
                        f"{service}_base_url: expected https://host[:port][/path], got {url!r}"
                    )
            ca_file = getattr(self, f"{service}_ca_file")
            if ca_file is not None and not ca_file.is_file():
                found.append(f"{service}_ca_file: {ca_file} is not a file")
        return found


TASK_BACKENDS = ("adk", "acp")


def is_local_host(host: str) -> bool:
    """Whether a bind address is reachable from this machine only."""
    return host.strip("[]").lower() in ("localhost", "::1") or host.startswith("127.")


def is_postgres_url(url: str | None) -> bool:
    """Whether ``url`` (an ADK/SQLAlchemy database URL) names PostgreSQL."""
    return bool(url) and urlsplit(url or "").scheme.split("+", 1)[0] in ("postgresql", "postgres")


def redact_url(url: str) -> str:
    """A database URL fit for a log: its password replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def parse_value(name: str, kind: str, raw: str, *, source: str) -> object:
    """A setting's value from text (an environment variable or an option);
    ``ValueError`` naming ``source`` if it does not parse."""
    try:
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
        if "float" in kind:
            return float(raw)
    except ValueError:
        expected = {"int": "an integer", "bool": "a boolean"}.get(kind, "a number")
        raise ValueError(f"{source}: expected {expected}, got {raw!r}") from None
    return raw or None
