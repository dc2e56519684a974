"""End to end on the production model path: real uvicorn, ADK's runner and its
Gemini model, google-genai's live client over TLS, against the local Gemini
Live endpoint (tests/gemini_live), which validates every message it gets.

The browser side is a real WebSocket client; spoken turns stream espeak-ng
speech as 48 kHz float32 in 20 ms frames at real-time pace, as the demo
page does. Tests synchronise on what the client and the endpoint have seen,
never on sleeps.

What every model must do (typed and spoken turns, barge-in, tools, images,
memory, a refused key, the session's end) is test_provider_contract.py's,
run on this path too; here is what only the Gemini path does: push-to-talk
on its wire, goAway and resumption, lost connections and a dying endpoint,
and ``python -m server`` on it.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gemini_helpers import GEMINI_3, clean_env, gemini_settings, use_endpoint_key
from live_helpers import (
    approve,
    errors,
    open_ready_session,
    push_to_talk,
    python_m_server_hello,
    said,
    say,
)
from scipy.signal import resample_poly
from server_helpers import Collector, check_padded, serve_ws, stream_realtime
from test_e2e import RATE, START_F32, aligned_correlation, connect, silence

from tests.gemini_live import EndpointConfig, LocalGeminiLive

# ADK itself still calls genai's deprecated session.send for 2.5 models' text.
pytestmark = pytest.mark.filterwarnings("ignore:The `session.send` method is deprecated")

REPO = Path(__file__).resolve().parents[2]
# A fact that tries to end the memory block and speak as the system.


@pytest.fixture
def endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalGeminiLive]:
    # The whole answer at once (like the offline model): a sample-exact echo
    # must not depend on how fast this machine relays a real-time stream.
    with LocalGeminiLive(EndpointConfig(speed=1000.0), cert_dir=tmp_path / "cert") as live:
        use_endpoint_key(monkeypatch, live.api_key)
        yield live


@pytest.fixture
def gemini_server(endpoint: LocalGeminiLive, tmp_path: Path) -> Iterator[str]:
    with serve_ws(gemini_settings(endpoint, tmp_path / "data")) as url:
        yield url


async def open_session(url: str, endpoint: LocalGeminiLive, **start: Any) -> tuple[Any, Collector]:
    """A client session whose live connection to the endpoint is up (so no
    audio waits for it)."""
    return await open_ready_session(url, endpoint, lambda record: record.parsed, **start)


# ---------------------------------------------------------------- turns


def test_push_to_talk_disables_detection_and_activity_signals_flow(
    gemini_server: str, endpoint: LocalGeminiLive, speech_48k
) -> None:
    speech = speech_48k[: len(speech_48k) // 6 * 6]

    async def scenario() -> Collector:
        ws, col = await open_session(gemini_server, endpoint, turnDetection="manual")
        await stream_realtime(ws, silence(0.3), RATE)  # outside the bracket: no turn
        await push_to_talk(ws, speech, RATE)
        await col.wait_for("finish", timeout=20)
        await col.close()
        return col

    col = asyncio.run(scenario())
    (record,) = endpoint.records
    assert record.parsed.automatic_activity_detection is False
    assert record.setup["setup"]["realtimeInputConfig"] == {
        "automatic_activity_detection": {"disabled": True}
    }
    kinds = record.received_kinds()
    assert kinds.count("activityStart") == kinds.count("activityEnd") == 1
    assert kinds.index("activityStart") < kinds.index("activityEnd")
    # 48 kHz in → 16 kHz → 24 kHz out, exactly the bracketed audio.
    echo = check_padded(col.pcm(), len(speech) // 2, 960) / 32768
    reference = resample_poly(np.concatenate([silence(0.1), speech]).astype(float), 1, 2)
    assert aligned_correlation(echo, reference) >= 0.99


# ---------------------------------------------------------------- resumption


def test_go_away_mid_answer_finishes_the_turn_then_resumes(
    gemini_server: str, endpoint: LocalGeminiLive, speech_48k
) -> None:
    """goAway arrives while an answer is being spoken, and the socket is closed
    when its time is up: the turn still arrives whole, no error reaches the
    client, and the next turn continues the conversation on a connection that
    resumed with the handle issued after the turn."""
    sent = np.concatenate([silence(0.4), speech_48k, silence(1.2)])

    async def scenario() -> Collector:
        ws, col = await open_session(gemini_server, endpoint)
        endpoint.go_away_at_next_answer(time_left_s=3.0)
        await stream_realtime(ws, sent, RATE)
        await col.wait_for("finish", timeout=20)
        await endpoint.wait_for_async(lambda rs: len(rs) == 2 and rs[1].parsed)
        await say(ws, "still there?")
        await col.wait_for("finish", count=2)
        await col.close()
        return col

    col = asyncio.run(scenario())
    first, second = endpoint.records
    assert not errors(col) and "data-interrupted" not in col.types()
    heard = next(m["data"]["text"] for _, m in col.messages if m["type"] == "data-transcript")
    n16 = int(re.search(r"\((\d+) samples", heard).group(1))
    n24 = n16 * 3 // 2
    assert len(col.pcm()) // 2 >= n24  # the first answer whole (the second adds its cue)
    assert said(col, 1) == "You said: still there? (1 earlier turns in this session)"
    kinds = first.sent_kinds()
    assert kinds.index("goAway") < kinds.index("serverContent.turnComplete")
    # The handle ADK resumed with is the one issued after the turn, and the
    # old socket was closed (1000) before its deadline.
    handles = [
        m["sessionResumptionUpdate"].get("newHandle")
        for m in first.sent
        if "sessionResumptionUpdate" in m
    ]
    assert second.resumed_from == handles[-1]
    assert first.close_code == 1000


def test_connection_lifetime_goaways_between_turns_are_seamless(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every connection is told to go away 0.5 s in (with 1.5 s to spare).
    config = EndpointConfig(speed=1000.0, connection_lifetime_s=2.0, go_away_notice_s=1.5)
    with LocalGeminiLive(config, cert_dir=tmp_path / "cert") as endpoint:
        use_endpoint_key(monkeypatch, endpoint.api_key)

        async def scenario(url: str) -> Collector:
            ws, col = await open_session(url, endpoint)
            for k in range(3):
                await say(ws, f"turn {k}")
                await col.wait_for("finish", count=k + 1)
                await endpoint.wait_for_async(lambda rs, n=k: len(rs) >= n + 2 and rs[-1].parsed)
            await col.close()
            return col

        with serve_ws(gemini_settings(endpoint, tmp_path / "data")) as url:
            col = asyncio.run(scenario(url))
        records = endpoint.records
    assert not errors(col)
    assert said(col, 2) == "You said: turn 2 (2 earlier turns in this session)"
    assert all(r.resumed_from for r in records[1:])


@pytest.mark.parametrize("how", ["internal", "abort", "stall"])
def test_a_connection_lost_or_stalled_mid_answer_is_resumed_and_the_words_answered(
    endpoint: LocalGeminiLive, tmp_path: Path, how: str
) -> None:
    """The endpoint closes 1011, resets the connection, or stops sending,
    mid-answer: the cut answer ends for the client (``data-interrupted``),
    a notice says the model reconnected, and on the resumed session the
    user's words are given again and answered; the conversation goes on
    with them in it. No error, no close."""
    settings = gemini_settings(endpoint, tmp_path / "data", model_stall_timeout_s=1.0)

    async def scenario(url: str) -> Collector:
        ws, col = await open_session(url, endpoint)
        await say(ws, "first")
        await col.wait_for("finish")
        endpoint.fail_next_reply(after_audio_chunks=2, how=how)
        await say(ws, "second")
        await col.wait_for("data-model-reconnected")
        await endpoint.wait_for_async(lambda rs: len(rs) == 2 and rs[1].parsed)
        await col.wait_for("finish", count=3)  # the cut answer's, and the new one's
        await say(ws, "third")
        await col.wait_for("finish", count=4)
        await col.close()
        return col

    with serve_ws(settings) as url:
        col = asyncio.run(scenario(url))
    assert not errors(col)
    kinds = col.types()
    assert kinds.count("data-interrupted") == 1
    (notice,) = [m for _, m in col.messages if m["type"] == "data-model-reconnected"]
    assert notice["data"] == {"cause": "stall" if how == "stall" else "drop"}
    assert kinds.index("data-interrupted") < kinds.index("data-model-reconnected")
    assert said(col, 2) == "You said: second (1 earlier turns in this session)"
    assert said(col, 3) == "You said: third (2 earlier turns in this session)"
    first, second = endpoint.records
    assert first.close_code == {"internal": 1011, "abort": 1006, "stall": 1000}[how]
    assert second.resumed_from is not None
    assert [d for k, d in second.received if k == "text"] == ["second", "third"]


def test_the_first_reconnect_refused_is_tried_again(
    endpoint: LocalGeminiLive, tmp_path: Path
) -> None:
    """The service refuses the first new connection after a drop (HTTP 503):
    it is tried again, and the conversation goes on."""
    settings = gemini_settings(endpoint, tmp_path / "data")

    async def scenario(url: str) -> Collector:
        ws, col = await open_session(url, endpoint)
        endpoint.refused_connections = 1
        endpoint.fail_next_reply(after_audio_chunks=2, how="abort")
        await say(ws, "hello")
        await col.wait_for("data-model-reconnected")
        await col.wait_for("finish", count=2)
        await col.close()
        return col

    with serve_ws(settings) as url:
        col = asyncio.run(scenario(url))
    assert not errors(col)
    assert said(col).startswith("You said: hello")
    assert endpoint.refused_connections == 0
    assert endpoint.records[-1].resumed_from is not None


def test_an_approval_pending_across_a_drop_stays_pending(
    endpoint: LocalGeminiLive, tmp_path: Path
) -> None:
    """The connection drops while the user is asked to approve a payment.
    Gemini resumes from the handle before the turn that called the tool
    (the service gives none while a call is pending), so the resumed session
    knows no such call: the request stays pending for the client, the
    approval runs the tool once, and its result is told to the resumed
    session as words, which it answers."""
    settings = gemini_settings(endpoint, tmp_path / "data")

    async def scenario(url: str) -> Collector:
        ws, col = await open_session(url, endpoint)
        await say(ws, "pay 5 EUR to Alice")
        request = await col.wait_for("tool-approval-request")
        endpoint.abort_sessions()
        await col.wait_for("data-model-reconnected")
        await ws.send(approve(request))
        await col.wait_for("finish")
        await col.close()
        return col

    with serve_ws(settings) as url:
        col = asyncio.run(scenario(url))
    assert not errors(col)
    kinds = col.types()
    assert "data-interrupted" not in kinds and "tool-output-error" not in kinds
    (output,) = [m for _, m in col.messages if m["type"] == "tool-output-available"]
    assert (
        output["toolCallId"] == col.messages[kinds.index("tool-approval-request")][1]["toolCallId"]
    )
    told = [d for k, d in endpoint.records[-1].received if k == "text"]
    assert len(told) == 1 and told[0].startswith("[The result of process_payment, which you called")
    assert said(col).startswith("You said: [The result of process_payment")


def test_a_turn_that_called_a_tool_is_not_given_again(
    endpoint: LocalGeminiLive, tmp_path: Path
) -> None:
    """A drop after the model called a tool: giving the words again would
    run the tool twice, so the turn ends as cut off, and the tool ran once."""
    settings = gemini_settings(endpoint, tmp_path / "data")

    async def scenario(url: str) -> Collector:
        ws, col = await open_session(url, endpoint)
        endpoint.fail_next_reply(after_audio_chunks=1, how="abort")
        await say(ws, "what's the weather in Paris")
        await col.wait_for("data-model-reconnected")
        await say(ws, "after")
        await col.wait_for("finish", count=2)  # the cut answer's, and this one's
        await col.close()
        return col

    with serve_ws(settings) as url:
        col = asyncio.run(scenario(url))
    assert not errors(col)
    calls = [m for _, m in col.messages if m["type"] == "tool-input-available"]
    assert [c["toolName"] for c in calls] == ["get_weather"]
    assert said(col).startswith("You said: after")
    _, second = endpoint.records
    assert [d for k, d in second.received if k == "text"] == ["after"]


# ---------------------------------------------------------------- failures


def test_an_unreachable_endpoint_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    use_endpoint_key(monkeypatch, "any-key")
    with LocalGeminiLive(cert_dir=tmp_path / "cert") as endpoint:
        endpoint.kill()  # nothing listens on its port

        async def scenario(url: str) -> Collector:
            ws, col, _ = await connect(url, START_F32)
            await col.task
            assert ws.close_code == 1011
            return col

        with serve_ws(gemini_settings(endpoint, tmp_path / "data")) as url:
            col = asyncio.run(asyncio.wait_for(scenario(url), 30))
    (error,) = errors(col)
    assert error.startswith("the model service could not be reached (ConnectionRefusedError)")


def test_the_endpoint_dying_mid_turn_keeps_the_session(
    gemini_server: str, endpoint: LocalGeminiLive
) -> None:
    async def scenario() -> tuple[Collector, Collector, dict[str, Any]]:
        ws, col = await open_session(gemini_server, endpoint)
        session_id = next(m for _, m in col.messages if m["type"] == "data-session")["data"]
        await say(ws, "remember this")
        await col.wait_for("finish")
        endpoint.fail_next_reply(after_audio_chunks=2, how="die")
        await say(ws, "and this")
        await col.task  # the model is gone: the server ends the socket
        assert ws.close_code == 1011
        endpoint.revive()
        ws, again, resumed = await connect(
            gemini_server, {**START_F32, "sessionId": session_id["sessionId"]}
        )
        await say(ws, "are you back?")
        await again.wait_for("finish", count=2)
        await again.close()
        return col, again, resumed["data"]

    col, again, resumed = asyncio.run(scenario())
    (error,) = errors(col)
    assert error.startswith("the model service could not be reached (ConnectionRefusedError)")
    assert col.types()[-1] == "error" and "data-interrupted" in col.types()
    assert resumed["resumed"] and {"role": "user", "text": "remember this"} in resumed["history"]
    assert not errors(again)
    # A new live session (the dead endpoint's handles are gone) seeded with the history.
    last = endpoint.records[-1]
    assert last.resumed_from is None
    history = next(d for k, d in last.received if k == "clientContent")
    assert ("user", "remember this") in history[0]
    # gemini-3.x answers replayed history only on new input: ADK sends "."
    # after it (the endpoint echoes that), then the queued turn follows.
    assert last.received_kinds() == ["clientContent", "text", "text"]
    assert said(again, 0) == "You said: . (2 earlier turns in this session)"
    assert said(again, 1) == "You said: are you back? (3 earlier turns in this session)"


# ---------------------------------------------------------------- python -m server


def test_python_m_server_runs_the_gemini_path(endpoint: LocalGeminiLive, tmp_path: Path) -> None:
    """Exactly what a user runs, with a dummy key and the endpoint's CA."""
    env = {**clean_env(), "GOOGLE_API_KEY": endpoint.api_key, "NO_PROXY": "127.0.0.1,localhost"}
    args = [
        "--data-dir", str(tmp_path), "--model", GEMINI_3, "--gemini-base-url", endpoint.url,
        "--gemini-ca-file", str(endpoint.ca_file), "--voice", "Kore", "--language", "en-US",
    ]  # fmt: skip
    health, col, _ = python_m_server_hello(args, env, lambda url: open_session(url, endpoint))
    assert health == {"status": "ok", "model": GEMINI_3, "connections": 0, "liveRuns": 0}
    assert said(col) == "You said: hello"
    setup = endpoint.records[0].parsed
    assert (setup.voice, setup.language) == ("Kore", "en-US")
    assert os.fspath(endpoint.ca_file) in args


