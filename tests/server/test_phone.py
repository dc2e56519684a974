"""Calls from the phone network: Twilio's webhook and media stream on real
uvicorn, the real ADK runner and the offline model (which echoes what it
heard), driven by a client that speaks Twilio's messages as documented
(``phone_helpers.TwilioCall``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import websockets
from phone_helpers import AUTH_TOKEN, RATE, TwilioCall, decoded, mulaw, signed_headers
from scipy.signal import resample_poly
from server_helpers import uvicorn_thread
from test_e2e import aligned_correlation

from audiocore_server import Settings, create_app
from audiocore_server.gate.twilio_signature import signature
from audiocore_server.phone.call_dialect import DTMF_TURN
from audiocore_server.phone.marks import HeardMarks
from audiocore_server.wire.fields import InputError

PUBLIC = "https://calls.example.com"


@pytest.fixture
def phone_settings(settings: Settings) -> Settings:
    return dataclasses.replace(settings, twilio_auth_token=AUTH_TOKEN)


@pytest.fixture
def server(phone_settings: Settings) -> Iterator[tuple[Any, str]]:
    """(the app, its base address host:port) on real uvicorn."""
    app = create_app(phone_settings)
    with uvicorn_thread(app, log_level="warning", ws_per_message_deflate=False) as (host, port):
        yield app, f"{host}:{port}"


def speech_8k(speech_48k: np.ndarray) -> np.ndarray:
    return resample_poly(speech_48k.astype(np.float64), 1, 6).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


@contextlib.asynccontextmanager
async def call(address: str, parameters: dict[str, str] | None = None, **kw: Any):
    url = f"ws://{address}/phone/stream"
    ws = await websockets.connect(url, additional_headers=signed_headers(url), max_size=None)
    phone = TwilioCall(ws, **kw)
    try:
        await phone.connect(parameters)
        yield phone
    finally:
        await phone.hang_up()


def wait_until(condition: Any, timeout: float = 10.0) -> None:
    """A condition of the server's state (another thread), polled to a deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the server did not get there"
        time.sleep(0.01)


def the_call(app: Any) -> Any:
    (connection,) = app.state.connections
    return connection


# ---------------------------------------------------------------- the webhook


def post_incoming(address: str, query: str, form: dict[str, str], headers: dict[str, str]):
    return httpx.post(f"http://{address}/phone/incoming{query}", data=form, headers=headers)


FORM = {"CallSid": "CA0001", "AccountSid": "AC0001", "From": "+15550100", "To": "+15550199"}


def test_the_webhook_answers_a_signed_call_with_twiml(server) -> None:
    _, address = server
    query = "?app=audiocore&user=alice"
    url = f"http://{address}/phone/incoming{query}"
    response = post_incoming(address, query, FORM, signed_headers(url, list(FORM.items())))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/xml")
    root = ET.fromstring(response.text)
    assert root.tag == "Response"
    (connect,) = root
    assert connect.tag == "Connect"
    (stream,) = connect
    assert stream.tag == "Stream"
    assert stream.attrib == {"url": f"ws://{address}/phone/stream"}
    assert [(p.tag, p.attrib) for p in stream] == [
        ("Parameter", {"name": "app", "value": "audiocore"}),
        ("Parameter", {"name": "user", "value": "alice"}),
    ]


