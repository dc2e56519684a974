"""The bound on an open session's in-memory history (audiocore_server/storage/history.py).

The bound must hold while a conversation goes on, must never drop what ADK
looks up during the run (a tool call its answer is matched to), and must
leave the store's history whole.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from google.adk.events import Event, EventActions
from google.genai import types
from server_helpers import receive_until, start
from starlette.testclient import TestClient
from test_tools import PAY, approval_of, approve, ask

from audiocore_server import Settings, create_app
from audiocore_server.storage.history import bound_history
from audiocore_server.storage.sessions import SharedConnectionSqliteSessionService
from audiocore_server.storage.users import USER_ID


def _text(author: str, text: str) -> Event:
    return Event(author=author, content=types.Content(role="user", parts=[types.Part(text=text)]))


def _call(call_id: str) -> Event:
    call = types.FunctionCall(id=call_id, name="process_payment", args={})
    return Event(
        author="agent", content=types.Content(role="model", parts=[types.Part(function_call=call)])
    )


def test_only_plain_older_events_go() -> None:
    call, state = _call("c1"), Event(author="agent", actions=EventActions(state_delta={"k": 1}))
    scoped = _text("agent", "scoped")
    scoped.isolation_scope = "task-1"
    events = [call, state, scoped] + [_text("user", f"t{i}") for i in range(17)]
    assert len(events) == 20
    bound_history(events, 5)
    assert events[:3] == [call, state, scoped]
    assert [e.content.parts[0].text for e in events[3:]] == [f"t{i}" for i in range(12, 17)]
    before = list(events)
    bound_history(events, 5)  # 8 events: not due
    assert events == before


def test_unbounded_and_not_due() -> None:
    events = [_text("user", str(i)) for i in range(50)]
    bound_history(events, 0)
    assert len(events) == 50
    bound_history(events, 7)  # 50 is no multiple of 7: not due
    assert len(events) == 50


def test_the_store_keeps_everything(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = SharedConnectionSqliteSessionService(
            str(tmp_path / "s.db"), live_history_events=4
        )
        session = await service.create_session(app_name="a", user_id="u")
        await service.append_event(session, _call("kept"))
        for i in range(40):
            await service.append_event(session, _text("user", f"turn {i}"))
            assert len(session.events) < 2 * 4 + 1
        assert session.events[0].get_function_calls()[0].id == "kept"
        stored = await service.get_session(app_name="a", user_id="u", session_id=session.id)
        assert stored is not None and len(stored.events) == 41
        await service.close()

    asyncio.run(scenario())


def test_a_long_conversation_stays_bounded_and_a_tool_call_still_resolves(
    settings: Settings,
) -> None:
    keep = 1  # trimmed at every append: only what is kept on purpose survives
    with TestClient(create_app(replace(settings, live_history_events=keep))) as client:
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        service = runtime.sessions.service
        lengths: list[int] = []
        append = service.append_event

        async def counted(session: Any, event: Event) -> Event:
            stored = await append(session, event)
            lengths.append(len(session.events))
            return stored

        service.append_event = counted
        turns = 12
        with client.websocket_connect("/ws") as ws:
            session_id = start(ws)["data"]["sessionId"]
            for i in range(turns):
                ws.send_text(json.dumps({"type": "text", "text": f"hello number {i}"}))
                receive_until(ws, "finish")
            # A tool round trip works with the history trimmed at every event.
            asked = ask(ws, PAY)
            approve(ws, approval_of(asked)["approvalId"])
            rest = receive_until(ws, "finish")
            output = next(m for m in rest if m["type"] == "tool-output-available")
            assert output["output"]["success"] is True

        assert len(lengths) >= 2 * turns  # each turn stored its events
        # The newest event, plus the few kept on purpose: the session's own
        # state, the payment's call, its confirmation and their answers.
        assert max(lengths) <= keep + 8

        async def stored_texts() -> list[str]:
            session = await service.get_session(
                app_name=runtime.settings.app_name, user_id=USER_ID, session_id=session_id
            )
            return [
                part.text
                for event in session.events
                if event.author == "user" and event.content
                for part in event.content.parts or []
                if part.text
            ]

        texts = client.portal.call(stored_texts)  # type: ignore[union-attr]
        assert [t for t in texts if t.startswith("hello number")] == [
            f"hello number {i}" for i in range(turns)
        ]


def test_the_setting(tmp_path: Path) -> None:
    assert Settings(data_dir=tmp_path).live_history_events == 50
    problems = Settings(data_dir=tmp_path, live_history_events=-1).problems()
    assert "live_history_events: expected 0 (all) or more, got -1" in problems
    assert Settings(data_dir=tmp_path, live_history_events=0).problems() == []
    env = {"AUDIOCORE_LIVE_HISTORY_EVENTS": "0"}
    assert Settings.from_env(env).live_history_events == 0
