"""``audiocore-server`` (``python -m server`` in a checkout): run the app under uvicorn.

Every setting (audiocore_server/settings.py) reads an environment variable,
AUDIOCORE_<NAME>; the command line's options win. A bad setting ends the
command with one line saying which and why.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import logging
import os
import sys
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette

from .app import create_app
from .gate.http_limits import BoundedH11Protocol, BoundedSendWebSockets
from .ops.otel import configure_from_env
from .settings import ENV_PREFIX, OFFLINE_MODEL, Settings, parse_value


def _tune_gc() -> None:
    # Garbage collection pauses stall the event loop, and every stream with
    # it: at 100 sessions full collections took 35-250 ms. Objects alive now
    # (imports) are frozen out of the collector's walk, and collections run
    # less often (ADK allocates many short-lived pydantic objects per event,
    # which reference counting frees without the collector).
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def worker_app() -> Starlette:
    """The app of one worker process (``--workers`` > 1): uvicorn starts each
    worker from this import string, and the parent passed the command line's
    settings down in AUDIOCORE_* variables."""
    configure_from_env()
    app = create_app(Settings.from_env())
    _tune_gc()
    return app


def uvicorn_options(settings: Settings, *, log_level: str = "info") -> dict[str, Any]:
    """How uvicorn serves the app: bounded request heads (h11, see
    http_limits.py), WebSocket limits (a bounded send buffer) and pings."""
    return {
        "host": settings.host,
        "port": settings.port,
        "log_level": log_level,
        # The class itself when it already has the timeout: worker processes
        # must import it by name.
        "http": (
            BoundedH11Protocol
            if settings.header_timeout_s == BoundedH11Protocol.header_timeout_s
            else BoundedH11Protocol.with_timeout(settings.header_timeout_s)
        ),
        "h11_max_incomplete_event_size": settings.max_header_bytes,
        "ws": BoundedSendWebSockets,
        "ws_max_size": settings.max_message_bytes,
        # PCM barely compresses; deflate would cost CPU on every audio frame.
        "ws_per_message_deflate": False,
        "ws_ping_interval": 20,
        "ws_ping_timeout": 20,
    }


# The command line: (option, settings field, help). Every field of Settings
# can also be set in the environment, as AUDIOCORE_<FIELD>; the command line
# wins. (The API key and the token secrets only there: a command line is
# visible to every user.)
OPTIONS = (
    ("--host", "host", "bind address (default 127.0.0.1)"),
    ("--port", "port", "port (default 8000)"),
    (
        "--workers",
        "workers",
        "worker processes sharing the port (default 1); sessions move between them "
        "through a lease in the data directory (or the database)",
    ),
    (
        "--model",
        "model",
        '"offline", "openai:<name>" (OpenAI Realtime), or a Gemini Live model name '
        "(default: Gemini with a key)",
    ),
    (
        "--agents-dir",
        "agents_dir",
        "serve the ADK agents of this folder, each subfolder an app (as `adk web DIR` "
        "reads it); default: the demo agent",
    ),
    ("--agent", "agent", "serve this ADK agent (or App), given as module:attribute"),
    (
        "--plugin",
        "plugins",
        "comma-separated ADK plugins (module:attribute) run for every app, after the app's own",
    ),
    (
        "--chat-model",
        "chat_model",
        "the HTTP chat's Gemini text model (default: each agent's own model)",
    ),
    (
        "--gemini-base-url",
        "gemini_base_url",
        "where the Gemini Live API is reached (default: Google's); e.g. a proxy or "
        "https://127.0.0.1:PORT for the local endpoint (docs/gemini-live.md)",
    ),
    ("--gemini-ca-file", "gemini_ca_file", "PEM file of the CAs to trust for --gemini-base-url"),
    (
        "--openai-base-url",
        "openai_base_url",
        "where --model openai:… reaches OpenAI's Realtime API: https://host:port/v1 "
        "(docs/providers.md)",
    ),
    ("--openai-ca-file", "openai_ca_file", "PEM file of the CAs to trust for --openai-base-url"),
    ("--voice", "voice", 'the model\'s prebuilt voice, e.g. "Kore"'),
    ("--language", "language", 'the model\'s language (BCP-47), e.g. "en-US"'),
    ("--data-dir", "data_dir", "where the SQLite session and lease files live (default ./data)"),
    ("--database-url", "database_url", "ADK async database URL for sessions (instead of SQLite)"),
    ("--memory", "memory", "long-term memory per user (default true; false: none)"),
    (
        "--inject-memory-context",
        "inject_memory_context",
        "tell the model its user's profile and newest facts at connect (default true)",
    ),
    ("--max-memory-injection", "max_memory_injection", "facts told at connect (default 10)"),
    ("--store-to-memory", "store_to_memory", "store each finished turn in memory (default true)"),
    (
        "--persist-transcripts",
        "persist_transcripts",
        "store spoken turns' transcriptions too (default true)",
    ),
    ("--allowed-origins", "allowed_origins", "comma-separated extra origins (https://host:port)"),
    ("--allowed-hosts", "allowed_hosts", "comma-separated extra host names the server answers to"),
    (
        "--tools-requiring-approval",
        "tools_requiring_approval",
        "comma-separated tools the user approves before each call (default: the demo's "
        '"get_location,process_payment", none for --agents-dir/--agent; empty: none)',
    ),
    ("--max-connections", "max_connections", "live sockets in all (default 1000)"),
    (
        "--max-connections-per-client",
        "max_connections_per_client",
        "live sockets per client address (default 50)",
    ),
    ("--task-backend", "task_backend", 'who does background tasks: "adk" (default) or "acp"'),
    ("--acp-command", "acp_command", "the ACP agent's command line, with --task-backend acp"),
    ("--acp-cwd", "acp_cwd", "the ACP agent's working directory (default: DATA_DIR/task_files)"),
    (
        "--acp-projects-root",
        "acp_projects_root",
        "the directory whose subdirectories are the projects a task may name",
    ),
    ("--acp-fs", "acp_fs", "1: serve the ACP agent's file reads and writes inside --acp-cwd"),
    (
        "--acp-prompt-timeout-s",
        "acp_prompt_timeout_s",
        "a task whose ACP prompt has no answer by then fails (default 300)",
    ),
)
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def program_name(started: str) -> str:
    """The command as its user typed it, from ``sys.argv[0]``: ``python -m
    <package>`` for a ``__main__.py`` (``python -m server`` in a checkout),
    else the console script, ``audiocore-server``."""
    path = Path(started)
    if path.name == "__main__.py":
        return f"python -m {path.parent.name}"
    return "audiocore-server"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=program_name(sys.argv[0]), description=__doc__)
    for option, field, help_text in OPTIONS:
        parser.add_argument(option, dest=field, help=help_text)
    parser.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        default=None,
        help="listen beyond localhost without an API key (anyone who reaches it may use it)",
    )
    args = parser.parse_args(argv)
    kinds = {f.name: str(f.type) for f in dataclasses.fields(Settings)}
    overrides: dict[str, object] = {}
    try:
        for option, field, _ in OPTIONS:
            raw = getattr(args, field)
            if raw is not None:
                overrides[field] = parse_value(field, kinds[field], raw, source=option)
        settings = Settings.from_env(**overrides, insecure_no_auth=args.insecure_no_auth)
    except (ValueError, TypeError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    problems = settings.problems()
    if problems:
        parser.exit(2, "".join(f"{parser.prog}: error: {p}\n" for p in problems))
    if settings.backend == "openai" and not os.environ.get("OPENAI_API_KEY"):
        parser.exit(2, f"{parser.prog}: error: --model {settings.model}: expected OPENAI_API_KEY\n")
    if settings.model not in (None, OFFLINE_MODEL) and settings.backend == "offline":
        # Without credentials the server would quietly run the offline model.
        parser.exit(
            2,
            f"{parser.prog}: error: --model {settings.model}: expected Google credentials "
            "(GOOGLE_API_KEY, or GOOGLE_GENAI_USE_VERTEXAI=1 with GOOGLE_CLOUD_PROJECT), "
            "found none\n",
        )
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    if settings.workers == 1:
        configure_from_env()  # each worker does it for itself (worker_app)
    options = uvicorn_options(settings, log_level=args.log_level)
    try:
        # Built here whatever the workers: a setting only the app can check
        # (a tool name) ends the command before any worker starts.
        app = create_app(settings)
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    if settings.workers == 1:
        _tune_gc()
        uvicorn.run(app, **options)
        return
    # Worker processes read their settings from the environment.
    for field, raw_value in vars(args).items():
        if field in overrides and raw_value is not None:
            os.environ[ENV_PREFIX + field.upper()] = str(raw_value)
    uvicorn.run(
        "audiocore_server.__main__:worker_app",
        factory=True,
        workers=settings.workers,
        **options,
    )


if __name__ == "__main__":
    main()
