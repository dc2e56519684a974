"""web/chat-transport.js with the real AI SDK (npm ``ai``, pinned in
tests/web/js/package.json) against the real server: ``node --test`` on
tests/web/js/aisdk/, given the server's socket URL in AUDIOCORE_WS_URL.

The npm packages come from ``npm ci --prefix tests/web/js`` (CI runs it; see
docs/chat-transport.md). Without them, or without node, the test skips (fails
under AUDIOCORE_REQUIRE_BROWSER=1).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from web_helpers import ROOT, missing

JS = ROOT / "tests" / "web" / "js"


def node_command(node: str) -> list[str]:
    """node, with the global WebSocket switched on where it is still a flag (Node 20)."""
    probe = subprocess.run(
        [node, "-e", "process.exit(typeof WebSocket === 'function' ? 0 : 1)"], check=False
    )
    return [node] if probe.returncode == 0 else [node, "--experimental-websocket"]


def test_chat_transport_with_the_ai_sdk(server_url: str) -> None:
    node = shutil.which("node")
    if node is None:
        missing("node is not installed")
    if not (JS / "node_modules" / "ai" / "package.json").exists():
        missing("the npm packages are not installed (npm ci --prefix tests/web/js)")
    files = sorted(str(p) for p in (JS / "aisdk").glob("*.test.mjs"))
    env = {**os.environ, "AUDIOCORE_WS_URL": server_url.replace("http://", "ws://") + "ws"}
    result = subprocess.run(
        [*node_command(node), "--test", *files],
        cwd=JS,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    summary = {
        key: int(value)
        for key, value in (
            line[2:].split(" ", 1) for line in result.stdout.splitlines() if line.startswith("# ")
        )
        if key in ("pass", "fail")
    }
    assert summary["fail"] == 0 and summary["pass"] >= 9, json.dumps(summary)
