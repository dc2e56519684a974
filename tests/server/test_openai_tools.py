"""End to end on the OpenAI Realtime path — tools (two in one step, a
browser tool) and background tasks, unchanged from the other models (see
test_openai_e2e.py for the setup; a server tool, an approval, images and
memory are test_provider_contract.py's)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from live_helpers import approve, errors, said, say
from openai_helpers import (
    open_session,
    openai_endpoint,  # noqa: F401 (a fixture)
    openai_settings,
    received,
    serve_openai,  # noqa: F401 (a fixture)
)
from server_helpers import Collector, serve_ws

from tests.openai_realtime import LocalOpenAIRealtime

# A fact that tries to end the memory block and speak as the system.

# ---------------------------------------------------------------- tools


def test_two_calls_in_one_step_get_one_response_create(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """A server tool and an approval tool in one response: both outputs go
    back, then one response.create — not one per call."""

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await say(ws, "pay 5 EUR to Alice and what time is it")
        await ws.send(approve(await col.wait_for("tool-approval-request")))
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    calls = [m for _, m in col.messages if m["type"] == "tool-input-available"]
    assert {c["toolName"] for c in calls} == {"process_payment", "get_current_time"}
    events = [e for e in endpoint.records[0].received if e["type"] != "input_audio_buffer.append"]
    kinds = [e["type"] for e in events]
    assert kinds == [
        "session.update",
        "conversation.item.create",
        "response.create",
        "conversation.item.create",
        "conversation.item.create",
        "response.create",
    ]
    answered = {e["item"]["call_id"] for e in events[3:5]}
    assert answered == {c["toolCallId"] for c in calls}
    assert col.types().count("finish") == 1 and not endpoint.records[0].errors
    assert "process_payment returned" in said(col) and "get_current_time returned" in said(col)


def test_browser_tool_result_goes_back_as_function_call_output(
    openai_server: str, endpoint: LocalOpenAIRealtime
) -> None:
    """change_bgm runs in the browser: the client's result is the output."""

    async def scenario() -> Collector:
        ws, col = await open_session(openai_server, endpoint)
        await say(ws, "play jazz")
        call = await col.wait_for("tool-input-available")
        assert call["toolName"] == "change_bgm"
        assert call["providerMetadata"] == {"audiocore": {"clientExecutes": True}}
        result = {"playing": "jazz", "volume": 0.4}
        await ws.send(
            json.dumps({"type": "tool_result", "toolCallId": call["toolCallId"], "output": result})
        )
        await col.wait_for("finish")
        await col.close()
        return col

    col = asyncio.run(scenario())
    call = next(m for _, m in col.messages if m["type"] == "tool-input-available")
    (output,) = [e["item"] for e in received(endpoint, "conversation.item.create")][1:]
    assert output["call_id"] == call["toolCallId"]
    assert json.loads(output["output"]) == {"playing": "jazz", "volume": 0.4}
    assert said(col).startswith("change_bgm returned") and not endpoint.records[0].errors


def test_a_background_tasks_outcome_is_told_on_the_openai_path(
    endpoint: LocalOpenAIRealtime, tmp_path: Path
) -> None:
    """start_task answers at once; the task runs on, and its outcome is
    handed to the model as a turn of its own when the line is free."""
    objective = "sum the amount column of sales.csv"

    async def scenario(url: str) -> Collector:
        ws, col = await open_session(url, endpoint)
        await say(ws, f"start a task to {objective}")
        await col.wait_for("finish")
        await col.wait_for("finish", count=2, timeout=30)  # the outcome, told
        await col.close()
        return col

    settings = openai_settings(endpoint, tmp_path / "data", task_offline_delay_s=0.0)
    with serve_ws(settings) as url:
        col = asyncio.run(scenario(url))
    started = next(m for _, m in col.messages if m["type"] == "tool-output-available")["output"]
    told = said(col, 1)
    assert told.startswith(f"You said: [background task {started['taskId']} completed]")
    texts = [
        p["text"]
        for e in received(endpoint, "conversation.item.create")
        if e["item"]["type"] == "message"
        for p in e["item"]["content"]
    ]
    assert texts[0] == f"start a task to {objective}" and objective in texts[1]
    assert not errors(col) and not endpoint.records[0].errors
