"""``/run_live`` on a user's agents folder, against ``adk api_server``
serving the same folder (tests/server/run_live_apps: two apps, each agent's
model an offline-model instance, so both servers run the same model).

A client written for ADK's server must see the same events from ours, event
by event once ids and timestamps are set aside: plain functions, a
``FunctionTool`` that writes state, the second app of the folder. Where ADK's
live run cannot confirm (it refuses the call, or runs a body that asks and
never resumes it), ours asks with the event ADK's ``/run_sse`` emits for the
same call, takes the answer as ADK's web client sends it, and shows the
tool's response as ``/run_sse`` does.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import websockets
from adk_server_helpers import adk_api_server
from test_run_live import FRAME, audio_of, read_turn

from audiocore_server import Settings

APPS = pathlib.Path(__file__).parent / "run_live_apps"
_VOLATILE = {"id", "timestamp", "invocationId"}


@pytest.fixture(scope="module")
def adk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("adk") / "adk.log"
    with adk_api_server(APPS, log) as url:
        yield url


@pytest.fixture
def settings(tmp_path: pathlib.Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", model="offline", agents_dir=APPS)


@pytest.fixture
def our_server(live_server: str) -> str:
    return live_server.removesuffix("/ws").replace("ws://", "http://")


def post_json(url: str, body: dict[str, Any]) -> bytes:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()  # type: ignore[no-any-return]


def create_session(base: str, app: str, session: str) -> None:
    post_json(f"{base}/apps/{app}/users/u1/sessions", {"sessionId": session})


def live_url(base: str, app: str, session: str) -> str:
    query = f"app_name={app}&user_id=u1&session_id={session}"
    return base.replace("http://", "ws://") + f"/run_live?{query}"


def is_audio(event: dict[str, Any]) -> bool:
    return any("inlineData" in p for p in event.get("content", {}).get("parts", []))


def normalised(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events without their audio, ids, timestamps and invocation ids;
    function call ids numbered in order of appearance (``call-0``, …), the
    same in calls, responses and ``longRunningToolIds``."""
    ids: dict[str, str] = {}

    def renumber(value: Any) -> Any:
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if key == "id" and isinstance(item, str) and item in ids:
                    out[key] = ids[item]
                else:
                    out[key] = renumber(item)
            return out
        if isinstance(value, list):
            return [renumber(item) for item in value]
        if isinstance(value, str) and value in ids:
            return ids[value]
        return value

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            for key in ("functionCall", "functionResponse", "originalFunctionCall"):
                call = value.get(key)
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    ids.setdefault(call["id"], f"call-{len(ids)}")
            for item in value.values():
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)

    out = []
    for event in events:
        if is_audio(event):
            continue
        kept = {k: v for k, v in event.items() if k not in _VOLATILE}
        collect(kept)
        out.append(renumber(kept))
    return out


async def typed_turns(base: str, app: str, session: str, lines: list[str]) -> list[list[Any]]:
    create_session(base, app, session)
    turns = []
    async with websockets.connect(live_url(base, app, session), max_size=None) as ws:
        for line in lines:
            await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": line}]}}))
            turns.append(await read_turn(ws))
        await ws.send(json.dumps({"close": True}))
    return turns


TURNS = {
    "desk_live": [
        'call lookup_order {"order_id": "A1"}',
        'call add_note {"note": "vip"}',
        'call add_note {"note": "called back"}',  # the state the first note wrote
        "hello",
    ],
    "travel_live": ['call search_flights {"destination": "Oslo"}'],
}


@pytest.mark.parametrize("app", sorted(TURNS))
def test_the_same_events_as_adk_api_server(adk_server: str, our_server: str, app: str) -> None:
    theirs = asyncio.run(typed_turns(adk_server, app, "same-1", TURNS[app]))
    ours = asyncio.run(typed_turns(our_server, app, "same-1", TURNS[app]))
    for line, their_turn, our_turn in zip(TURNS[app], theirs, ours, strict=True):
        assert normalised(our_turn) == normalised(their_turn), line
        their_audio, our_audio = audio_of(their_turn), audio_of(our_turn)
        # Ours leaves in whole 40 ms frames, the tail padded with silence.
        samples = len(their_audio) // 2
        assert len(our_audio) // 2 == -(-samples // FRAME) * FRAME, line
        assert our_audio[: len(their_audio)] == their_audio, line
    # The tools ran, with the state their tool context wrote.
    if app == "desk_live":
        responses = [
            p["functionResponse"]
            for e in ours[2]
            for p in e.get("content", {}).get("parts", [])
            if "functionResponse" in p
        ]
        assert responses[0]["response"] == {"notes": 2}


def sse_events(body: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])
        for line in body.decode().split("\n")
        if line.startswith("data: ")
    ]


def run_sse(base: str, session: str, message: dict[str, Any]) -> list[dict[str, Any]]:
    body = {"appName": "desk_live", "userId": "u1", "sessionId": session, "newMessage": message}
    return sse_events(post_json(f"{base}/run_sse", {**body, "streaming": False}))


