"""``python -m tests.openai_realtime``: run the local OpenAI Realtime endpoint.

Prints one JSON line (baseUrl, caFile, apiKey, pid) once it listens, then
serves until interrupted. From the repository root:

    python -m tests.openai_realtime --port 9444 &
    OPENAI_API_KEY=sk-local-openai-realtime-key python -m server \\
        --model openai:gpt-realtime-2 \\
        --openai-base-url https://127.0.0.1:9444/v1 --openai-ca-file <caFile>
"""

from __future__ import annotations

import dataclasses

from tests.local_endpoint import cert_dir, endpoint_parser, serve_until_signalled

from .server import EndpointConfig, LocalOpenAIRealtime


def main(argv: list[str] | None = None) -> None:
    defaults = EndpointConfig()
    parser = endpoint_parser("python -m tests.openai_realtime", __doc__, defaults)
    args = parser.parse_args(argv)
    config = dataclasses.replace(
        defaults,
        api_keys=frozenset(args.api_key) if args.api_key else defaults.api_keys,
        speed=args.speed,
        burst_ms=args.burst_ms,
    )
    endpoint = LocalOpenAIRealtime(
        config, cert_dir=cert_dir(args, "openai-realtime-"), port=args.port
    )
    serve_until_signalled(
        endpoint,
        lambda e: {"baseUrl": e.base_url, "caFile": str(e.ca_file), "apiKey": e.api_key},
    )


if __name__ == "__main__":
    main()
