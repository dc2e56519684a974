"""``WS /run_live``: a client written from ADK's documented protocol, against
our server and against ``adk api_server`` running the same offline agent.

The client creates its session with the REST route, then sends ``LiveRequest``
JSON (snake_case top-level keys, base64 blobs) and reads one ``Event`` JSON
per frame. Both servers must behave the same for it — event kinds and their
order, transcripts, audio length — and ours adds what ADK's lacks:
resampling of other input rates, binary audio frames, an error event for a
malformed message with the reader going on, a close when the run ends.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import pathlib
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import websockets
from adk_server_helpers import adk_api_server

from audiocore_server import Settings

# Not our default app name: ADK imports the app's directory as a module, and
# "audiocore" is our package.
APP = "voice_app"
FRAME = 960  # 40 ms at 24 kHz: the offline model's audio events and our paced frames

AGENT_PY = """
from audiocore_server.agent.definition import build_agent
from audiocore_server.agent.demo_tools import DEMO_TOOLS
from audiocore_server.settings import Settings
from audiocore_server.tools.spec import spec_of

root_agent = build_agent(Settings(model="offline"), [spec_of(f) for f in DEMO_TOOLS])
"""


def _tone(seconds: float, rate: int) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    ramp = np.minimum(1, np.minimum(t, t[::-1]) / 0.01)
    wave = 0.3 * 32767 * ramp * np.sin(2 * np.pi * 330 * t)
    return np.rint(wave).astype("<i2").tobytes()


@pytest.fixture(scope="module")
def adk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """ADK's own ``adk api_server`` on 127.0.0.1 with the offline agent."""
    agents = tmp_path_factory.mktemp("agents")
    (agents / APP).mkdir()
    (agents / APP / "agent.py").write_text(AGENT_PY)
    with adk_api_server(agents, agents / "adk.log") as url:
        yield url