def confirmation_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        p["functionCall"]
        for e in events
        for p in e.get("content", {}).get("parts", [])
        if p.get("functionCall", {}).get("name") == "adk_request_confirmation"
    ]


def answer(call: dict[str, Any], confirmed: bool, payload: Any) -> dict[str, Any]:
    """ADK's web client's answer to a confirmation request."""
    response = {"confirmed": confirmed, **({"payload": payload} if payload is not None else {})}
    reply = {"id": call["id"], "name": call["name"], "response": response}
    return {"role": "user", "parts": [{"functionResponse": reply}]}


async def our_confirmation(
    base: str, session: str, line: str, confirmed: bool, payload: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """On our /run_live: the events up to the request, and the turn after the answer."""
    create_session(base, "desk_live", session)
    async with websockets.connect(live_url(base, "desk_live", session), max_size=None) as ws:
        await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": line}]}}))
        asked: list[dict[str, Any]] = []
        async with asyncio.timeout(30):
            while not confirmation_calls(asked):
                asked.append(json.loads(await ws.recv()))
        (call,) = confirmation_calls(asked)
        await ws.send(json.dumps({"content": answer(call, confirmed, payload)}))
        after = await read_turn(ws)
        await ws.send(json.dumps({"close": True}))
    return asked, after


def without_node_info(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # run_async's events carry the agent's node path ("front_desk@1"), live
    # runs' an empty one, on ADK's server as on ours.
    return [{k: v for k, v in e.items() if k != "nodeInfo"} for e in events]


@pytest.mark.parametrize(
    ("line", "confirmed", "payload"),
    [
        ('call book_room {"room": "Blue"}', True, {"nights": 3}),
        ('call book_room {"room": "Blue"}', True, None),
        ('call delete_file {"path": "a.txt"}', True, None),
        ('call delete_file {"path": "a.txt"}', False, None),
    ],
)
def test_confirmation_is_asked_and_answered_as_on_adk_api_servers_run_sse(
    adk_server: str, our_server: str, line: str, confirmed: bool, payload: Any
) -> None:
    session = f"confirm-{confirmed}-{payload is not None}-{line.split()[1]}"
    create_session(adk_server, "desk_live", session)
    theirs = run_sse(adk_server, session, {"role": "user", "parts": [{"text": line}]})
    (their_call,) = confirmation_calls(theirs)
    their_after = run_sse(adk_server, session, answer(their_call, confirmed, payload))
    asked, after = asyncio.run(our_confirmation(our_server, session, line, confirmed, payload))

    # The call and ADK's request for it: the same events.
    their_asked = theirs[: theirs.index(next(e for e in theirs if confirmation_calls([e]))) + 1]
    assert without_node_info(normalised(asked)) == without_node_info(normalised(their_asked))
    # After the answer. Approved: the tool's response and the model's words,
    # as ADK shows them. Denied: ADK's run_async answers the model with its
    # own rejection, ours with the user's denial (docs/confirmation.md).
    ours_after, theirs_after = normalised(after), normalised(their_after)
    if confirmed and payload is None and "book_room" in line:
        # An answer without a payload: ADK gives the tool none, ours the one
        # it offered (docs/confirmation.md) — the only difference.
        ours_response = ours_after[0]["content"]["parts"][0]["functionResponse"]["response"]
        theirs_response = theirs_after[0]["content"]["parts"][0]["functionResponse"]["response"]
        assert (ours_response, theirs_response) == (
            {"booked": "Blue", "nights": 1},
            {"booked": "Blue", "nights": None},
        )
    elif confirmed:
        assert without_node_info(ours_after[:2]) == without_node_info(theirs_after[:2])
        assert ours_after[-1]["turnComplete"] is True
    else:
        (response,) = [
            p["functionResponse"]
            for e in after
            for p in e.get("content", {}).get("parts", [])
            if "functionResponse" in p
        ]
        assert response["name"] == "delete_file" and response["response"]["status"] == "denied"
        (their_response,) = [
            p["functionResponse"]
            for e in their_after
            for p in e.get("content", {}).get("parts", [])
            if "functionResponse" in p
        ]
        assert their_response["response"] == {"error": "This tool call is rejected."}


def test_adks_own_live_run_cannot_confirm(adk_server: str) -> None:
    """Why ours asks: ``adk api_server``'s /run_live answers a tool that
    requires confirmation with an error and never asks the client."""
    (turn,) = asyncio.run(
        typed_turns(adk_server, "desk_live", "adk-live-1", ['call delete_file {"path": "a.txt"}'])
    )
    assert confirmation_calls(turn) == []
    responses = [
        p["functionResponse"]["response"]
        for e in turn
        for p in e.get("content", {}).get("parts", [])
        if "functionResponse" in p
    ]
    assert responses and "requires confirmation" in responses[0]["error"]
