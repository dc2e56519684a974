"""``python -m server``: run the app under uvicorn.

Every option also reads an environment variable (AUDIOCORE_HOST, AUDIOCORE_PORT,
AUDIOCORE_WORKERS, AUDIOCORE_MODEL, AUDIOCORE_DATA_DIR, AUDIOCORE_DATABASE_URL,
AUDIOCORE_ALLOWED_ORIGINS, AUDIOCORE_GEMINI_BASE_URL, AUDIOCORE_GEMINI_CA_FILE,
AUDIOCORE_VOICE, AUDIOCORE_LANGUAGE, ...); the command line wins.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from .app import create_app
from .settings import ENV_PREFIX, OFFLINE_MODEL, Settings


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
    app = create_app(Settings.from_env())
    _tune_gc()
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m server", description=__doc__)
    parser.add_argument("--host", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default 8000)")
    parser.add_argument(
        "--workers",
        type=int,
        help="worker processes sharing the port (default 1); sessions move between "
        "them safely through a lease in the data directory (SQLite sessions only)",
    )
    parser.add_argument("--model", help='"offline", or a Gemini Live model name')
    parser.add_argument(
        "--gemini-base-url",
        help="where the Gemini Live API is reached (default: Google's); e.g. a proxy or "
        "https://127.0.0.1:PORT for the local endpoint (docs/gemini-live.md)",
    )
    parser.add_argument(
        "--gemini-ca-file", type=Path, help="PEM file of the CAs to trust for --gemini-base-url"
    )
    parser.add_argument("--voice", help='the model\'s prebuilt voice, e.g. "Kore"')
    parser.add_argument("--language", help='the model\'s language (BCP-47), e.g. "en-US"')
    parser.add_argument("--data-dir", type=Path, help="where the SQLite session file lives")
    parser.add_argument("--database-url", help="ADK async database URL for sessions")
    parser.add_argument(
        "--allowed-origins", help="comma-separated extra origins allowed to open /ws"
    )
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    origins = (
        tuple(o.strip() for o in args.allowed_origins.split(",") if o.strip())
        if args.allowed_origins
        else None
    )
    overrides = {
        "host": args.host,
        "port": args.port,
        "workers": args.workers,
        "model": args.model,
        "gemini_base_url": args.gemini_base_url,
        "gemini_ca_file": args.gemini_ca_file,
        "voice": args.voice,
        "language": args.language,
        "data_dir": args.data_dir,
        "database_url": args.database_url,
        "allowed_origins": origins,
    }
    settings = Settings.from_env(**overrides)
    if settings.workers < 1:
        parser.error(f"--workers: expected at least 1, got {settings.workers}")
    if settings.model not in (None, OFFLINE_MODEL) and settings.backend == "offline":
        # Without credentials the server would quietly run the offline model.
        parser.error(
            f"--model {settings.model}: expected Google credentials (GOOGLE_API_KEY, or "
            "GOOGLE_GENAI_USE_VERTEXAI=1 with GOOGLE_CLOUD_PROJECT), found none"
        )
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    options = dict(
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        ws_max_size=settings.max_message_bytes,
        # PCM barely compresses; deflate would cost CPU on every audio frame.
        ws_per_message_deflate=False,
        ws_ping_interval=20,
        ws_ping_timeout=20,
    )
    if settings.workers == 1:
        app = create_app(settings)
        _tune_gc()
        uvicorn.run(app, **options)
        return
    for name, value in overrides.items():
        if value is not None:
            text = ",".join(value) if isinstance(value, tuple) else str(value)
            os.environ[ENV_PREFIX + name.upper()] = text
    uvicorn.run(
        "server.__main__:worker_app",
        factory=True,
        workers=settings.workers,
        **options,
    )


if __name__ == "__main__":
    main()
