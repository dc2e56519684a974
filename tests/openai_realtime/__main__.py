"""``python -m tests.openai_realtime``: run the local OpenAI Realtime endpoint.

Prints one JSON line (baseUrl, caFile, apiKey, pid) once it listens, then
serves until interrupted. From the repository root:

    python -m tests.openai_realtime --port 9444 &
    OPENAI_API_KEY=sk-local-openai-realtime-key python -m server \\
        --model openai:gpt-realtime-2 \\
        --openai-base-url https://127.0.0.1:9444/v1 --openai-ca-file <caFile>
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

from .server import EndpointConfig, LocalOpenAIRealtime


def main(argv: list[str] | None = None) -> None:
    defaults = EndpointConfig()
    parser = argparse.ArgumentParser(
        prog="python -m tests.openai_realtime",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=0, help="default: any free port")
    parser.add_argument("--cert-dir", type=Path, help="where to write the self-signed cert")
    parser.add_argument("--api-key", action="append", help="accepted key (repeatable)")
    parser.add_argument(
        "--speed", type=float, default=defaults.speed, help="answers at this multiple of real time"
    )
    parser.add_argument(
        "--burst-ms", type=int, default=defaults.burst_ms, help="answers in bursts of this much"
    )
    args = parser.parse_args(argv)
    config = dataclasses.replace(
        defaults,
        api_keys=frozenset(args.api_key) if args.api_key else defaults.api_keys,
        speed=args.speed,
        burst_ms=args.burst_ms,
    )
    cert_dir = args.cert_dir or Path(tempfile.mkdtemp(prefix="openai-realtime-"))
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with LocalOpenAIRealtime(config, cert_dir=cert_dir, port=args.port) as endpoint:
        info = {
            "baseUrl": endpoint.base_url,
            "caFile": str(endpoint.ca_file),
            "apiKey": endpoint.api_key,
            "pid": os.getpid(),
        }
        print(json.dumps(info), flush=True)
        stop.wait()
    print("stopped", file=sys.stderr)


if __name__ == "__main__":
    main()
