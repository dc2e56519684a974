"""The provider contract: what every live model must do for a client on /ws,
written once and run on each of them (provider_helpers.py): the offline
model, ADK's Gemini model against the local Gemini Live endpoint (its 3.x
path, and its 2.5 path where ADK speaks differently to it), and our
``OpenAIRealtime`` against the local OpenAI Realtime endpoint.

Real uvicorn on 127.0.0.1, ADK's runner, the providers' own client packages
over TLS; the endpoints validate every message they get. The client streams
espeak-ng speech as 48 kHz float32 in 20 ms frames at real-time pace, as
the demo page does. Each scenario asserts what the client sees, then what
the provider's wire must show (its ``Provider`` methods). Tests synchronise
on what the client and the endpoint have seen, never on sleeps.

What only one provider does (Gemini's goAway and resumption, OpenAI's
truncation on the user's stop, push-to-talk on each wire, …) stays in
test_gemini_e2e.py and test_openai_*.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from live_helpers import (
    FRAME_24K,
    approve,
    errors,
    refused_turn,
    said,
    say,
    spy_on_played_seconds,
)
from provider_helpers import HOSTILE_FACT, PROVIDERS, WITH_GEMINI_25, Provider, running
from scipy.signal import resample_poly
from server_helpers import Collector, serve_ws, stream_realtime
from test_e2e import RATE, aligned_correlation, silence
from test_images import described, encode, pixels

# ADK itself still calls genai's deprecated session.send for 2.5 models' text.
pytestmark = pytest.mark.filterwarnings("ignore:The `session.send` method is deprecated")

NO_KEY = pytest.mark.skip(reason="the offline model takes no key")
NO_DELIVERY = pytest.mark.skip(
    reason="the offline model hands the whole answer to the pacer at once: no delivery to pace"
)


def run(provider: Provider, data_dir: Path, scenario: Any, **settings: object) -> Any:
    """``scenario(ws_url)`` against the server on ``provider``; returns what it returns."""
    with serve_ws(provider.settings(data_dir, **settings)) as url:
        return asyncio.run(scenario(url))


def first(col: Collector, kind: str) -> dict[str, Any]:
    return next(m for _, m in col.messages if m["type"] == kind)


# ---------------------------------------------------------------- turns


@pytest.mark.parametrize("name", WITH_GEMINI_25)
def test_typed_turns(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = ["hello there", "and again"]
    with running(name, tmp_path, monkeypatch) as provider:

        async def scenario(url: str) -> Collector:
            ws, col = await provider.open_session(url)
            for k, text in enumerate(texts):
                await say(ws, text)
                await col.wait_for("finish", count=k + 1)
            await col.close()
            return col

        col = run(provider, tmp_path / "data", scenario)
        provider.typed_turns(texts)
    earlier = " (1 earlier turns in this session)" if provider.counts_turns else ""
    assert said(col, 0) == "You said: hello there"
    assert said(col, 1) == f"You said: and again{earlier}"
    assert col.pcm() and not errors(col)


@pytest.mark.parametrize("name", WITH_GEMINI_25)
def test_spoken_turn_echo_transcripts_and_exact_samples(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speech_48k
) -> None:
    sent = np.concatenate([silence(0.4), speech_48k, silence(1.2)])
    with running(name, tmp_path, monkeypatch) as provider:

        async def scenario(url: str) -> Collector:
            ws, col = await provider.open_session(url)
            await stream_realtime(ws, sent, RATE)
            await col.wait_for("finish", timeout=20)
            await col.close()
            return col

        col = run(provider, tmp_path / "data", scenario)
        echo = provider.spoken_turn(col) / 32768
    finish = first(col, "finish")
    assert finish["finishReason"] == "stop"
    assert finish["messageMetadata"]["model"] == provider.model
    usage = finish["messageMetadata"]["usage"]  # the model's (or the endpoint's) usage
    assert usage["completionTokens"] > 0 and usage["promptTokens"] > 0
    assert usage["totalTokens"] == usage["promptTokens"] + usage["completionTokens"]
    kinds = col.types()
    turn = kinds[kinds.index("start") : kinds.index("finish") + 1]
    assert turn[:2] == ["start", "data-transcript"] and not errors(col)
    # The whole of the speech came back, as the mic path resampled it (48 → 16 kHz
    # → 24 kHz, or 48 → 24 kHz in one pass for OpenAI).
    assert len(echo) > len(speech_48k) // 2
    assert aligned_correlation(echo, resample_poly(sent.astype(np.float64), 1, 2)) >= 0.99


@pytest.mark.parametrize("name", [pytest.param("offline", marks=NO_DELIVERY), "gemini", "openai"])
def test_answers_in_bursts_faster_than_real_time_arrive_whole(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speech_48k
) -> None:
    """The endpoint's default delivery (200 ms bursts at twice real time, like
    the service): everything arrives. On a starved machine the pacer may
    conceal a stall with silence, so only "nothing missing" is asserted."""
    with running(name, tmp_path, monkeypatch, speed=None) as provider:

        async def scenario(url: str) -> Collector:
            ws, col = await provider.open_session(url)
            await stream_realtime(ws, np.concatenate([speech_48k, silence(1.0)]), RATE)
            await col.wait_for("finish", timeout=20)
            await col.close()
            return col

        col = run(provider, tmp_path / "data", scenario)
        n24, audio_messages = provider.delivered(col)
    assert len(col.pcm()) // 2 >= n24 and not errors(col)
    assert audio_messages == -(-n24 // FRAME_24K)  # 40 ms per message


# The answer must still be playing when the user speaks over it: Gemini's
# endpoint streams it in real time (its detector hears the barge-in while it
# generates); OpenAI's sends it whole, and the server truncates what was
# not played yet.
BARGE_IN_SPEED = {"offline": 1000.0, "gemini": 1.0, "openai": 1000.0}


@pytest.mark.parametrize("name", PROVIDERS)
def test_speaking_over_the_answer_is_a_model_barge_in(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speech_48k
) -> None:
    played = spy_on_played_seconds(monkeypatch)
    with running(name, tmp_path, monkeypatch, speed=BARGE_IN_SPEED[name]) as provider:

        async def scenario(url: str) -> Collector:
            ws, col = await provider.open_session(url)
            await stream_realtime(ws, np.concatenate([speech_48k, silence(0.8)]), RATE)
            await col.wait_for("data-pcm", count=5, timeout=20)
            await stream_realtime(ws, speech_48k[: RATE // 2], RATE)  # barge in
            await col.wait_for("data-interrupted", timeout=10)
            await col.wait_for("finish", timeout=20)
            await provider.barge_in_settled()
            await col.close()
            return col

        col = run(provider, tmp_path / "data", scenario)
        provider.barge_in(col, played)
    assert first(col, "data-interrupted")["data"]["source"] == "model"
    kinds = col.types()
    i = kinds.index("data-interrupted")
    # The turn ends there (its open text part closed first); no audio of it follows.
    assert kinds[i + 1 : kinds.index("finish", i) + 1] in (["finish"], ["text-end", "finish"])
    assert "data-pcm" not in kinds[i:] and not errors(col)


# ---------------------------------------------------------------- tools


@pytest.mark.parametrize("name", WITH_GEMINI_25)
def test_server_tool_round_trip(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with running(name, tmp_path, monkeypatch) as provider:

        async def scenario(url: str) -> Collector:
            ws, col = await provider.open_session(url)
            await say(ws, "what is the weather in Paris")
            await col.wait_for("tool-output-available")
            await provider.tool_answered()
            await col.wait_for("finish", count=provider.finishes_per_tool_call)
            await col.close()
            return col

        col = run(provider, tmp_path / "data", scenario)
        call, output = first(col, "tool-input-available"), first(col, "tool-output-available")
        provider.server_tool(col, call, output["output"])
    assert (call["toolName"], call["input"]) == ("get_weather", {"location": "Paris"})
    assert output["toolCallId"] == call["toolCallId"]
    assert output["output"]["condition"] == "light rain"
    assert col.types().count("finish") == provider.finishes_per_tool_call and not errors(col)


@pytest.mark.parametrize("name", PROVIDERS)
def test_approval_tool_answer_goes_back_to_the_model(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running(name, tmp_path, monkeypatch) as provider:

        async def scenario(url: str) -> Collector:
            ws, col = await provider.open_session(url)
            await say(ws, "pay 5 EUR to Alice")
            await ws.send(approve(await col.wait_for("tool-approval-request")))
            await col.wait_for("finish")
            await col.close()
            return col

        col = run(provider, tmp_path / "data", scenario)
        output = first(col, "tool-output-available")
        provider.approval_tool(col, output)
    assert output["output"]["success"] is True and output["output"]["transactionId"]
    assert said(col).startswith("process_payment returned") and not errors(col)


# ---------------------------------------------------------------- images


@pytest.mark.parametrize("name", WITH_GEMINI_25)
def test_an_image_goes_with_the_turn(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    array = pixels()
    image = encode(array, "PNG")
    frame = {"type": "image", "mediaType": "image/png", "data": base64.b64encode(image).decode()}
    with running(name, tmp_path, monkeypatch) as provider:

        async def scenario(url: str) -> Collector:
            ws, col = await provider.open_session(url, turnDetection="manual")
            await ws.send(json.dumps(frame))
            await say(ws, "what do you see")
            await col.wait_for("finish")
            await col.close()
            return col

        col = run(provider, tmp_path / "data", scenario)
        provider.image(col, image, described(array, "image/png"))
    assert not errors(col)


# ---------------------------------------------------------------- memory


@pytest.mark.parametrize("name", PROVIDERS)
def test_remembers_and_is_told_at_connect(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """user_memory runs on every model unchanged; the next session's model
    is told the fact as it connects (its instruction), as data: a fact that
    closes the memory block and speaks as the system stays inside it."""
    key = f"{name}-user-key-0123456789"
    with running(name, tmp_path, monkeypatch) as provider:

        async def scenario(url: str) -> tuple[Collector, Collector]:
            cols = []
            for text in (
                "call user_memory " + json.dumps({"action": "remember", "text": HOSTILE_FACT}),
                'call user_memory {"action": "recall", "query": "tea"}',
            ):
                ws, col = await provider.open_session(url, userKey=key, turnDetection="manual")
                await say(ws, text)
                await col.wait_for("tool-output-available")
                await col.wait_for("finish")
                await col.close()
                cols.append(col)
            fact = first(cols[0], "tool-output-available")["output"]["remembered"]
            await provider.told_at_connect(url, key, fact)
            return cols[0], cols[1]

        told, asked = run(provider, tmp_path / "data", scenario)
    fact = first(told, "tool-output-available")["output"]["remembered"]
    assert fact["text"] == HOSTILE_FACT
    memories = first(asked, "tool-output-available")["output"]["memories"]
    assert [(m["id"], m["text"]) for m in memories] == [(fact["id"], HOSTILE_FACT)]
    assert not errors(told) and not errors(asked)


# ---------------------------------------------------------------- failures and the end


@pytest.mark.parametrize(
    ("name", "refuse_with"),
    [
        pytest.param("offline", "", marks=NO_KEY),
        ("gemini", ""),
        ("openai", "http"),  # 401 at the handshake
        ("openai", "close"),  # the socket opens, then closes 3000
    ],
)
def test_a_refused_key_is_a_clear_error_without_the_key(
    name: str, refuse_with: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server closes the socket 1011 with the provider's reason (within
    30 s, not a hang), and never says the key."""
    with running(name, tmp_path, monkeypatch, refuse_with=refuse_with or "http") as provider:
        expected = provider.refuse_key(monkeypatch)
        col = refused_turn(provider.settings(tmp_path / "data"))
    (error,) = errors(col)
    assert error.startswith(expected), error
    assert "not-the-key" not in json.dumps(col.messages)


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_session_the_client_ends_is_kept_and_resumes(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client closes its socket: the provider's connection is closed
    normally, and the session is kept: a new socket with its id resumes it,
    history and all, and the conversation goes on."""
    with running(name, tmp_path, monkeypatch) as provider:

        async def scenario(url: str) -> tuple[dict[str, Any], Collector]:
            ws, col = await provider.open_session(url)
            session_id = first(col, "data-session")["data"]["sessionId"]
            await say(ws, "remember this")
            await col.wait_for("finish")
            await col.close()
            await provider.session_ended()
            ws, again = await provider.open_session(url, sessionId=session_id)
            await say(ws, "still there?")
            await again.wait_for("finish")
            await again.close()
            return first(again, "data-session")["data"], again

        resumed, again = run(provider, tmp_path / "data", scenario)
    assert resumed["resumed"] is True
    assert {"role": "user", "text": "remember this"} in resumed["history"]
    assert said(again).startswith("You said: still there?") and not errors(again)
