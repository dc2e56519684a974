"""``python -m tests.gemini_live``: run the local Gemini Live endpoint.

Prints one JSON line (url, caFile, apiKey, pid) once it listens, then serves
until interrupted. From the repository root:

    python -m tests.gemini_live --port 9443 &
    GOOGLE_API_KEY=local-gemini-live-key python -m server --model gemini-3.8-live \\
        --gemini-base-url https://127.0.0.1:9443 --gemini-ca-file <caFile>
"""

from __future__ import annotations

import dataclasses

from tests.local_endpoint import cert_dir, endpoint_parser, serve_until_signalled

from .server import EndpointConfig, LocalGeminiLive


def main(argv: list[str] | None = None) -> None:
    defaults = EndpointConfig()
    parser = endpoint_parser("python -m tests.gemini_live", __doc__, defaults)
    parser.add_argument(
        "--connection-lifetime",
        type=float,
        default=defaults.connection_lifetime_s,
        help="seconds before a connection is closed 1011; goAway comes --go-away-notice before",
    )
    parser.add_argument("--go-away-notice", type=float, default=defaults.go_away_notice_s)
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
    endpoint = LocalGeminiLive(config, cert_dir=cert_dir(args, "gemini-live-"), port=args.port)
    serve_until_signalled(
        endpoint, lambda e: {"url": e.url, "caFile": str(e.ca_file), "apiKey": e.api_key}
    )


if __name__ == "__main__":
    main()
