"""Model sessions lost mid-answer and recovered: how many, and the silence
each adds (docs/providers.md, "Recovery of a lost or stalled model session").

The server runs on real uvicorn against the local Gemini Live and OpenAI
Realtime endpoints (tests/gemini_live, tests/openai_realtime), in this
process. For each provider and fault class, ``--faults`` client sockets
each have one typed turn answered, then the next answer fails after its
first audio:

* ``drop``: the connection is reset (no close frame);
* ``internal`` (Gemini): closed 1011 "Internal error encountered.";
* ``stall``: the model stops sending and keeps the connection open; the
  server's watchdog gives up after ``model_stall_timeout_s`` (``--stall-s``);
* ``limit`` (OpenAI): the session ends as at its 60-minute limit
  (``session_expired``, close 1001);
* ``refused``: a drop, and the first new connection refused (HTTP 503).

A fault counts as recovered when the socket stays open, the client gets
``data-model-reconnected`` and no ``error``, and the cut words are answered.
The added silence is what the client's audio shows: from the last frame of
the cut answer to the first frame of the recovered one (arrival times; the
client still plays its ~150 ms lead after the last frame, so what the user
hears is shorter). For ``stall`` it includes the watchdog's bound, less the
lead the answer's audio had over real time when the model stopped (the
watchdog counts from the model's last event).

Run: ``python benchmarks/bench_recovery.py`` (``--smoke``: two faults a class).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "server")]

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from gemini_helpers import gemini_settings, use_endpoint_key  # noqa: E402
from live_helpers import open_ready_session, said, say  # noqa: E402
from openai_helpers import openai_settings, use_openai_key  # noqa: E402
from server_helpers import Collector, serve_ws  # noqa: E402

from tests.gemini_live import LocalGeminiLive  # noqa: E402
from tests.gemini_live.server import EndpointConfig as GeminiConfig  # noqa: E402
from tests.openai_realtime import EndpointConfig as OpenAIConfig  # noqa: E402
from tests.openai_realtime import LocalOpenAIRealtime  # noqa: E402

CLASSES = {
    "gemini": ("drop", "internal", "stall", "refused"),
    "openai": ("drop", "stall", "limit", "refused"),
}


def inject(provider: str, endpoint: Any, fault: str) -> None:
    if provider == "gemini":
        how = {"drop": "abort", "refused": "abort"}.get(fault, fault)
        endpoint.fail_next_reply(after_audio_chunks=2, how=how)
    else:
        how = {"drop": "abort", "refused": "abort", "limit": "expire"}.get(fault, fault)
        endpoint.fail_next(how)
    if fault == "refused":
        endpoint.refused_connections = 1


def ready(provider: str) -> Callable[[Any], object]:
    if provider == "gemini":
        return lambda record: record.parsed
    return lambda record: record.updates


async def one_fault(url: str, provider: str, endpoint: Any, fault: str) -> tuple[bool, float]:
    """One socket: a turn, then a turn whose answer fails. (recovered, gap s)."""
    ws, col = await open_ready_session(url, endpoint, ready(provider))
    try:
        await say(ws, "first")
        await col.wait_for("finish")
        inject(provider, endpoint, fault)
        await say(ws, "second")
        await col.wait_for("data-model-reconnected", timeout=30)
        await col.wait_for("finish", count=3, timeout=30)
    except AssertionError:
        return False, float("nan")
    finally:
        await col.close()
    kinds = col.types()
    recovered = "error" not in kinds and said(col, 2).startswith("You said: second")
    return recovered, audio_gap(col)


def audio_gap(col: Collector) -> float:
    cut = next(t for t, m in col.messages if m["type"] == "data-interrupted")
    notice = next(t for t, m in col.messages if m["type"] == "data-model-reconnected")
    # Frames that carry sound (the pacer fills a turn's gaps with zeros).
    audio = [t for t, m in col.messages if m["type"] == "data-pcm" and _sounds(m["data"])]
    before = sorted(t for t in audio if t <= cut)
    after = sorted(t for t in audio if t >= notice)
    return after[0] - before[-1] if before and after else float("nan")


def _sounds(data: Any) -> bool:
    pcm = base64.b64decode(data["content"])
    return bool(np.frombuffer(pcm[: len(pcm) // 2 * 2], "<i2").any())


@contextlib.contextmanager
def provider_server(provider: str, tmp: Path, stall_s: float) -> Iterator[tuple[str, Any]]:
    with pytest.MonkeyPatch.context() as mp:
        if provider == "gemini":
            endpoint_cm: Any = LocalGeminiLive(GeminiConfig(), cert_dir=tmp / "cert")
        else:
            endpoint_cm = LocalOpenAIRealtime(OpenAIConfig(), cert_dir=tmp / "cert")
        with endpoint_cm as endpoint:
            if provider == "gemini":
                use_endpoint_key(mp, endpoint.api_key)
                settings = gemini_settings(endpoint, tmp / "data", model_stall_timeout_s=stall_s)
            else:
                use_openai_key(mp, endpoint.api_key)
                settings = openai_settings(endpoint, tmp / "data", model_stall_timeout_s=stall_s)
            with serve_ws(settings) as url:
                yield url, endpoint


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=20, help="faults per provider and class")
    parser.add_argument("--stall-s", type=float, default=1.0, help="model_stall_timeout_s")
    parser.add_argument("--smoke", action="store_true", help="two faults a class")
    args = parser.parse_args()
    faults = 2 if args.smoke else args.faults
    rows = []
    for provider, classes in CLASSES.items():
        with (
            tempfile.TemporaryDirectory() as tmp,
            provider_server(provider, Path(tmp), args.stall_s) as (url, endpoint),
        ):
            for fault in classes:
                results = [
                    asyncio.run(one_fault(url, provider, endpoint, fault)) for _ in range(faults)
                ]
                gaps = [g for ok, g in results if ok and g == g]
                rows.append((provider, fault, sum(ok for ok, _ in results), faults, gaps))
    print(f"faults a class: {faults}; model_stall_timeout_s: {args.stall_s}; {time.ctime()}\n")
    print("| provider | fault | recovered | added silence p50 | p99 |")
    print("|---|---|---|---|---|")
    for provider, fault, ok, n, gaps in rows:
        p50 = percentile(gaps, 50) if gaps else float("nan")
        p99 = percentile(gaps, 99) if gaps else float("nan")
        print(f"| {provider} | {fault} | {ok}/{n} | {p50 * 1000:.0f} ms | {p99 * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
