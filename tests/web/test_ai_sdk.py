"""The real AI SDK (npm ``ai``, pinned in tests/web/js/package.json) against
the real server: ``node --test`` on tests/web/js/aisdk/ — web/sdk/chat-transport.js
on /ws (the socket URL in AUDIOCORE_WS_URL), and AI SDK's own
DefaultChatTransport on POST /api/chat and /stream (the base URL in
AUDIOCORE_HTTP_URL).

The npm packages come from ``npm ci --prefix tests/web/js``, exactly as
locked; the first test that needs them runs it when they are missing (see
docs/chat-transport.md). Without node or npm, or when npm ci fails, the test
skips (fails under AUDIOCORE_REQUIRE_BROWSER=1).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess

import pytest
from web_helpers import ROOT, missing

JS = ROOT / "tests" / "web" / "js"


def node_command(node: str) -> list[str]:
    """node, with the global WebSocket switched on where it is still a flag (Node 20)."""
    probe = subprocess.run(
        [node, "-e", "process.exit(typeof WebSocket === 'function' ? 0 : 1)"], check=False
    )
    return [node] if probe.returncode == 0 else [node, "--experimental-websocket"]


def install_npm_packages() -> None:
    """``npm ci`` in tests/web/js unless its packages are there: the README's
    test command needs no step of its own for them."""
    installed = JS / "node_modules" / "ai" / "package.json"
    if installed.exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        missing("the npm packages are not installed, and npm is not (Debian package npm)")
    # One install at a time (pytest -n runs the tests in several processes).
    with open(JS / "package-lock.json") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed.exists():
            return
        result = subprocess.run(
            [npm, "ci", "--prefix", str(JS), "--no-audit", "--no-fund"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    if result.returncode != 0:
        missing(f"npm ci --prefix tests/web/js failed: {result.stderr[-2000:]}")


# Each suite runs once per AI SDK major: the chats on that major's ``ai``
# (tests/web/js/aisdk/under-test.mjs), every chunk checked against both
# majors' uiMessageChunkSchema and 6.0.25's (the seed's pin, strict objects).
AiPackage = tuple[str, str]
AI_PACKAGES: dict[str, AiPackage] = {"ai6": ("ai", "6"), "ai7": ("ai-v7", "7")}
SCHEMA_PACKAGES = "ai,ai-v7,ai-v6-first"


@pytest.fixture(params=sorted(AI_PACKAGES))
def ai_package(request: pytest.FixtureRequest) -> AiPackage:
    """The npm package (an alias in tests/web/js/package.json) the chats run
    on, and its major."""
    return AI_PACKAGES[request.param]


def run_node_tests(
    test_file: str, env: dict[str, str], *, at_least: int, ai_package: AiPackage
) -> None:
    """``node --test`` on one file of tests/web/js/aisdk/; every test passes."""
    node = shutil.which("node")
    if node is None:
        missing("node is not installed (Debian package nodejs)")
    install_npm_packages()
    result = subprocess.run(
        [*node_command(node), "--test", str(JS / "aisdk" / test_file)],
        cwd=JS,
        env={
            **os.environ,
            "AUDIOCORE_AI_PACKAGE": ai_package[0],
            "AUDIOCORE_AI_MAJOR": ai_package[1],
            "AUDIOCORE_AI_SCHEMAS": SCHEMA_PACKAGES,
            **env,
        },
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
    assert summary["fail"] == 0 and summary["pass"] >= at_least, json.dumps(summary)


def test_chat_transport_with_the_ai_sdk(server_url: str, ai_package: AiPackage) -> None:
    socket_url = server_url.replace("http://", "ws://") + "ws"
    run_node_tests(
        "chat-transport.test.mjs",
        {"AUDIOCORE_WS_URL": socket_url},
        at_least=12,
        ai_package=ai_package,
    )


def test_the_seed_clients_reading_of_live_with_the_ai_sdk(
    server_url: str, ai_package: AiPackage
) -> None:
    """/live read as the seed's lib/bidi reads it, messages built by ``ai``."""
    socket_url = server_url.replace("http://", "ws://") + "live"
    run_node_tests(
        "seed-live.test.mjs",
        {"AUDIOCORE_LIVE_URL": socket_url},
        at_least=2,
        ai_package=ai_package,
    )


def test_default_http_transport_with_the_ai_sdk(server_url: str, ai_package: AiPackage) -> None:
    """AI SDK's own DefaultChatTransport on POST /api/chat and /stream."""
    run_node_tests(
        "http-chat.test.mjs",
        {"AUDIOCORE_HTTP_URL": server_url},
        at_least=7,
        ai_package=ai_package,
    )


def test_adk_confirmation_with_the_ai_sdk(desk_server_url: str, ai_package: AiPackage) -> None:
    """ADK's confirmation approved, denied and answered with a payload through
    the real ``ai`` package: our socket transport, DefaultChatTransport, and
    the seed's lib/bidi reading of /live."""
    run_node_tests(
        "confirmation.test.mjs",
        {"AUDIOCORE_CONFIRM_URL": desk_server_url},
        at_least=13,
        ai_package=ai_package,
    )
