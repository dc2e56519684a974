"""Where a py-spy profile's time goes, by component (for bench_server.py --py-spy).

    python benchmarks/profile_summary.py artifacts/prof/gemini-25.txt [more.txt ...]

Reads py-spy's raw format (collapsed stacks: ``frame;frame;… count``) and
charges every sample to the innermost frame that belongs to a component we
can name — ours (server/, audiocore), ADK, google-genai, pydantic,
websockets, uvicorn/starlette, asyncio, ssl/zlib/json — so "ours" is the
time spent in our own code, not below it. Prints the share of samples of
each component and the top functions by own time.
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

# Innermost match wins: a frame's file decides its component.
# py-spy names files relative to their package root: "(adk/live/…)".
COMPONENTS = (
    ("ours: server/", re.compile(r"\(server/")),
    ("ours: audiocore", re.compile(r"\(audiocore/")),
    ("google-genai", re.compile(r"\(genai/")),
    ("ADK", re.compile(r"\(adk/")),
    ("pydantic", re.compile(r"\(pydantic")),
    ("websockets", re.compile(r"\(websockets/")),
    ("uvicorn/starlette/anyio", re.compile(r"\((uvicorn|starlette|anyio)/")),
    ("ssl", re.compile(r"\(ssl\.py")),
    ("json", re.compile(r"\(json/")),
    ("base64", re.compile(r"\(base64\.py")),
    ("sqlite", re.compile(r"sqlite")),
    ("asyncio", re.compile(r"\(asyncio/")),
)
# A sample whose innermost frame is the event loop's run call is the loop
# waiting in epoll (py-spy cannot tell from --nonblocking): idle.
IDLE = re.compile(r"^Runner\.run \(asyncio/runners\.py")
# Inclusive time of the stages of the data path.
STAGES = (
    ("genai: receive + decode (AsyncSession._receive)", "AsyncSession._receive"),
    ("genai: encode + send (AsyncSession.send*)", "AsyncSession.send"),
    ("ADK: receive_from_model (events from responses)", "receive_from_model"),
    ("ADK: send_to_model", "send_to_model"),
    ("ours: pump (_pump)", "LiveConnection._pump"),
    ("ours: receiver (_receiver)", "LiveConnection._receiver"),
    ("ours: sender (Sender.run)", "Sender.run"),
    ("uvicorn: socket writes", "WebSocketsSansIOProtocol.send"),
)


def component(frame: str) -> str | None:
    for name, pattern in COMPONENTS:
        if pattern.search(frame):
            return name
    return None


def summarize(path: Path) -> None:
    by_component: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[str] = collections.Counter()
    by_stage: collections.Counter[str] = collections.Counter()
    total = idle = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        if IDLE.match(frames[-1]):
            idle += n
            continue
        total += n
        owner = next((c for f in reversed(frames) if (c := component(f))), "other")
        by_component[owner] += n
        by_function[frames[-1]] += n
        for name, marker in STAGES:
            if any(marker in f for f in frames):
                by_stage[name] += n
    print(f"{path}: {total} busy samples ({idle} idle excluded)")
    print("  by component (innermost frame that belongs to one):")
    for name, n in by_component.most_common():
        print(f"  {100 * n / total:5.1f}%  {name}")
    print("  by stage (inclusive; stages nest):")
    for name, _ in STAGES:
        print(f"  {100 * by_stage[name] / total:5.1f}%  {name}")
    print("  top functions (own time):")
    for name, n in by_function.most_common(12):
        print(f"  {100 * n / total:5.1f}%  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profiles", nargs="+", type=Path)
    for path in parser.parse_args().profiles:
        summarize(path)


if __name__ == "__main__":
    main()