# ---------------------------------------------------------------- voice activity


def test_the_services_voice_activity_is_data_speech(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speech_48k
) -> None:
    """Gemini's ``voiceActivity`` messages (the endpoint sends them at its
    detector's onset and end, as the Live API documents them) reach the
    client as ``data-speech`` from the model, before the turn's words."""
    sent = np.concatenate([silence(0.4), speech_48k, silence(1.2)])
    config = EndpointConfig(speed=1000.0, voice_activity=True)
    with LocalGeminiLive(config, cert_dir=tmp_path / "cert") as endpoint:
        use_endpoint_key(monkeypatch, endpoint.api_key)

        async def scenario(url: str) -> Collector:
            ws, col = await open_session(url, endpoint)
            await stream_realtime(ws, sent, RATE)
            await col.wait_for("finish", timeout=20)
            await col.close()
            return col

        with serve_ws(gemini_settings(endpoint, tmp_path / "data")) as url:
            col = asyncio.run(scenario(url))
        (record,) = endpoint.records
        activity = [m["voiceActivity"] for m in record.sent if "voiceActivity" in m]
    assert [a["type"] for a in activity] == ["ACTIVITY_START", "ACTIVITY_END"]
    start_s, end_s = (float(a["audioOffset"].removesuffix("s")) for a in activity)
    assert 0.3 < start_s < end_s  # after the leading silence, ordered
    kinds = [m["type"] for _, m in col.messages]
    speech = [m["data"] for _, m in col.messages if m["type"] == "data-speech"]
    assert speech == [
        {"state": "started", "source": "model"},
        {"state": "stopped", "source": "model"},
    ]
    stopped = max(i for i, k in enumerate(kinds) if k == "data-speech")
    assert stopped < kinds.index("data-transcript")
    assert not errors(col)
