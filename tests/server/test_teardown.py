"""A finished connection is freed by reference counting alone: none of its
objects is left in a reference cycle that only the collector would free (a
connection's objects waiting for it made each collection under a reconnect
flood stall every stream for 10-20 ms)."""

from __future__ import annotations

import gc
import json
import time
import weakref
from collections.abc import Callable, Iterator

import pytest
import websockets.sync.client
from websockets.exceptions import ConnectionClosed

from audiocore_server.app import create_app
from audiocore_server.gate.http_limits import BoundedSendWebSockets
from audiocore_server.live.connection import LiveConnection
from audiocore_server.settings import Settings
from tests.server.server_helpers import uvicorn_thread

START = json.dumps({"type": "start", "turnDetection": "manual"})
# The server's echo canceller on the microphone, the pacer telling it what plays.
START_SERVER_AEC = json.dumps(
    {"type": "start", "turnDetection": "manual", "echoCancellation": "server"}
)


@pytest.fixture
def without_collector(monkeypatch) -> Iterator[list[weakref.ref]]:
    """The collector off (the server's own full collections too); yields the
    weak references of every connection made meanwhile."""
    made: list[weakref.ref] = []
    init = LiveConnection.__init__

    def watched(self: LiveConnection, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        made.append(weakref.ref(self))

    monkeypatch.setattr(LiveConnection, "__init__", watched)
    gc.collect()  # what earlier tests left
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield made
    finally:
        if was_enabled:
            gc.enable()


# What one conversation makes: ours, and ADK's invocation of it. (Not the
# app's parts: an app an earlier test made may still be on its way out.)
PER_CONNECTION = (
    "audiocore_server.live.connection.",
    "audiocore_server.live.conversation.",
    "audiocore_server.live.request_queue.",
    "audiocore_server.turns.events.",
    "audiocore_server.live.sender.",
    "audiocore_server.live.playout.",
    "audiocore_server.audio.pacer.",
    "audiocore_server.live.mic.",
    "audiocore_server.live.uplink.",
    "audiocore_server.live.outcomes.",
    "audiocore_server.live.model_events.",
    "audiocore_server.audio.voice.",
    "audiocore_server.audio.echo.",
    "google.adk.agents.invocation_context.",
    "google.adk.sessions.session.",
)


def _cyclic_garbage() -> list[str]:
    """The types of a conversation's objects that only the collector would
    free (collected here, and kept for a look)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        COLLECT()
        found = [type(o) for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    names = {f"{kind.__module__}.{kind.__qualname__}" for kind in found}
    return sorted(name for name in names if name.startswith(PER_CONNECTION))


COLLECT = gc.collect  # the real one: the fixture stubs it for the server


def _until(condition: Callable[[], bool], what: str) -> None:
    ends = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < ends, what
        time.sleep(0.01)


def _text_turn(ws) -> None:
    ws.send(json.dumps({"type": "text", "text": "hello there"}))
    while json.loads(message := ws.recv(timeout=30))["type"] != "finish":
        assert json.loads(message)["type"] != "error", message


def _closed_by_flood(ws) -> None:
    with pytest.raises(ConnectionClosed) as closed:
        for _ in range(100_000):
            ws.send('{"type":"activity_start"}')
        while True:
            ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


def _gone_mid_turn(ws) -> None:
    ws.send(json.dumps({"type": "text", "text": "tell me a long story"}))
    ws.recv(timeout=30)  # the turn has begun
    ws.socket.close()  # no close frame: the client just vanishes


@pytest.mark.parametrize("start", [START, START_SERVER_AEC], ids=["default", "server-aec"])
@pytest.mark.parametrize(
    "how", [_text_turn, _closed_by_flood, _gone_mid_turn], ids=lambda f: f.__name__
)
def test_a_finished_connection_is_freed_without_the_collector(
    tmp_path, without_collector, how, start
):
    settings = Settings(data_dir=tmp_path, allowed_hosts=("127.0.0.1",))
    with uvicorn_thread(create_app(settings), log_level="warning", ws=BoundedSendWebSockets) as (
        host,
        port,
    ):
        for _ in range(2):  # the first also loads what every later one shares
            with websockets.sync.client.connect(f"ws://{host}:{port}/ws") as ws:
                ws.send(start)
                assert json.loads(ws.recv(timeout=30))["type"] == "data-session"
                how(ws)
        made = without_collector
        assert len(made) == 2
        _until(lambda: all(ref() is None for ref in made), "a connection is still held")
        assert _cyclic_garbage() == []
