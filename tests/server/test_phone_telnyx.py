"""The second carrier: Telnyx media streaming on the same data path as a
Twilio call, with only its envelope changed (snake_case, no stream id in
what it is sent, frames that may come out of order, a token in the stream
URL instead of a signature). Real uvicorn, the real runner, the offline
model; ``phone_helpers.TwilioCall`` speaking Telnyx's envelope."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import websockets
from phone_helpers import RATE, TwilioCall, decoded, mulaw
from server_helpers import uvicorn_thread
from test_e2e import aligned_correlation
from test_phone import silence, speech_8k, the_call, wait_until

from audiocore_server import Settings, create_app
from audiocore_server.phone.call_dialect import REORDER_WINDOW, InOrder
from audiocore_server.wire import telnyx
from audiocore_server.wire.fields import InputError

STREAM_TOKEN = "telnyx-stream-token-0123456789"


@pytest.fixture
def server(settings: Settings) -> Iterator[tuple[Any, str]]:
    app = create_app(dataclasses.replace(settings, telnyx_stream_token=STREAM_TOKEN))
    with uvicorn_thread(app, log_level="warning", ws_per_message_deflate=False) as (host, port):
        yield app, f"{host}:{port}"


@contextlib.asynccontextmanager
async def call(address: str, parameters: dict[str, str] | None = None):
    ws = await websockets.connect(f"ws://{address}/phone/telnyx?token={STREAM_TOKEN}")
    phone = TwilioCall(ws, stream_sid="32DE0DEA-1", call_sid="v3:call-1", carrier="telnyx")
    try:
        await phone.connect(parameters)
        yield phone
    finally:
        await phone.hang_up()


def test_frames_out_of_order_echo_in_order(server, speech_48k: np.ndarray) -> None:
    app, address = server
    speech = speech_8k(speech_48k)
    sent = mulaw(np.concatenate([silence(0.4), speech, silence(1.2)]))

    async def scenario() -> None:
        async with call(address) as phone:
            await phone.speak(sent, swapped=True)
            want = len(speech) + int(0.3 * RATE)
            await phone.wait_for(lambda: len(phone.audio) >= want, what="the echo")
            echo = decoded(bytes(phone.audio[:want]))
            assert aligned_correlation(echo, decoded(sent)) >= 0.99
            assert {m["event"] for m in phone.events} == {"media", "mark"}
            await phone.wait_for(lambda: len(phone.replied) >= 5, what="marks played")
            assert the_call(app).dialect.marks.played_seconds() > 0

    asyncio.run(scenario())


def test_speech_over_an_answer_clears_it(server, speech_48k: np.ndarray) -> None:
    _, address = server
    speech = speech_8k(speech_48k)

    async def scenario() -> None:
        async with call(address) as phone:
            await phone.speak(mulaw(np.concatenate([speech, silence(1.0)])))
            await phone.wait_for(lambda: phone.count("media") >= 10, what="the answer")
            await phone.speak(mulaw(speech[: RATE // 2]))
            await phone.wait_for(lambda: phone.count("clear") == 1, what="clear")
            assert len(phone.audio) < len(speech)

    asyncio.run(scenario())


def test_dtmf_and_stop(server) -> None:
    app, address = server

    async def scenario() -> None:
        ws = await websockets.connect(f"ws://{address}/phone/telnyx?token={STREAM_TOKEN}")
        phone = TwilioCall(ws, stream_sid="32DE0DEA-2", call_sid="v3:call-2", carrier="telnyx")
        await phone.connect({"user": "bob"})
        await phone.dtmf("#")
        await phone.wait_for(lambda: phone.count("media") > 0, what="the answer")
        assert the_call(app).dialect.start.call_sid == "v3:call-2"
        await phone.stop()
        await phone.finish()
        assert ws.close_code == 1000

    asyncio.run(scenario())
    wait_until(lambda: not app.state.connections and app.state.runtime.agents.live_runs == 0)


@pytest.mark.parametrize("query", ["", "?token=", "?token=wrong-token-0123456789012"])
def test_the_stream_refuses_a_missing_or_wrong_token(server, query: str, caplog) -> None:
    app, address = server

    async def scenario() -> None:
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(f"ws://{address}/phone/telnyx{query}")
        assert refused.value.response.status_code == 403

    with caplog.at_level(logging.WARNING):
        asyncio.run(scenario())
    assert "Telnyx stream token missing or wrong" in caplog.text
    assert STREAM_TOKEN not in caplog.text
    assert not app.state.connections


def test_telnyx_reports_and_bad_frames_are_logged_and_the_call_goes_on(
    server, speech_48k: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    _, address = server
    speech = speech_8k(speech_48k)
    bad = [
        ('{"event": "error", "payload": {"code": 100004, "title": "invalid_media"}}', "100004"),
        ('{"event": "media", "media": {"payload": "!!", "chunk": "1"}}', "expected base64"),
        ('{"event": "media", "media": {"payload": "", "chunk": "-3"}}', "media.chunk"),
        ('{"event": "hello"}', "telnyx: expected an event of"),
    ]

    async def scenario() -> None:
        async with call(address) as phone:
            for frame, _ in bad:
                await phone.raw(frame)
            await phone.speak(mulaw(np.concatenate([speech, silence(1.0)])))
            await phone.wait_for(lambda: len(phone.audio) >= len(speech), what="the echo")

    with caplog.at_level(logging.WARNING, logger="audiocore_server"):
        asyncio.run(scenario())
    lines = [r.getMessage() for r in caplog.records if "phone call v3:call-1" in r.getMessage()]
    for _, expected in bad:
        assert any(expected in line for line in lines), (expected, lines)


def test_in_order_holds_early_frames_and_gives_up_a_lost_one() -> None:
    in_order = InOrder()
    assert in_order.put(1, b"1") == [b"1"]
    assert in_order.put(3, b"3") == []  # 2 is late
    assert in_order.put(2, b"2") == [b"2", b"3"]
    assert in_order.put(2, b"2") == [] and in_order.dropped == 1  # a duplicate
    # 4 never comes: the window's frames wait, then go without it.
    got = [in_order.put(5 + k, bytes([5 + k])) for k in range(REORDER_WINDOW)]
    assert got[:-1] == [[]] * (REORDER_WINDOW - 1)
    assert got[-1] == [bytes([5 + k]) for k in range(REORDER_WINDOW)]
    assert in_order.put(4, b"4") == [] and in_order.dropped == 2  # too late now
    assert in_order.put(None, b"x") == [b"x"]  # a carrier without counts: as it comes


def test_the_start_names_its_format() -> None:
    start = (
        '{"event": "start", "stream_id": "s", "start": {"call_control_id": "v3:c",'
        ' "media_format": {"encoding": "PCMA", "sample_rate": 8000, "channels": 1}}}'
    )
    with pytest.raises(InputError, match="start.media_format: expected"):
        telnyx.decode(start)
    ok = start.replace("PCMA", "PCMU")
    assert telnyx.decode(ok) == telnyx.StreamStart("s", "v3:c", "", {})


@pytest.mark.parametrize("encoding", ["PCMU", "audio/x-mulaw"])
def test_the_start_as_telnyx_documents_it(encoding: str) -> None:
    """Telnyx's documented start: no custom_parameters, the call's
    client_state (base64) beside its ids; μ-law spelled either way."""
    state = base64.b64encode(json.dumps({"app": "desk", "user": "alice"}).encode()).decode()
    documented = {
        "event": "start",
        "sequence_number": "1",
        "start": {
            "user_id": "3E6F995F-85F7-4705-9741-53B116D28237",
            "call_control_id": "v2:T02llQxIyaRkhfRKxgAP8nY511EhFLizdvdUKJiSw8d6A9BborherQ",
            "call_session_id": "ff55a038-6f5d-11ef-9692-02420aeffb1f",
            "from": "+13122010094",
            "to": "+13122123456",
            "tags": ["TAG1", "TAG2"],
            "client_state": state,
            "media_format": {"encoding": encoding, "sample_rate": 8000, "channels": 1},
        },
        "stream_id": "32DE0DEA-53CB-4B21-89A4-9E1819C043BC",
    }
    start = telnyx.decode(json.dumps(documented))
    assert isinstance(start, telnyx.StreamStart)
    assert start.stream_sid == "32DE0DEA-53CB-4B21-89A4-9E1819C043BC"
    assert start.call_sid.startswith("v2:T02ll")
    assert start.custom_parameters == {"app": "desk", "user": "alice"}
    # A client_state of the application's own is no parameters, not an error.
    documented["start"]["client_state"] = "aGF2ZSBhIG5pY2UgZGF5ID1d"
    assert telnyx.decode(json.dumps(documented)).custom_parameters == {}
    # custom_parameters win, in either shape Call Control takes.
    documented["start"]["custom_parameters"] = [{"name": "app", "value": "kiosk"}]
    assert telnyx.decode(json.dumps(documented)).custom_parameters == {"app": "kiosk"}
    documented["start"]["custom_parameters"] = [{"name": "app"}]
    with pytest.raises(InputError, match="start.custom_parameters: expected"):
        telnyx.decode(json.dumps(documented))
