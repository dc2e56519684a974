"""End to end on the OpenAI Realtime path — a lost session recovered on the
same client socket (audiocore_server/models/openai_recovery.py): the local
endpoint drops, stalls or expires a session mid-answer, refuses handshakes,
or is reset while a tool or an approval is pending; a session is renewed
before its limit. The transcript's rebuild rules are tested alone at the
end."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import websockets
from google.genai import types
from live_helpers import FRAME_24K, approve, errors, push_to_talk, said, say
from openai_helpers import (
    open_session,
    openai_endpoint,  # noqa: F401 (a fixture)
    openai_settings,
    serve_openai,  # noqa: F401 (a fixture)
)
from server_helpers import Collector, check_padded, serve_ws
from test_e2e import RATE
from test_run_live import APP, create_session, live_url, read_turn, texts

from audiocore_server.models.openai_transcript import MAX_ITEM_CHARS, MAX_ITEMS, Transcript
from tests.openai_realtime import LocalOpenAIRealtime


def created(endpoint: LocalOpenAIRealtime, index: int) -> list[dict[str, Any]]:
    """The items a session was given, in order."""
    return [
        e["item"]
        for e in endpoint.records[index].received
        if e["type"] == "conversation.item.create"
    ]


def message(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def notices(col: Collector) -> list[str]:
    return [m["data"]["cause"] for _, m in col.messages if m["type"] == "data-model-reconnected"]


@pytest.mark.parametrize(
    ("how", "cause"), [("abort", "drop"), ("stall", "stall"), ("expire", "limit")]
)
def test_a_session_lost_mid_answer_is_replaced_and_the_words_answered(
    endpoint: LocalOpenAIRealtime, tmp_path: Path, how: str, cause: str
) -> None:
    """The endpoint resets the connection, stops sending, or ends the
    session at its time limit, mid-answer: the cut answer ends for the
    client, a notice says the model reconnected, and a new session is given
    the conversation so far and the unanswered words, and answers them;
    the conversation goes on. No error, no close."""
    settings = openai_settings(endpoint, tmp_path / "data", model_stall_timeout_s=1.0)

    async def scenario(url: str) -> Collector:
        ws, col = await open_session(url, endpoint)
        await say(ws, "first")
        await col.wait_for("finish")
        endpoint.fail_next(how)
        await say(ws, "second")
        await col.wait_for("data-model-reconnected")
        await col.wait_for("finish", count=3)  # the cut answer's, and the new one's
        await say(ws, "third")
        await col.wait_for("finish", count=4)
        await col.close()
        return col

    with serve_ws(settings) as url:
        col = asyncio.run(scenario(url))
        with urllib.request.urlopen(
            url.replace("ws://", "http://", 1).removesuffix("/ws") + "/metrics"
        ) as page:
            metrics = page.read().decode()
    assert not errors(col)
    assert notices(col) == [cause]
    assert f'audiocore_model_recoveries_total{{cause="{cause}"}} 1.0' in metrics
    kinds = col.types()
    assert kinds.count("data-interrupted") == 1
    assert kinds.index("data-interrupted") < kinds.index("data-model-reconnected")
    assert said(col, 2) == "You said: second"
    assert said(col, 3) == "You said: third"
    first, second = endpoint.records
    # At the limit the service closes 1001 after its error; we may close first.
    assert first.close_code in {"abort": {1006}, "stall": {1000}, "expire": {1000, 1001}}[how]
    assert [e["code"] for e in first.errors] == (["session_expired"] if how == "expire" else [])
    # The new session: the answered turns rebuilt, then the words given again.
    assert created(endpoint, 1) == [
        message("user", "first"),
        message("assistant", "You said: first"),
        message("user", "second"),
        message("user", "third"),
    ]
    assert not second.errors


def test_a_spoken_turn_cut_off_is_given_again_sample_for_sample(
    openai_server: str, endpoint: LocalOpenAIRealtime, speech_48k
) -> None:
    """A push-to-talk turn whose answer is lost: the new session is given
    the user's audio again, exactly, and its answer (the endpoint's echo of
    that audio) reaches the client whole."""

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint, turnDetection="manual")
        endpoint.fail_next("abort")
        await push_to_talk(ws, speech_48k, RATE)
        await col.wait_for("data-model-reconnected")
        await col.wait_for("finish", count=2)
        await col.close()
        return col

    col = asyncio.run(scenario())
    assert not errors(col) and notices(col) == ["drop"]
    first, second = endpoint.records
    assert len(first.echoed) == len(second.echoed) == 1
    assert second.echoed[0] == first.echoed[0]  # the same samples, given again
    # What the client got after the notice is the new answer, every sample
    # once, then silence to a whole frame; the cut answer's unplayed audio
    # was dropped (``data-interrupted``), none of it after.
    notice = col.types().index("data-model-reconnected")
    echo = check_padded(col.pcm(after=notice), len(second.echoed[0]) // 2, FRAME_24K)
    assert echo.tobytes() == second.echoed[0]
    assert said(col).startswith("I heard")
    assert not second.errors


def test_a_browser_tool_in_flight_runs_once_across_a_lost_session(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """The session is lost while the browser runs a tool: the new session is
    given the call and takes its output; the tool is not asked for again."""

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await say(ws, "play jazz")
        call = await col.wait_for("tool-input-available")
        endpoint.abort_sessions()
        await col.wait_for("data-model-reconnected")
        await ws.send(
            json.dumps(
                {"type": "tool_result", "toolCallId": call["toolCallId"], "output": {"ok": 1}}
            )
        )
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    assert not errors(col) and notices(col) == ["drop"]
    calls = [m for _, m in col.messages if m["type"] == "tool-input-available"]
    assert [c["toolName"] for c in calls] == ["change_bgm"]
    call_id = calls[0]["toolCallId"]
    items = created(endpoint, 1)
    assert [i["type"] for i in items] == ["message", "function_call", "function_call_output"]
    assert items[1]["call_id"] == items[2]["call_id"] == call_id
    assert json.loads(items[2]["output"]) == {"ok": 1}
    assert said(col).startswith("change_bgm returned")
    assert "data-interrupted" not in col.types()  # no answer was under way
    assert not endpoint.records[1].errors


def test_an_answer_owed_after_a_tool_result_that_never_comes_is_recovered(
    endpoint: LocalOpenAIRealtime, tmp_path: Path
) -> None:
    """The tool's output went to the model, which never starts its answer:
    the watchdog (armed by the output) gives the session up, and the new one
    is given the call and its output and asked for the answer."""
    settings = openai_settings(endpoint, tmp_path / "data", model_stall_timeout_s=0.5)

    async def scenario(url: str) -> Collector:
        ws, col = await open_session(url, endpoint)
        await say(ws, "play jazz")
        call = await col.wait_for("tool-input-available")
        endpoint.fail_next("silent")
        await ws.send(
            json.dumps({"type": "tool_result", "toolCallId": call["toolCallId"], "output": {}})
        )
        await col.wait_for("data-model-reconnected")
        await col.wait_for("finish")
        await col.close()
        return col

    with serve_ws(settings) as url:
        col = asyncio.run(scenario(url))
    assert not errors(col) and notices(col) == ["stall"]
    assert said(col).startswith("change_bgm returned")
    types_given = [i["type"] for i in created(endpoint, 1)]
    assert types_given == ["message", "function_call", "function_call_output"]
    assert [e["type"] for e in endpoint.records[1].received][-1] == "response.create"


def test_an_approval_pending_across_a_lost_session_stays_pending(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """The session is lost while the user is asked to approve a payment: the
    request stays, the answer given after the recovery runs the tool once,
    and the new session answers with its output."""

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await say(ws, "pay 5 EUR to Alice")
        request = await col.wait_for("tool-approval-request")
        endpoint.abort_sessions()
        await col.wait_for("data-model-reconnected")
        await ws.send(approve(request))
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    assert not errors(col)
    assert col.types().count("tool-approval-request") == 1
    outputs = [m for _, m in col.messages if m["type"] == "tool-output-available"]
    assert len(outputs) == 1
    assert said(col).startswith("process_payment returned")
    (output,) = [i for i in created(endpoint, 1) if i["type"] == "function_call_output"]
    assert output["call_id"] == outputs[0]["toolCallId"]


def test_the_first_reconnect_refused_is_tried_again(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        endpoint.refused_connections = 1
        endpoint.fail_next("abort")
        await say(ws, "hello")
        await col.wait_for("data-model-reconnected")
        await col.wait_for("finish", count=2)
        await col.close()
        return col

    col = asyncio.run(scenario())
    assert not errors(col) and notices(col) == ["drop"]
    assert said(col) == "You said: hello"
    assert endpoint.refused_connections == 0 and len(endpoint.records) == 2


def test_recovery_that_keeps_failing_ends_with_the_clear_error(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """Every new session refused: after the bounded attempts the socket ends
    1011 with the loss and why it could not be recovered."""

    async def scenario() -> tuple[Any, Collector]:
        ws, col = await open_session(openai_server, endpoint)
        endpoint.refused_connections = 100
        endpoint.fail_next("abort")
        await say(ws, "hello")
        await col.task
        return ws, col

    ws, col = asyncio.run(asyncio.wait_for(scenario(), 40))
    assert ws.close_code == 1011
    (error,) = errors(col)
    assert error.startswith("the model service closed the live session: 1006"), error
    assert "recovering it failed (3 attempts failed" in error and "HTTP 503" in error
    assert col.types()[-1] == "error" and "data-interrupted" in col.types()
    assert endpoint.refused_connections == 97


def test_a_session_is_renewed_before_its_limit_at_a_quiet_moment(
    endpoint: LocalOpenAIRealtime, tmp_path: Path
) -> None:
    """Past ``openai_renew_after_s`` the session is replaced once the answer
    under way is over; the new one holds the conversation; the client is
    told nothing (nothing was lost)."""
    settings = openai_settings(endpoint, tmp_path / "data", openai_renew_after_s=0.3)

    async def scenario(url: str) -> Collector:
        ws, col = await open_session(url, endpoint)
        await say(ws, "first")
        await col.wait_for("finish")
        await endpoint.wait_for_async(lambda records: len(records) >= 2)
        await say(ws, "second")
        await col.wait_for("finish", count=2)
        await col.close()
        return col

    with serve_ws(settings) as url:
        col = asyncio.run(scenario(url))
    assert not errors(col) and not notices(col)
    assert said(col) == "You said: second"
    assert "data-interrupted" not in col.types()
    assert created(endpoint, 1)[:2] == [
        message("user", "first"),
        message("assistant", "You said: first"),
    ]
    assert endpoint.records[0].close_code == 1000


def test_adks_run_live_surface_recovers_too(endpoint: LocalOpenAIRealtime, tmp_path: Path) -> None:
    """/run_live shares the data path: the cut answer's ``interrupted``
    event, then the words answered on a new session. (ADK's protocol has
    no notice; none is sent.)"""
    settings = openai_settings(endpoint, tmp_path / "data", app_name=APP)

    async def scenario(base: str) -> list[dict[str, Any]]:
        create_session(base, "u1", "s1")
        async with websockets.connect(live_url(base, "u1", "s1"), max_size=None) as ws:
            endpoint.fail_next("abort")
            await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": "hi"}]}}))
            events = await read_turn(ws)
            await ws.send(json.dumps({"close": True}))
        return events

    with serve_ws(settings) as url:
        events = asyncio.run(scenario(url.removesuffix("/ws").replace("ws://", "http://")))
    cut = next(i for i, e in enumerate(events) if e.get("interrupted"))
    assert "outputTranscription:You said: hi" in "".join(texts(events[cut:]))
    assert not any(e.get("errorCode") for e in events)
    assert created(endpoint, 1) == [message("user", "hi")]


# ---------------------------------------------------------------- the rebuild


def _call(call_id: str) -> types.FunctionCall:
    return types.FunctionCall(id=call_id, name="f", args={"x": 1})


def test_the_rebuild_keeps_answered_turns_and_tool_outputs_only() -> None:
    transcript = Transcript()
    transcript.history([types.Content(role="user", parts=[types.Part(text="before")])])
    transcript.user_text("question")
    transcript.model_words("answer")
    transcript.answered()
    transcript.user_text("unanswered")  # given again from the ModelLink instead
    items, owed = transcript.rebuild()
    assert items == [
        message("user", "before"),
        message("user", "question"),
        message("assistant", "answer"),
    ]
    assert not owed
    # Rebuilt twice, the same (what was left out is gone for good).
    assert transcript.rebuild() == (items, False)


def test_outputs_after_the_last_answer_are_kept_and_owed() -> None:
    transcript = Transcript()
    transcript.user_text("call it")
    transcript.model_calls([_call("c1")])
    transcript.answered()  # the response that asked for the call
    transcript.tool_output("c1", '{"ok": true}')
    items, owed = transcript.rebuild()
    assert [i["type"] for i in items] == ["message", "function_call", "function_call_output"]
    assert items[1] == {
        "type": "function_call",
        "call_id": "c1",
        "name": "f",
        "arguments": '{"x": 1}',
    }
    assert owed
    transcript.answered()  # the new session answered
    assert transcript.rebuild()[1] is False


def test_the_rebuild_is_bounded_and_never_starts_with_an_orphan_output() -> None:
    """A long session keeps the latest ``MAX_ITEMS`` answered items, each
    text or output cut at ``MAX_ITEM_CHARS``; empty words add nothing; an
    output whose call went past the bound goes with it."""
    transcript = Transcript()
    transcript.user_text("")
    transcript.model_words("")
    assert transcript.rebuild() == ([], False)
    transcript.model_calls([_call("c1")])
    transcript.tool_output("c1", "x" * (10 * MAX_ITEM_CHARS))
    transcript.answered()
    (_, output), _ = transcript.rebuild()
    assert len(output["output"]) == MAX_ITEM_CHARS and output["output"].endswith("…")
    for i in range(MAX_ITEMS - 2):
        transcript.user_text(f"turn {i}")
    transcript.user_text("y" * (10 * MAX_ITEM_CHARS))  # one past the bound
    transcript.answered()
    items, owed = transcript.rebuild()
    # The call went past the bound, and its output with it: not left first.
    assert not owed and len(items) == MAX_ITEMS - 1
    assert items[0] == message("user", "turn 0")
    assert len(items[-1]["content"][0]["text"]) == MAX_ITEM_CHARS
