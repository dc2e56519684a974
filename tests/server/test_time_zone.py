"""``get_current_time`` in the client's time zone (seed 002's realtime tool).

A client declares its IANA zone in ``start.timeZone``; the offline model
calls the tool on "what time is it" and answers from its result. The tests
read the clock in that zone just before and just after the turn: the tool's
instant must lie between them, so the zone (and not the server's own, nor
UTC) reached the tool. Kathmandu is +05:45, an offset no other zone near the
test machine's shares.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import zoneinfo
from typing import Any

import pytest
import websockets
from server_helpers import receive_until, serve_ws, start
from starlette.testclient import TestClient
from test_run_live import APP, create_session, live_url, read_turn
from test_seed_dialect import SeedStream, submit, user

from audiocore_server import Settings
from audiocore_server.live.handshake import DEFAULT_START
from audiocore_server.storage.users import USER_ID
from audiocore_server.wire import protocol
from audiocore_server.wire.fields import InputError

ZONE = "Asia/Kathmandu"


def now_in(zone: str) -> datetime.datetime:
    # The tool gives whole seconds: so must the bounds.
    return datetime.datetime.now(zoneinfo.ZoneInfo(zone)).replace(microsecond=0)


def tool_instant(output: dict[str, Any]) -> datetime.datetime:
    return datetime.datetime.fromisoformat(
        f"{output['date']}T{output['time']}{output['utcOffset']}"
    )


def check_turn(turn: list[dict[str, Any]], zone: str, before: datetime.datetime) -> None:
    after = now_in(zone)
    call = next(m for m in turn if m["type"] == "tool-input-available")
    assert call["toolName"] == "get_current_time" and call["input"] == {}
    output = next(m for m in turn if m["type"] == "tool-output-available")["output"]
    assert output["timezone"] == zone
    instant = tool_instant(output)
    assert before <= instant <= after, (before, output, after)
    assert instant.utcoffset() == after.utcoffset()  # the zone's own offset, now
    answer = next(m for m in turn if m["type"] == "text-delta")["delta"]
    assert answer == f"It is {output['time']} ({zone})."


def ask_the_time(ws: Any) -> list[dict[str, Any]]:
    ws.send_text(json.dumps({"type": "text", "text": "What time is it?"}))
    return receive_until(ws, "finish")


def test_the_time_is_told_in_the_zone_the_client_declared(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws, timeZone=ZONE, turnDetection="manual")
        before = now_in(ZONE)
        turn = ask_the_time(ws)
    check_turn(turn, ZONE, before)


def stored_state(client: TestClient, session_id: str) -> dict[str, Any]:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]

    async def read() -> dict[str, Any]:
        session = await runtime.sessions.service.get_session(
            app_name=runtime.settings.app_name, user_id=USER_ID, session_id=session_id
        )
        return dict(session.state)

    return client.portal.call(read)  # type: ignore[union-attr]


def test_no_zone_is_utc_even_in_a_session_another_client_gave_one(client: TestClient) -> None:
    """The zone is the connection's, never stored with the session."""
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws, timeZone=ZONE, turnDetection="manual")["data"]["sessionId"]
        before = now_in(ZONE)
        check_turn(ask_the_time(ws), ZONE, before)
    assert not [key for key in stored_state(client, session_id) if "time_zone" in key]
    with client.websocket_connect("/ws") as ws:
        start(ws, sessionId=session_id, turnDetection="manual")
        before = now_in("UTC")
        turn = ask_the_time(ws)
    check_turn(turn, "UTC", before)


def test_a_zone_the_user_names_wins_over_the_clients(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws, timeZone=ZONE, turnDetection="manual")
        ws.send_text(
            json.dumps(
                {"type": "text", "text": 'call get_current_time {"timezone": "Europe/Paris"}'}
            )
        )
        turn = receive_until(ws, "finish")
    output = next(m for m in turn if m["type"] == "tool-output-available")["output"]
    assert output["timezone"] == "Europe/Paris"
    paris = now_in("Europe/Paris")
    assert tool_instant(output).utcoffset() == paris.utcoffset()