@pytest.fixture
def settings(tmp_path: pathlib.Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", model="offline", app_name=APP)


@pytest.fixture
def our_server(live_server: str) -> str:
    return live_server.removesuffix("/ws").replace("ws://", "http://")


def create_session(base: str, user: str, session: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base}/apps/{APP}/users/{user}/sessions",
        data=json.dumps({"sessionId": session}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def live_url(base: str, user: str, session: str, **extra: str) -> str:
    query = f"app_name={APP}&user_id={user}&session_id={session}"
    query += "".join(f"&{k}={v}" for k, v in extra.items())
    return base.replace("http://", "ws://") + f"/run_live?{query}"


async def read_turn(ws: Any, timeout: float = 30) -> list[dict[str, Any]]:
    """Events up to and including the one with turnComplete."""
    events = []
    async with asyncio.timeout(timeout):
        while True:
            event = json.loads(await ws.recv())
            events.append(event)
            if event.get("turnComplete"):
                return events


def kinds(events: list[dict[str, Any]]) -> list[str]:
    """What each event says, runs of audio collapsed to one."""
    out: list[str] = []
    for event in events:
        parts = event.get("content", {}).get("parts", [])
        if any("inlineData" in p for p in parts):
            kind = "audio"
        elif any("text" in p for p in parts):
            kind = "text"
        elif "inputTranscription" in event:
            kind = "input-transcription"
        elif "outputTranscription" in event:
            kind = "output-transcription"
        elif event.get("turnComplete"):
            kind = "turn-complete"
        else:
            kind = "other:" + ",".join(sorted(k for k in event if k not in _ENVELOPE))
        if not (out and out[-1] == kind == "audio"):
            out.append(kind)
    return out


_ENVELOPE = {"id", "timestamp", "invocationId", "author", "actions", "nodeInfo", "partial"}


def audio_of(events: list[dict[str, Any]]) -> bytes:
    return b"".join(
        base64.urlsafe_b64decode(p["inlineData"]["data"])
        for e in events
        for p in e.get("content", {}).get("parts", [])
        if "inlineData" in p
    )


def texts(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for event in events:
        for key in ("inputTranscription", "outputTranscription"):
            if key in event:
                out.append(f"{key}:{event[key]['text']}")
        for part in event.get("content", {}).get("parts", []):
            if "text" in part:
                out.append(f"text:{part['text']}")
    return out


def blob(pcm: bytes, rate: int) -> str:
    data = base64.b64encode(pcm).decode()
    return json.dumps({"blob": {"mime_type": f"audio/pcm;rate={rate}", "data": data}})


async def conversation(base: str, session: str) -> dict[str, list[dict[str, Any]]]:
    """A spoken turn between activity signals, a typed turn, then close.

    (Spoken first: the offline model takes an activity_start while its last
    answer would still be playing as a barge-in, and ADK's server does not
    pace audio, so the other order would depend on timing.)"""
    create_session(base, "u1", session)
    turns = {}
    async with websockets.connect(live_url(base, "u1", session), max_size=None) as ws:
        await ws.send(json.dumps({"activity_start": {}}))
        speech = _tone(0.8, 16_000)
        for i in range(0, len(speech), 640):
            await ws.send(blob(speech[i : i + 640], 16_000))
        await ws.send(json.dumps({"activity_end": {}}))
        turns["spoken"] = await read_turn(ws)
        await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": "hello"}]}}))
        turns["typed"] = await read_turn(ws)
        await ws.send(json.dumps({"close": True}))
    return turns


def test_same_observable_behaviour_as_adk_api_server(adk_server: str, our_server: str) -> None:
    theirs = asyncio.run(conversation(adk_server, "compare-1"))
    ours = asyncio.run(conversation(our_server, "compare-1"))
    for name in ("typed", "spoken"):
        assert kinds(ours[name]) == kinds(theirs[name]), name
        assert texts(ours[name]) == texts(theirs[name]), name
        theirs_audio, ours_audio = audio_of(theirs[name]), audio_of(ours[name])
        # Ours leaves in whole 40 ms frames, the tail padded with silence.
        n = len(theirs_audio) // 2
        assert len(ours_audio) // 2 == -(-n // FRAME) * FRAME, name
        assert ours_audio[: len(theirs_audio)] == theirs_audio, name
        assert not any(ours_audio[len(theirs_audio) :]), name
    assert kinds(ours["spoken"])[:3] == ["input-transcription", "output-transcription", "audio"]
    # Both describe the same 0.8 s utterance.
    assert "12800 samples" in texts(ours["spoken"])[0]


async def speech_then_stream_end(base: str, session: str) -> list[dict[str, Any]]:
    """0.8 s of tone with no silence after it (the voice detector still hears
    speech), then ``{"audio_stream_end": true}``: the turn it ends."""
    create_session(base, "u1", session)
    async with websockets.connect(live_url(base, "u1", session), max_size=None) as ws:
        speech = _tone(0.8, 16_000)
        for i in range(0, len(speech), 640):
            await ws.send(blob(speech[i : i + 640], 16_000))
        await ws.send(json.dumps({"audio_stream_end": True}))
        turn = await read_turn(ws)
        await ws.send(json.dumps({"close": True}))
    return turn


def test_audio_stream_end_ends_the_utterance_as_with_adk_api_server(
    adk_server: str, our_server: str
) -> None:
    theirs = asyncio.run(speech_then_stream_end(adk_server, "stream-end-1"))
    ours = asyncio.run(speech_then_stream_end(our_server, "stream-end-1"))
    assert kinds(ours) == kinds(theirs)
    assert texts(ours) == texts(theirs)
    assert "12800 samples" in texts(ours)[0], texts(ours)
    theirs_audio, ours_audio = audio_of(theirs), audio_of(ours)
    assert ours_audio[: len(theirs_audio)] == theirs_audio
    assert not any(ours_audio[len(theirs_audio) :])


def test_events_are_serialised_as_adks_server_does(our_server: str) -> None:
    async def scenario() -> list[dict[str, Any]]:
        create_session(our_server, "u1", "shape-1")
        async with websockets.connect(live_url(our_server, "u1", "shape-1")) as ws:
            await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": "hi"}]}}))
            return await read_turn(ws)

    events = asyncio.run(scenario())
    for event in events:
        assert {"id", "timestamp", "author", "actions", "invocationId"} <= set(event)
        assert set(event["actions"]) >= {"stateDelta", "artifactDelta"}
        assert not any(value is None for value in event.values())
    audio = next(e for e in events if "content" in e and "inlineData" in e["content"]["parts"][0])
    data = audio["content"]["parts"][0]["inlineData"]
    assert data["mimeType"] == "audio/pcm;rate=24000" and audio["author"] == "voice_agent"
    assert "+" not in data["data"] and "/" not in data["data"]  # URL-safe base64


def test_other_input_rates_are_resampled_and_binary_frames_are_audio(our_server: str) -> None:
    async def scenario() -> dict[str, str]:
        create_session(our_server, "u1", "rates-1")
        out = {}
        async with websockets.connect(live_url(our_server, "u1", "rates-1")) as ws:
            for label, rate in (("48k-blob", 48_000), ("binary-after-48k", None)):
                await ws.send(json.dumps({"activity_start": {}}))
                speech = _tone(0.6, 48_000)
                for i in range(0, len(speech), 1920):
                    chunk = speech[i : i + 1920]
                    await ws.send(blob(chunk, 48_000) if rate else chunk)
                await ws.send(json.dumps({"activity_end": {}}))
                turn = await read_turn(ws)
                out[label] = texts(turn)[0]
        return out

    heard = asyncio.run(scenario())
    # 0.6 s reaches the model as 16 kHz: 9600 samples, whatever the carrier.
    assert "9600 samples" in heard["48k-blob"], heard
    assert "9600 samples" in heard["binary-after-48k"], heard


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("not json", "expected a JSON"),
        ("[1]", "expected a JSON object"),
        ('{"blob": 5}', "LiveRequest: blob"),
        ('{"blob": {"mime_type": "audio/pcm", "data": "!!!"}}', "LiveRequest: blob.data"),
        ('{"blob": {"mime_type": "video/mp4", "data": ""}}', "mime_type must be"),
        ('{"blob": {"mime_type": "audio/pcm;rate=7", "data": ""}}', "audio rate 7 Hz"),
        # Found by fuzzing: past int()'s 4300-digit limit its ValueError
        # ended the connection.
        (
            '{"blob": {"mime_type": "audio/pcm;rate=' + "9" * 5000 + '", "data": ""}}',
            "audio rate of 5000 digits is not a sample rate",
        ),
        ('{"bogus": 1}', "unknown fields ['bogus']"),
        (
            '{"content": {"role": "user", "parts": [{"functionCall": {"name": "x"}}]}}',
            "cannot contain function calls",
        ),
        (
            '{"content": {"role": "user", "parts": [{"functionResponse": {"id": "zz"}}]}}',
            "no pending",
        ),
        ("[" * 5000 + "]" * 5000, "nested at most"),
    ],
)
def test_malformed_message_gets_an_error_event_and_the_reader_goes_on(
    our_server: str, message: str, expected: str
) -> None:
    async def scenario() -> tuple[dict[str, Any], list[str]]:
        create_session(our_server, "u1", "bad-1")
        async with websockets.connect(live_url(our_server, "u1", "bad-1")) as ws:
            await ws.send(message)
            error = json.loads(await ws.recv())
            await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": "after"}]}}))
            return error, texts(await read_turn(ws))

    error, after = asyncio.run(scenario())
    assert error["errorCode"] == "INVALID_REQUEST" and expected in error["errorMessage"], error
    assert after[0].startswith("text:You said: after")


def test_camel_case_top_level_keys_work_too(our_server: str) -> None:
    async def scenario() -> str:
        create_session(our_server, "u1", "camel-1")
        async with websockets.connect(live_url(our_server, "u1", "camel-1")) as ws:
            await ws.send(json.dumps({"activityStart": {}}))
            await ws.send(blob(_tone(0.5, 16_000), 16_000))
            await ws.send(json.dumps({"activityEnd": {}}))
            return texts(await read_turn(ws))[0]

    assert "8000 samples" in asyncio.run(scenario())


def test_unknown_session_closes_1002_and_bad_queries_are_refused(our_server: str) -> None:
    async def closed(url: str) -> tuple[int | None, str]:
        async with websockets.connect(url) as ws:
            with contextlib.suppress(websockets.ConnectionClosed):
                await ws.recv()
            return ws.close_code, ws.close_reason

    assert asyncio.run(closed(live_url(our_server, "u1", "never-made"))) == (
        1002,
        "Session not found",
    )
    wrong_app = live_url(our_server, "u1", "x").replace(f"app_name={APP}", "app_name=other")
    assert asyncio.run(closed(wrong_app)) == (1008, "App not found")
    for url in (
        our_server.replace("http", "ws") + f"/run_live?app_name={APP}&session_id=s",
        live_url(our_server, "web", "s"),  # the page's user is not reachable here
        live_url(our_server, "u1", "s", modalities="VIDEO"),
        live_url(our_server, "u1", "s", proactive_audio="maybe"),
    ):
        with pytest.raises(websockets.InvalidStatus) as refused:
            asyncio.run(closed(url))
        assert refused.value.response.status_code == 403


def test_close_ends_the_run_and_the_server_closes(our_server: str) -> None:
    async def scenario() -> tuple[int | None, int]:
        create_session(our_server, "u1", "close-1")
        async with websockets.connect(live_url(our_server, "u1", "close-1")) as ws:
            await ws.send(json.dumps({"content": {"role": "user", "parts": [{"text": "hi"}]}}))
            await read_turn(ws)
            await ws.send(json.dumps({"close": True}))
            extra = 0
            with contextlib.suppress(websockets.ConnectionClosed):
                async with asyncio.timeout(20):
                    while True:
                        await ws.recv()
                        extra += 1
            return ws.close_code, extra

    code, extra = asyncio.run(scenario())
    assert code == 1000 and extra == 0


def test_delegated_tool_answered_with_adks_confirmation_convention(our_server: str) -> None:
    async def scenario() -> list[dict[str, Any]]:
        create_session(our_server, "u1", "tool-1")
        async with websockets.connect(live_url(our_server, "u1", "tool-1")) as ws:
            text = {"content": {"role": "user", "parts": [{"text": "pay 3 EUR to Carol"}]}}
            await ws.send(json.dumps(text))
            async with asyncio.timeout(20):
                while True:
                    event = json.loads(await ws.recv())
                    calls = [
                        p["functionCall"]
                        for p in event.get("content", {}).get("parts", [])
                        if "functionCall" in p
                    ]
                    if calls:
                        break
            (call,) = calls
            assert event["longRunningToolIds"] == [call["id"]]
            answer = {"id": call["id"], "name": call["name"], "response": {"confirmed": True}}
            await ws.send(
                json.dumps({"content": {"role": "user", "parts": [{"functionResponse": answer}]}})
            )
            return await read_turn(ws)

    turn = asyncio.run(scenario())
    assert any('"success": true' in t for t in texts(turn)), texts(turn)