def test_the_webhook_behind_a_proxy_signs_and_answers_the_public_url(
    phone_settings: Settings,
) -> None:
    app = create_app(dataclasses.replace(phone_settings, phone_public_url=PUBLIC))
    with uvicorn_thread(app, log_level="warning") as (host, port):
        address = f"{host}:{port}"
        own = signed_headers(f"http://{address}/phone/incoming", list(FORM.items()))
        assert post_incoming(address, "", FORM, own).status_code == 403
        public = signed_headers(f"{PUBLIC}/phone/incoming", list(FORM.items()))
        # The public name is a host the server answers to.
        response = post_incoming(address, "", FORM, {**public, "Host": "calls.example.com"})
        assert response.status_code == 200, response.text
        stream = ET.fromstring(response.text).find("./Connect/Stream")
        assert stream is not None and stream.attrib["url"] == "wss://calls.example.com/phone/stream"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Twilio-Signature": ""},
        {"X-Twilio-Signature": "RSOYDt4T1cUTdK1PDd93/VVr8B8="},
        "another token",
        "another form",
        "another query",
    ],
)
def test_the_webhook_refuses_unsigned_and_wrongly_signed_requests(
    server, headers: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, address = server
    url = f"http://{address}/phone/incoming?app=audiocore"
    params = list(FORM.items())
    if headers == "another token":
        headers = signed_headers(url, params, token="not-the-account-token-0000")
    elif headers == "another form":
        headers = signed_headers(url, [*params[:-1], ("To", "+15550100")])
    elif headers == "another query":
        headers = signed_headers(url.replace("audiocore", "other"), params)
    with caplog.at_level(logging.WARNING):
        response = post_incoming(address, "?app=audiocore", FORM, headers)
    assert response.status_code == 403
    assert "Twilio signature" in response.text
    assert "<Response>" not in response.text
    assert "Twilio signature missing or wrong" in caplog.text
    assert AUTH_TOKEN not in caplog.text


def test_the_signature_is_twilios_documented_one() -> None:
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    params = {
        "CallSid": "CA1234567890ABCDE",
        "Caller": "+14158675309",
        "Digits": "1234",
        "From": "+14158675309",
        "To": "+18005551212",
    }
    assert signature("12345", url, params.items()) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="
    repeated = [("Sid", "CA123"), ("SidAccount", "AC123"), ("Digits", "5678")]
    repeated += [("Digits", "1234"), ("Digits", "1234")]
    assert signature("12345", url, repeated) == "IK+Dwps556ElfBT0I3Rgjkr1wJU="


def test_the_phone_routes_are_off_without_an_auth_token(settings: Settings) -> None:
    app = create_app(settings)
    with uvicorn_thread(app, log_level="warning") as (host, port):
        url = f"http://{host}:{port}/phone/incoming"
        response = httpx.post(url, data=FORM, headers=signed_headers(url, list(FORM.items())))
        assert response.status_code in (404, 405)
        assert "<Response>" not in response.text

        async def stream() -> None:
            socket_url = f"ws://{host}:{port}/phone/stream"
            with pytest.raises(websockets.InvalidStatus):
                await websockets.connect(socket_url, additional_headers=signed_headers(socket_url))

        asyncio.run(stream())


# ---------------------------------------------------------------- the stream


@pytest.mark.parametrize("headers", [{}, {"X-Twilio-Signature": "bm90IGl0"}, "another url"])
def test_the_stream_refuses_unsigned_and_wrongly_signed_upgrades(server, headers: Any) -> None:
    app, address = server
    url = f"ws://{address}/phone/stream"
    if headers == "another url":
        headers = signed_headers(f"ws://{address}/phone/other")

    async def scenario() -> None:
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(url, additional_headers=headers)
        assert refused.value.response.status_code == 403

    asyncio.run(scenario())
    assert not app.state.connections


def test_a_call_echoes_through_the_mulaw_round_trip(server, speech_48k: np.ndarray) -> None:
    app, address = server
    speech = speech_8k(speech_48k)
    sent = mulaw(np.concatenate([silence(0.4), speech, silence(1.2)]))
    reference = decoded(sent)  # what the server got: the signal after the codec

    async def scenario() -> None:
        async with call(address, {"app": "audiocore"}) as phone:
            await phone.speak(sent)
            want = len(speech) + int(0.3 * RATE)
            await phone.wait_for(lambda: len(phone.audio) >= want, what="the echo")
            echo = decoded(bytes(phone.audio[:want]))
            assert aligned_correlation(echo, reference) >= 0.99
            # Each media frame is followed by its mark; the phone sent the
            # played ones back, and the server heard where the caller is.
            kinds = [m["event"] for m in phone.events]
            assert kinds[:4] == ["media", "mark", "media", "mark"]
            assert set(kinds) == {"media", "mark"}
            await phone.wait_for(lambda: len(phone.replied) >= 10, what="ten marks played")
            heard = the_call(app).dialect.marks.played_seconds()
            assert 0 < heard <= len(phone.audio) / RATE

    asyncio.run(scenario())


def test_speech_over_a_long_answer_clears_it_and_marks_say_what_was_heard(
    server, speech_48k: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    app, address = server
    speech = speech_8k(speech_48k)
    first = mulaw(np.concatenate([speech, silence(1.0)]))

    async def scenario() -> None:
        async with call(address) as phone:
            await phone.speak(first)
            await phone.wait_for(lambda: len(phone.replied) >= 8, what="the answer playing")
            phone.reply_marks = False  # the caller's phone holds the rest
            heard_names = list(phone.replied)
            await phone.speak(mulaw(speech[: RATE // 2]))  # the caller talks over it
            await phone.wait_for(lambda: phone.count("clear") == 1, what="clear")
            # The server timed it: the caller's first voiced frame → clear sent.
            async with httpx.AsyncClient() as client:
                metrics = (await client.get(f"http://{address}/metrics")).text
            assert "audiocore_bargein_latency_seconds_count 1.0" in metrics
            heard = the_call(app).dialect.marks.played_seconds()
            received_at_clear = len(phone.audio)
            mark_at = phone.mark_at
            # What the caller heard is the furthest mark played before the clear.
            assert heard == max(mark_at[n] for n in heard_names) / RATE
            # The answer was cut: not all of it went out.
            assert received_at_clear < len(speech)
            # The clear's acknowledgements of the held marks are taken quietly.
            cleared = [n for n in mark_at if n not in heard_names]
            assert cleared and all(n in phone.replied for n in cleared)
            phone.release_marks()
            # The line goes quiet (Twilio streams silence): the caller's turn ends.
            await phone.speak(mulaw(silence(1.0)))
            # After the clear comes the barge-in's own answer (its echo, after
            # the silence before it), nothing more of the old one.
            want = received_at_clear + int(0.8 * RATE)
            await phone.wait_for(lambda: len(phone.audio) >= want, what="the next answer")
            echo = decoded(bytes(phone.audio[received_at_clear:want]))
            barge_in = np.concatenate([silence(0.5), speech[: RATE // 2], silence(0.5)])
            assert aligned_correlation(echo, decoded(mulaw(barge_in))) >= 0.99
        assert "mark.name" not in caplog.text

    with caplog.at_level(logging.WARNING):
        asyncio.run(scenario())


def test_dtmf_is_a_text_turn_for_the_agent(server) -> None:
    app, address = server

    async def scenario() -> str:
        async with call(address, {"user": "alice"}) as phone:
            await phone.dtmf("7")
            # The offline model answers a text turn with words and a tone.
            await phone.wait_for(lambda: phone.count("media") > 0, what="the answer")
            return the_call(app).session_id

    session_id = asyncio.run(scenario())
    wait_until(lambda: not app.state.connections)
    response = httpx.get(f"http://{address}/apps/audiocore/users/alice/sessions/{session_id}")
    assert response.status_code == 200, response.text
    texts = [
        part.get("text")
        for event in response.json()["events"]
        if event.get("author") == "user" and event.get("content")
        for part in event["content"]["parts"]
    ]
    assert DTMF_TURN.format(digit="7") in texts


@pytest.mark.parametrize("how", ["stop", "socket closed"])
def test_a_call_hung_up_mid_answer_leaves_nothing_running(
    server, speech_48k: np.ndarray, how: str
) -> None:
    app, address = server
    runtime = app.state.runtime

    async def scenario() -> None:
        url = f"ws://{address}/phone/stream"
        ws = await websockets.connect(url, additional_headers=signed_headers(url))
        phone = TwilioCall(ws)
        await phone.connect()
        await phone.speak(mulaw(np.concatenate([speech_8k(speech_48k), silence(1.0)])))
        await phone.wait_for(lambda: phone.count("media") >= 5, what="the answer")
        assert runtime.agents.live_runs == 1
        if how == "stop":
            await phone.stop()
            await phone.finish()  # the server ends the call
            assert ws.close_code == 1000
        else:
            await phone.hang_up()

    asyncio.run(scenario())
    wait_until(lambda: not app.state.connections and runtime.agents.live_runs == 0)


BAD_MESSAGES = [
    ("not json", "got text that is not JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"event": "hello"}', "got 'hello'"),
    ('{"event": "media", "media": {"payload": "@@@="}}', "media.payload: expected base64"),
    ('{"event": "dtmf", "dtmf": {"digit": "x"}}', "dtmf.digit: expected one of"),
    ('{"event": "mark", "mark": {"name": "never-sent"}}', "mark.name: expected a mark"),
    ('{"event": "start", "start": {}}', "start.streamSid"),
    ("x" * 20_000, "exceeds the limit of 16384"),
    (b"\xff\xfe\x00", "bytes that are not UTF-8"),
]


def test_malformed_messages_get_a_clear_error_and_the_call_goes_on(
    server, speech_48k: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    _, address = server
    speech = speech_8k(speech_48k)

    async def scenario() -> None:
        async with call(address, call_sid="CAbad") as phone:
            for frame, _ in BAD_MESSAGES:
                await phone.raw(frame)
            await phone.speak(mulaw(np.concatenate([speech, silence(1.0)])))
            await phone.wait_for(lambda: len(phone.audio) >= len(speech), what="the echo")

    with caplog.at_level(logging.WARNING, logger="audiocore_server"):
        asyncio.run(scenario())
    lines = [r.getMessage() for r in caplog.records if "phone call CAbad" in r.getMessage()]
    for _, expected in BAD_MESSAGES:
        assert any(expected in line for line in lines), (expected, lines)


ALAW_START = {
    "event": "start",
    "streamSid": "MZ0001",
    "start": {
        "callSid": "CA0001",
        "accountSid": "AC0001",
        "mediaFormat": {"encoding": "audio/x-alaw", "sampleRate": 8000, "channels": 1},
    },
}


@pytest.mark.parametrize(
    ("first", "reason"),
    [
        ({"event": "media", "media": {"payload": ""}}, "expected connected and start first"),
        (ALAW_START, "start.mediaFormat: expected"),
    ],
)
def test_a_stream_that_does_not_start_as_documented_is_closed(
    server, first: dict[str, Any], reason: str
) -> None:
    app, address = server

    async def scenario() -> None:
        url = f"ws://{address}/phone/stream"
        ws = await websockets.connect(url, additional_headers=signed_headers(url))
        await ws.send(json.dumps(first))
        with pytest.raises(websockets.ConnectionClosed):
            await ws.recv()
        assert ws.close_code == 1008
        assert reason in ws.close_reason

    asyncio.run(scenario())
    assert not app.state.connections


# ---------------------------------------------------------------- credentials


@pytest.fixture
def keyed_server(phone_settings: Settings) -> Iterator[tuple[Any, str]]:
    keyed = dataclasses.replace(phone_settings, api_key="k" * 24)
    app = create_app(keyed)
    with uvicorn_thread(app, log_level="warning") as (host, port):
        yield app, f"{host}:{port}"


def mint(address: str, owner: str) -> str:
    response = httpx.post(
        f"http://{address}/tokens", json={"owner": owner}, headers={"X-API-Key": "k" * 24}
    )
    assert response.status_code == 200, response.text
    return response.json()["token"]


def test_a_call_needs_credentials_in_its_parameters_when_the_server_does(
    keyed_server, caplog: pytest.LogCaptureFixture
) -> None:
    app, address = keyed_server
    token = mint(address, "alice")

    async def opened(parameters: dict[str, str]) -> int | None:
        url = f"ws://{address}/phone/stream"
        ws = await websockets.connect(url, additional_headers=signed_headers(url))
        phone = TwilioCall(ws)
        await phone.connect(parameters)
        await phone.dtmf("1")
        await phone.wait_for(
            lambda: phone.count("media") > 0 or phone.reader.done(), what="an answer or a close"
        )
        await phone.hang_up()
        return None if phone.count("media") else ws.close_code

    async def scenario() -> None:
        assert await opened({"token": token}) is None
        assert await opened({"token": token, "user": "alice"}) is None
        assert await opened({}) == 1008
        assert await opened({"token": token, "user": "bob"}) == 1008
        assert await opened({"token": token[:-2] + "xx"}) == 1008
        assert await opened({"token": "k" * 24}) is None  # the key itself

    with caplog.at_level(logging.WARNING):
        asyncio.run(scenario())
    assert "refused phone stream" in caplog.text
    assert token not in caplog.text and AUTH_TOKEN not in caplog.text


# ---------------------------------------------------------------- the parts


def test_marks_replied_out_of_order_and_a_clears_acknowledgements() -> None:
    marks = HeardMarks(RATE)
    names = [marks.sent(320) for _ in range(4)]  # four 40 ms frames of turn 0
    assert marks.played_seconds() == 0.0
    marks.replied(names[1])  # out of order: the second before the first
    assert marks.played_seconds() == 640 / RATE
    marks.replied(names[0])  # an earlier mark does not move it back
    assert marks.played_seconds() == 640 / RATE
    marks.cleared()  # barge-in: frames 3 and 4 were never heard
    marks.replied(names[3])
    marks.replied(names[2])  # the clear's acknowledgements
    assert marks.played_seconds() == 640 / RATE  # the interrupted turn's, still
    with pytest.raises(InputError, match="expected a mark this server sent"):
        marks.replied(names[2])  # acknowledged once
    with pytest.raises(InputError, match="expected a mark this server sent"):
        marks.replied("a999")
    following = marks.sent(320)  # the next turn: nothing of it heard yet
    assert marks.played_seconds() == 0.0
    marks.replied(following)
    assert marks.played_seconds() == 320 / RATE
    marks.turn_ended()
    assert marks.played_seconds() == 320 / RATE  # the turn that last played
    assert marks.outstanding == 0


def test_the_auth_token_stays_out_of_logs_and_the_settings_repr(
    phone_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    create_app(phone_settings)  # protects its secrets
    with caplog.at_level(logging.INFO):
        logging.getLogger("audiocore_server.test").info("token %s", AUTH_TOKEN)
    assert AUTH_TOKEN not in caplog.text and "***" in caplog.text
    assert AUTH_TOKEN not in repr(phone_settings)
    env = {"AUDIOCORE_TWILIO_AUTH_TOKEN": AUTH_TOKEN, "AUDIOCORE_PHONE_PUBLIC_URL": PUBLIC}
    from_env = Settings.from_env(env)
    assert (from_env.twilio_auth_token, from_env.phone_public_url) == (AUTH_TOKEN, PUBLIC)
    bad = dataclasses.replace(phone_settings, phone_public_url="calls.example.com/x")
    assert any(p.startswith("phone_public_url: expected") for p in bad.problems())


def test_a_flooding_stream_is_closed_with_twilios_messages_only(server) -> None:
    app, address = server

    async def scenario() -> None:
        url = f"ws://{address}/phone/stream"
        ws = await websockets.connect(url, additional_headers=signed_headers(url))
        phone = TwilioCall(ws)
        await phone.connect()
        frame = '{"event": "media", "streamSid": "MZ0001", "media": {"payload": ""}}'
        with contextlib.suppress(websockets.ConnectionClosed):
            for _ in range(3000):  # past the frame budget's burst and its drops
                await ws.send(frame)
        await phone.finish()  # the reader fails on anything that is not Twilio's
        assert ws.close_code == 1008
        assert "too many" in (ws.close_reason or "")

    asyncio.run(scenario())
    wait_until(lambda: not app.state.connections)


def test_a_tokens_max_sessions_holds_for_calls(keyed_server) -> None:
    app, address = keyed_server
    response = httpx.post(
        f"http://{address}/tokens",
        json={"owner": "alice", "limits": {"maxSessions": 1, "surfaces": ["phone"]}},
        headers={"X-API-Key": "k" * 24},
    )
    token = response.json()["token"]

    async def scenario() -> None:
        async with call(address, {"token": token}) as first:
            await first.dtmf("1")
            await first.wait_for(lambda: first.count("media") > 0, what="the first call's answer")
            url = f"ws://{address}/phone/stream"
            ws = await websockets.connect(url, additional_headers=signed_headers(url))
            second = TwilioCall(ws, call_sid="CA0002")
            await second.connect({"token": token})
            await second.finish()
            assert ws.close_code == 1013
        # The first call's place is free again once it has ended.
        wait_until(lambda: not app.state.connections)
        async with call(address, {"token": token}) as third:
            await third.dtmf("2")
            await third.wait_for(lambda: third.count("media") > 0, what="a later call's answer")

    asyncio.run(scenario())


def test_the_phone_echo_canceller_is_on_by_default_and_never_mutes_a_call() -> None:
    """``phone_echo_cancellation`` opens every call's conversation with
    ``echoCancellation: "server"`` and no mute while it learns (the
    canceller built on its mic path, tested in test_mic_echo.py); on by
    default, off with AUDIOCORE_PHONE_ECHO_CANCELLATION=false
    (docs/telephony.md, "The caller's echo")."""
    from audiocore_server.phone.call_dialect import TWILIO, CallDialect
    from audiocore_server.wire import call_messages, fields

    start = call_messages.StreamStart("MZ1", "CA1", "AC1", {})

    async def opened(**options: Any) -> tuple[str, bool]:
        dialect = CallDialect(TWILIO, start, "caller", None, None, **options)
        opening = await dialect.open(None, 1.0, fields.Limits())  # type: ignore[arg-type]
        return opening.start.echo_cancellation, opening.mute_while_learning

    assert asyncio.run(opened(echo_cancellation=True)) == ("server", False)
    assert asyncio.run(opened(echo_cancellation=False)) == ("client", False)
    assert Settings().phone_echo_cancellation is True
    off = Settings.from_env({"AUDIOCORE_PHONE_ECHO_CANCELLATION": "false"})
    assert off.phone_echo_cancellation is False
