"""End to end on the OpenAI Realtime path — what fails: a rate limit, the
session's time limit between turns; and ``python -m server``
on the path (see test_openai_e2e.py for the setup; a refused key is
test_provider_contract.py's)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from gemini_helpers import clean_env
from live_helpers import errors, python_m_server_hello, said, say
from openai_helpers import (
    MODEL,
    open_session,
    openai_endpoint,  # noqa: F401 (a fixture)
    serve_openai,  # noqa: F401 (a fixture)
)
from server_helpers import Collector

from tests.openai_realtime import LocalOpenAIRealtime

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- failures


def test_a_rate_limit_is_an_error_with_the_reason_and_the_next_turn_works(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        endpoint.rate_limited_answers = 1
        await say(ws, "hello")
        await col.wait_for("error")
        await say(ws, "hello again")
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    (error,) = errors(col)
    assert error.startswith("model error rate_limit_exceeded: Rate limit reached for requests")
    assert said(col) == "You said: hello again"
    # The failed answer never started a turn: the error alone, then the next turn.
    assert col.types()[:3] == ["data-session", "error", "start"]


def test_session_expired_between_turns_goes_on_on_a_new_session(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """At the service's time limit (error session_expired, close 1001) the
    conversation goes on, on the same socket, in a new realtime session
    seeded with the conversation as text items, as OpenAI documents; the
    client is told (``data-model-reconnected {cause: "limit"}``). The
    failures mid-answer are test_openai_recovery.py's."""

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await say(ws, "remember this")
        await col.wait_for("finish")
        endpoint.expire_sessions()
        await col.wait_for("data-model-reconnected")
        await say(ws, "are you back?")
        await col.wait_for("finish", count=2)
        await col.close()
        return col

    col = asyncio.run(asyncio.wait_for(scenario(), 40))
    assert not errors(col) and said(col) == "You said: are you back?"
    notice = next(m for _, m in col.messages if m["type"] == "data-model-reconnected")
    assert notice["data"] == {"cause": "limit"}
    first, second = endpoint.records
    assert first.errors[-1]["code"] == "session_expired"
    replayed = [e["item"] for e in second.received if e["type"] == "conversation.item.create"]
    assert replayed[:2] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
        if role == "user"
        else {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": t}],
        }
        for role, t in (("user", "remember this"), ("assistant", "You said: remember this"))
    ]
    assert not second.errors


# ---------------------------------------------------------------- python -m server


def test_python_m_server_runs_the_openai_path(
    endpoint: LocalOpenAIRealtime, tmp_path: Path
) -> None:
    """Exactly what a user runs, with the endpoint's key and CA."""
    env = {**clean_env(), "OPENAI_API_KEY": endpoint.api_key, "NO_PROXY": "127.0.0.1,localhost"}
    args = [
        "--data-dir", str(tmp_path), "--model", f"openai:{MODEL}",
        "--openai-base-url", endpoint.base_url, "--openai-ca-file", str(endpoint.ca_file),
        "--voice", "Marin",
    ]  # fmt: skip
    health, col, stderr = python_m_server_hello(args, env, lambda url: open_session(url, endpoint))
    assert health == {"status": "ok", "model": MODEL, "connections": 0, "liveRuns": 0}
    assert said(col) == "You said: hello"
    assert endpoint.records[0].session["audio"]["output"]["voice"] == "marin"
    assert endpoint.api_key not in stderr  # the key is never logged


def test_python_m_server_refuses_the_openai_path_without_a_key(tmp_path: Path) -> None:
    env = {k: v for k, v in clean_env().items() if k != "OPENAI_API_KEY"}
    command = [sys.executable, "-m", "server", "--data-dir", str(tmp_path), "--model", "openai:x"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--model openai:x: expected OPENAI_API_KEY" in done.stderr
