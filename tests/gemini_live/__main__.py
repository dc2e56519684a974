"""``python -m tests.gemini_live``: run the local Gemini Live endpoint.

Prints one JSON line (url, caFile, apiKey, pid) once it listens, then serves
until interrupted. From the repository root:

    python -m tests.gemini_live --port 9443 &
    GOOGLE_API_KEY=local-gemini-live-key python -m server --model gemini-3.8-live \\
        --gemini-base-url https://127.0.0.1:9443 --gemini-ca-file <caFile>
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

from .server import EndpointConfig, LocalGeminiLive


def main(argv: list[str] | None = None) -> None:
    defaults = EndpointConfig()
    parser = argparse.ArgumentParser(
        prog="python -m tests.gemini_live",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=0, help="default: any free port")
    parser.add_argument("--cert-dir", type=Path, help="where to write the self-signed cert")
    parser.add_argument("--api-key", action="append", help="accepted key (repeatable)")
    parser.add_argument(
        "--connection-lifetime",
        type=float,
        default=defaults.connection_lifetime_s,
        help="seconds before a connection is closed 1011; goAway comes --go-away-notice before",
    )
    parser.add_argument("--go-away-notice", type=float, default=defaults.go_away_notice_s)
    parser.add_argument(
        "--speed", type=float, default=defaults.speed, help="answers at this multiple of real time"
    )
    parser.add_argument(
        "--burst-ms", type=int, default=defaults.burst_ms, help="answers in bursts of this much"
    )
    parser.add_argument(
        "--audio-chunk-ms", type=int, default=defaults.audio_chunk_ms, help="audio per message"
    )
    args = parser.parse_args(argv)
    config = dataclasses.replace(
        defaults,
        api_keys=frozenset(args.api_key) if args.api_key else defaults.api_keys,
        connection_lifetime_s=args.connection_lifetime,
        go_away_notice_s=args.go_away_notice,
        speed=args.speed,
        burst_ms=args.burst_ms,
        audio_chunk_ms=args.audio_chunk_ms,
    )
    cert_dir = args.cert_dir or Path(tempfile.mkdtemp(prefix="gemini-live-"))
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with LocalGeminiLive(config, cert_dir=cert_dir, port=args.port) as endpoint:
        info = {
            "url": endpoint.url,
            "caFile": str(endpoint.ca_file),
            "apiKey": endpoint.api_key,
            "pid": os.getpid(),
        }
        print(json.dumps(info), flush=True)
        stop.wait()
    print("stopped", file=sys.stderr)


if __name__ == "__main__":
    main()
