"""Message floods: every kind has a rate; a flood is dropped with one error,
then closed with 1008 and a reason that says what the client did."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from audiocore_server import Settings, create_app
from audiocore_server.live.budget import RATES, AddressBudgets, MessageBudget, Rate, TokenBucket
from audiocore_server.live.shutdown import Shutdown
from audiocore_server.wire import protocol
from tests.server.server_helpers import start


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_gives_its_burst_then_its_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(Rate(per_s=10, burst=3), clock.now)
    assert [bucket.take(clock.now) for _ in range(4)] == [True, True, True, False]
    clock.now += 0.1  # one token's worth
    assert bucket.take(clock.now) and not bucket.take(clock.now)
    clock.now += 100  # never more than the burst
    assert sum(bucket.take(clock.now) for _ in range(10)) == 3


def _received(budget: MessageBudget, message: protocol.ClientMessage) -> str | None:
    """What the connection does with a frame holding ``message``."""
    refused = budget.admit_frame()
    return refused if refused is not None else budget.admit(message)


def test_a_flood_is_told_once_an_episode_then_closed() -> None:
    clock = Clock()
    budget = MessageBudget(
        AddressBudgets(share=4, clock=clock).take("a"), close_after=5, clock=clock
    )
    ping = protocol.Ping(None)
    burst = int(RATES["ping"].burst)
    assert [_received(budget, ping) for _ in range(burst)] == [None] * burst
    first = _received(budget, ping)
    assert first is not None and first.startswith("too many pings")
    assert [_received(budget, ping) for _ in range(4)] == [""] * 4  # dropped, already told
    clock.now += 1.0  # the rate falls: the episode is over
    assert _received(budget, ping) is None
    with pytest.raises(Shutdown) as closed:  # a new episode, too long this time
        for _ in range(100):
            _received(budget, ping)
    assert closed.value.code == protocol.CLOSE_POLICY_VIOLATION
    assert closed.value.reason == "too many pings"
    # Another kind is not held back by the pings.
    assert _received(budget, protocol.ActivityStart()) is None


def test_a_flood_just_above_the_rate_is_one_episode() -> None:
    clock = Clock()
    budget = MessageBudget(
        AddressBudgets(share=4, clock=clock).take("a"), close_after=10**6, clock=clock
    )
    edge = protocol.ActivityStart()
    rate = RATES["edge"]
    told = [_received(budget, edge) for _ in range(int(rate.burst) + 1)][-1]
    assert told
    for _ in range(200):  # twice the rate, for 10 s: a token now and then
        clock.now += 0.5 / rate.per_s
        assert _received(budget, edge) in (None, "")
    clock.now += rate.burst / rate.per_s  # quiet until the bucket is full
    assert _received(budget, edge) is None  # the episode is over
    for _ in range(int(rate.burst) - 1):
        assert _received(budget, edge) is None
    assert _received(budget, edge)  # a new episode is told again


def test_errors_about_bad_input_have_a_rate_of_their_own() -> None:
    clock = Clock()
    budget = MessageBudget(
        AddressBudgets(share=4, clock=clock).take("a"), close_after=5, clock=clock
    )
    burst = int(RATES["error"].burst)
    assert [budget.may_report() for _ in range(burst + 3)] == [True] * burst + [False] * 3
    clock.now += 1 / RATES["error"].per_s
    assert budget.may_report()


def test_an_addresses_sockets_share_its_frames() -> None:
    clock = Clock()
    budgets = AddressBudgets(share=4, clock=clock)
    sockets = [
        MessageBudget(budgets.take("10.0.0.1"), close_after=10**6, clock=clock) for _ in range(8)
    ]
    admitted = sum(s.admit_frame() is None for s in sockets for _ in range(1000))
    assert admitted == RATES["frame"].burst * 4  # the share: four connections' worth, not eight
    other = MessageBudget(budgets.take("10.0.0.2"), close_after=10)
    assert other.admit_frame() is None
    for _ in range(8):
        budgets.release("10.0.0.1")
    budgets.release("10.0.0.2")
    fresh = MessageBudget(budgets.take("10.0.0.1"), close_after=10)
    assert fresh.admit_frame() is None  # the last socket gone: a new bucket


@pytest.fixture
def flood_client(settings: Settings) -> Any:
    # Rates a millionth of the real ones: nothing refills while a flood is
    # read, however slowly the machine reads it.
    flooding = replace(settings, max_dropped_messages=200, client_rate_scale=1e-6)
    with TestClient(create_app(flooding)) as client:
        yield client


def _flood(
    ws: Any, message: dict[str, Any], count: int
) -> tuple[list[dict[str, Any]], WebSocketDisconnect]:
    """Send ``count`` copies, then read until the server closes; returns
    what came back and the close."""
    text = json.dumps(message)
    for _ in range(count):
        ws.send_text(text)
    got: list[dict[str, Any]] = []
    with pytest.raises(WebSocketDisconnect) as closed:
        while True:
            got.append(ws.receive_json())
    return got, closed.value


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ({"type": "ping", "timestamp": 1}, "too many pings"),
        ({"type": "activity_start"}, "too many turn edges"),
        ({"type": "audio_control", "action": "stop"}, "too many turn edges"),
        (
            {"type": "tool_approval", "approvalId": "apr_x", "approved": True},
            "too many tool answers",
        ),
        ({"type": "task_cancel", "taskId": "t1"}, "too many task_cancel messages"),
        ({"type": "interrupt"}, "too many interrupts"),
    ],
)
def test_a_flood_of_any_kind_closes_with_1008_saying_so(
    flood_client: TestClient, message: dict[str, Any], reason: str
) -> None:
    with flood_client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        got, closed = _flood(ws, message, 2000)
    errors = [m["errorText"] for m in got if m["type"] == "error"]
    told = [e for e in errors if e.startswith(reason)]
    assert told[0].endswith("dropped until the rate falls") and told[-1] == f"{reason}: closing"
    assert len(told) == 2  # once when the episode began, once at the close
    assert closed.code == protocol.CLOSE_POLICY_VIOLATION and closed.reason == reason


def test_a_client_within_the_rates_is_never_dropped(flood_client: TestClient) -> None:
    with flood_client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        for k in range(int(RATES["ping"].burst)):
            ws.send_text(json.dumps({"type": "ping", "timestamp": k}))
        ws.send_text(json.dumps({"type": "text", "text": "still here"}))
        got = []
        while not got or got[-1]["type"] != "finish":
            got.append(ws.receive_json())
    assert not [m for m in got if m["type"] == "error"]