@pytest.mark.parametrize(
    ("zone", "error"),
    [
        ("Mars/Olympus_Mons", "timeZone: unknown time zone 'Mars/Olympus_Mons'"),
        ("../../etc/passwd", 'timeZone: expected an IANA time zone name such as "Europe/Paris"'),
        ("Europe/" + "x" * 60, 'timeZone: expected an IANA time zone name such as "Europe/Paris"'),
        (9, "timeZone: expected an IANA time zone name, got int"),
    ],
)
def test_a_bad_zone_is_an_error_and_the_socket_goes_on_in_utc(
    client: TestClient, zone: Any, error: str
) -> None:
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "start", "timeZone": zone, "turnDetection": "manual"}))
        opening = receive_until(ws, "error")
        assert opening[-1]["errorText"] == error
        before = now_in("UTC")
        turn = ask_the_time(ws)
    check_turn(turn, "UTC", before)


def test_decode_start_time_zone() -> None:
    def decode(**fields: Any) -> protocol.Start:
        message = protocol.decode_text(
            json.dumps({"type": "start", **fields}), DEFAULT_START.input, protocol.Limits()
        )
        assert isinstance(message, protocol.Start)
        return message

    assert decode().time_zone is None
    for zone in ("UTC", "Europe/Paris", "America/Argentina/Buenos_Aires", "Etc/GMT+5"):
        assert decode(timeZone=zone).time_zone == zone
    for bad in ("", "Europe/", "/etc/localtime", "Europe/Paris/", {}, True):
        with pytest.raises(InputError, match="timeZone: "):
            decode(timeZone=bad)


def test_the_seed_dialect_takes_the_zone_from_an_optional_start(client: TestClient) -> None:
    """The seed's own client sends no ``start`` (UTC); one that does is heard."""
    with client.websocket_connect("/live") as ws:
        ws.send_text(json.dumps({"type": "start", "timeZone": ZONE}))
        stream = SeedStream(ws)
        before = now_in(ZONE)
        submit(ws, [user("what time is it")])
        turn = stream.read()
    check_turn(turn, ZONE, before)


def test_over_a_real_socket(live_server: str) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with websockets.connect(live_server) as ws:
            await ws.send(json.dumps({"type": "start", "timeZone": ZONE}))
            assert json.loads(await ws.recv())["type"] == "data-session"
            await ws.send(json.dumps({"type": "text", "text": "what time is it"}))
            seen: list[dict[str, Any]] = []
            while not seen or seen[-1]["type"] != "finish":
                seen.append(json.loads(await ws.recv()))
            return seen

    before = now_in(ZONE)
    check_turn(asyncio.run(scenario()), ZONE, before)


def test_a_run_live_client_sets_the_zone_with_a_state_delta(tmp_path: Any) -> None:
    """ADK's /run_live has no ``start``: its client writes ``temp:time_zone``
    itself, in the request that asks the time."""
    settings = Settings(data_dir=tmp_path / "data", model="offline", app_name=APP)

    async def scenario(base: str) -> list[dict[str, Any]]:
        create_session(base, "u1", "tz-1")
        async with websockets.connect(live_url(base, "u1", "tz-1")) as ws:
            content = {"role": "user", "parts": [{"text": "what time is it"}]}
            await ws.send(json.dumps({"content": content, "state_delta": {"temp:time_zone": ZONE}}))
            return await read_turn(ws)

    with serve_ws(settings) as url:
        before = now_in(ZONE)
        events = asyncio.run(scenario(url.removesuffix("/ws").replace("ws://", "http://")))
    after = now_in(ZONE)
    responses = [
        part["functionResponse"]["response"]
        for event in events
        for part in event.get("content", {}).get("parts", [])
        if "functionResponse" in part
    ]
    assert len(responses) == 1 and responses[0]["timezone"] == ZONE
    assert before <= tool_instant(responses[0]) <= after
