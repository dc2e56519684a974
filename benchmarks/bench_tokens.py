"""What checking a token costs a request or a socket (audiocore_server/gate/tokens.py,
audiocore_server/gate/credentials.py): µs per check, median of repeated timings.

    python benchmarks/bench_tokens.py --repeat 9

Cases: a valid token with one secret; with two (rotation), signed by the
second, so both HMACs run; refusals (tampered signature, an oversized and
a malformed token: refused before any HMAC); the whole guard's check of a
request (headers parsed, token verified, owner compared). Anchors, timed in
the same run: one HMAC-SHA256 of the token's payload part and a
constant-time compare (the floor of any HMAC token), and the API key's
compare alone. Inputs are built outside the timed loops; each case's result
is checked after them.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audiocore_server.gate.credentials import Credentials, Principal  # noqa: E402
from audiocore_server.gate.tokens import TokenLimits, TokenRefused, TokenSigner  # noqa: E402
from audiocore_server.settings import Settings

NEW = b"n" * 40
OLD = b"o" * 40
KEY = "k" * 32


def per_call_us(call: Callable[[], object], number: int, repeat: int) -> float:
    times = timeit.repeat(call, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e6


def refused(signer: TokenSigner, token: str) -> Callable[[], object]:
    def call() -> object:
        try:
            return signer.verify(token)
        except TokenRefused as exc:
            return exc

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--smoke", action="store_true", help="a few calls each (CI)")
    args = parser.parse_args()
    number, repeat = (200, 3) if args.smoke else (args.number, args.repeat)

    one = TokenSigner([NEW])
    two = TokenSigner([NEW, OLD])
    limits = TokenLimits(2, 30.0, ("ws", "live", "rest"))
    token, claims = one.mint("alice", 600, limits)
    old_token, old_claims = TokenSigner([OLD]).mint("alice", 600, limits)
    body, signature = token.split(".")
    tampered = f"{body}.{'A' if signature[0] != 'A' else 'B'}{signature[1:]}"
    huge = "A" * 100_000
    malformed = token.replace(".", "!")
    credentials = Credentials(Settings(api_key=KEY, token_secrets=(NEW.decode(),)))
    scope = {
        "type": "http",
        "path": "/apps/audiocore/users/alice/sessions",
        "method": "GET",
        "query_string": b"",
        "headers": [
            (b"host", b"localhost:8000"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"accept", b"*/*"),
        ],
    }
    key = KEY.encode()
    given_key = bytes(key)
    given_signature = signature.encode()

    def anchor_hmac() -> bool:
        digest = hmac.new(NEW, body.encode("ascii"), hashlib.sha256).digest()
        return hmac.compare_digest(digest, given_signature[:32])

    cases: list[tuple[str, Callable[[], object], Callable[[object], bool]]] = [
        ("anchor: one HMAC-SHA256 + compare", anchor_hmac, lambda r: r is False),
        ("anchor: API key compare", lambda: hmac.compare_digest(given_key, key), bool),
        ("valid, 1 secret", lambda: one.verify(token), lambda r: r == claims),
        (
            "valid, 2 secrets (old one signed)",
            lambda: two.verify(old_token),
            lambda r: r == old_claims,
        ),
        (
            "refused: tampered signature",
            refused(one, tampered),
            lambda r: isinstance(r, TokenRefused),
        ),
        ("refused: 100 kB", refused(one, huge), lambda r: isinstance(r, TokenRefused)),
        ("refused: malformed", refused(one, malformed), lambda r: isinstance(r, TokenRefused)),
        (
            "guard: request → principal",
            lambda: credentials.check(scope, "rest"),
            lambda r: isinstance(r, Principal) and r.owner == "alice",
        ),
    ]
    floor = None
    print(f"number={number} repeat={repeat}, median µs per call\n")
    print("| case | µs per check | × one HMAC |")
    print("|---|---|---|")
    for name, call, check in cases:
        us = per_call_us(call, number, repeat)
        result = call()
        if not check(result):
            raise SystemExit(f"{name}: unexpected result {result!r}")
        floor = floor or us
        print(f"| {name} | {us:.2f} | {us / floor:.2f} |")


if __name__ == "__main__":
    main()
