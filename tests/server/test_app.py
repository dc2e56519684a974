"""Protocol cases over Starlette's TestClient: real app, ADK runner, SQLite, offline model."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import replace

import numpy as np
import pytest
from server_helpers import check_padded, receive_until, start
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from audiocore_server import Settings, create_app
from audiocore_server.wire.chunks import client_executes


def test_healthz_and_index(client: TestClient) -> None:
    assert client.get("/healthz").json() == {
        "status": "ok",
        "model": "offline",
        "connections": 0,
        "liveRuns": 0,
    }
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]


def test_data_session_comes_first_and_echoes_negotiation(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        session = start(
            ws,
            input={"sampleRate": 48000, "format": "f32", "channels": 1},
            output={"sampleRate": 16000, "binary": True},
        )
    data = session["data"]
    assert session["transient"] is True
    assert data["input"] == {"sampleRate": 48000, "format": "f32", "channels": 1}
    assert data["output"] == {"sampleRate": 16000, "channels": 1, "bitDepth": 16, "binary": True}
    assert data["resumed"] is False and data["model"] == "offline"
    assert len(data["sessionId"]) >= 32  # 192 random bits, URL-safe


def test_defaults_without_start(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "text", "text": "hi"}))
        session = ws.receive_json()
        assert session["type"] == "data-session"
        assert session["data"]["input"] == {"sampleRate": 16000, "format": "s16", "channels": 1}
        assert session["data"]["output"]["sampleRate"] == 24000
        assert [m["type"] for m in receive_until(ws, "finish")][0] == "start"


def test_session_id_is_sent_even_if_the_client_says_nothing(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        assert ws.receive_json()["type"] == "data-session"  # after hello_timeout_s


def test_text_turn(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(json.dumps({"type": "text", "text": "hello there"}))
        turn = receive_until(ws, "finish")
    kinds = [m["type"] for m in turn]
    assert kinds[:4] == ["start", "text-start", "text-delta", "text-end"]
    assert kinds[-1] == "finish" and kinds.count("finish") == 1
    assert turn[2]["delta"] == "You said: hello there"
    assert turn[1]["id"] == turn[2]["id"] == turn[3]["id"]
    cue = [m for m in turn if m["type"] == "data-pcm"]
    assert cue and all(m["transient"] for m in cue)
    assert {m["data"]["sampleRate"] for m in cue} == {24000}
    cue_pcm = b"".join(base64.b64decode(m["data"]["content"]) for m in cue)
    assert check_padded(cue_pcm, 3600, 960).any()  # 150 ms at 24 kHz, in 40 ms frames


def test_tool_turn_spans_two_model_responses_with_one_finish(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(json.dumps({"type": "text", "text": "What time is it?"}))
        turn = receive_until(ws, "finish")
    kinds = [m["type"] for m in turn]
    assert kinds[:6] == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-available",
        "tool-output-available",
        "finish-step",
    ]
    begun, call, result = turn[2], turn[3], turn[4]
    assert begun["toolCallId"] == call["toolCallId"] and begun["toolName"] == call["toolName"]
    assert not client_executes(call)
    assert call["toolName"] == "get_current_time" and call["input"] == {}
    assert call["toolCallId"].startswith("adk-") and result["toolCallId"] == call["toolCallId"]
    assert set(result["output"]) == {"time", "date", "timezone", "utcOffset"}
    answer = next(m for m in turn if m["type"] == "text-delta")["delta"]
    assert answer == f"It is {result['output']['time']} (UTC)."
    assert kinds.count("start") == 1 and kinds.count("finish") == 1


def test_explicit_tool_call_with_arguments(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(
            json.dumps({"type": "text", "text": 'call get_current_time {"timezone": "Asia/Tokyo"}'})
        )
        turn = receive_until(ws, "finish")
    call = next(m for m in turn if m["type"] == "tool-input-available")
    out = next(m for m in turn if m["type"] == "tool-output-available")
    assert call["input"] == {"timezone": "Asia/Tokyo"} and out["output"]["timezone"] == "Asia/Tokyo"


def test_reconnect_with_session_id_resumes_history(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws)["data"]["sessionId"]
        ws.send_text(json.dumps({"type": "text", "text": "remember the blue door"}))
        receive_until(ws, "finish")
    with client.websocket_connect("/ws") as ws:
        session = start(ws, sessionId=session_id)
        assert session["data"]["sessionId"] == session_id and session["data"]["resumed"]
        assert {"role": "user", "text": "remember the blue door"} in session["data"]["history"]
        assert {"role": "assistant", "text": "You said: remember the blue door"} in session["data"][
            "history"
        ]
        # The model itself received the history from ADK.
        ws.send_text(json.dumps({"type": "text", "text": "and now?"}))
        answer = next(m for m in receive_until(ws, "finish") if m["type"] == "text-delta")
        assert (
            answer["delta"].startswith("You said: and now? (")
            and "earlier turns" in answer["delta"]
        )


@pytest.mark.parametrize("session_id", ["no-such-session-000000000000", "x", "../../etc/passwd"])
def test_unknown_session_id_gets_an_error_and_a_new_session(
    client: TestClient, session_id: str
) -> None:
    with client.websocket_connect("/ws") as ws:
        session = start(ws, sessionId=session_id)
        error = ws.receive_json()
    assert session["data"]["sessionId"] != session_id and not session["data"]["resumed"]
    assert session["data"]["history"] == []
    assert error == {"type": "error", "errorText": "unknown sessionId; started a new session"}


def test_sessions_persist_in_the_sqlite_file(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        session_id = start(ws)["data"]["sessionId"]
        ws.send_text(json.dumps({"type": "text", "text": "persist me"}))
        receive_until(ws, "finish")
    assert settings.session_db_path.is_file()
    # A new app (a restarted server) on the same file finds the session.
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        session = start(ws, sessionId=session_id)
    assert session["data"]["resumed"]
    assert {"role": "user", "text": "persist me"} in session["data"]["history"]


def test_database_url_setting_uses_adk_database_service(settings: Settings) -> None:
    pytest.importorskip("sqlalchemy")
    db = settings.data_dir / "other.db"
    settings.data_dir.mkdir(parents=True)
    url_settings = replace(settings, database_url=f"sqlite+aiosqlite:///{db}")
    with TestClient(create_app(url_settings)) as client, client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(json.dumps({"type": "text", "text": "stored via SQLAlchemy"}))
        receive_until(ws, "finish")
    assert db.is_file() and not url_settings.session_db_path.exists()


# ---------------------------------------------------------------- bad input


def _error_then_alive(ws, frame) -> str:
    (ws.send_bytes if isinstance(frame, bytes) else ws.send_text)(frame)
    error = ws.receive_json()
    assert error["type"] == "error", error
    ws.send_text(json.dumps({"type": "text", "text": "still alive?"}))
    assert [m["type"] for m in receive_until(ws, "finish")][0] == "start"
    return error["errorText"]


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        ({"type": "dance"}, "unknown message type 'dance'"),
        ({"type": "text", "text": ""}, "non-empty string"),
        ({"type": "text", "text": 5}, "non-empty string"),
        ({"type": "audio_chunk", "data": {"chunk": "@@not base64@@"}}, "malformed base64"),
        ({"type": "audio_chunk", "data": {"chunk": "AAAA", "sampleRate": 16000}}, "multiple of 2"),
        ({"type": "audio_chunk", "data": {"chunk": "AAAAAA==", "sampleRate": 44100}}, "negotiated"),
        (
            {"type": "audio_chunk", "data": {"chunk": "AAAAAA==", "sampleRate": 12345}},
            "expected one of",
        ),
        ({"type": "audio_chunk", "data": {"chunk": "AAAAAA==", "channels": 2}}, "mono"),
        ({"type": "audio_chunk", "data": {"chunk": "AAAAAA==", "bitDepth": 8}}, "bitDepth"),
        ({"type": "audio_chunk", "data": "AAAA"}, '"data" to be an object'),
        ({"type": "image", "mediaType": "image/gif", "data": "AAAA"}, "mediaType"),
        ({"type": "image", "mediaType": "image/png", "data": "%%%"}, "malformed base64"),
        ({"type": "start"}, "only allowed as the first message"),
        ({"type": "tool_result", "toolCallId": "nope", "output": 1}, "no pending tool call"),
        ({"type": "tool_result"}, "toolCallId"),
        ({"type": "tool_approval", "approvalId": "a", "approved": True}, "no pending approval"),
    ],
)
def test_recoverable_mistakes_get_an_error_chunk(client: TestClient, frame, expected) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        assert expected in _error_then_alive(ws, json.dumps(frame))


def test_odd_binary_frame_is_an_error_chunk(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        assert "multiple of 2 bytes" in _error_then_alive(ws, b"\x00\x01\x02")
    with client.websocket_connect("/ws") as ws:
        start(ws, input={"sampleRate": 48000, "format": "f32"})
        assert "multiple of 4 bytes" in _error_then_alive(ws, b"\x00" * 6)


@pytest.mark.parametrize(
    ("start_fields", "expected"),
    [
        ({"input": {"sampleRate": 12345}}, "input.sampleRate"),
        ({"input": {"format": "mp3"}}, "input.format"),
        ({"input": {"channels": 2}}, "mono"),
        ({"output": {"sampleRate": "fast"}}, "output.sampleRate"),
        ({"output": {"binary": "yes"}}, "output.binary"),
        ({"sessionId": 42}, "sessionId"),
        ({"turnDetection": "auto"}, "turnDetection"),
    ],
)
def test_bad_start_falls_back_to_defaults_with_an_error(
    client: TestClient, start_fields, expected
) -> None:
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "start", **start_fields}))
        session = ws.receive_json()
        error = ws.receive_json()
    assert session["type"] == "data-session"
    assert session["data"]["input"]["sampleRate"] == 16000
    assert session["data"]["turnDetection"] == "server"
    assert error["type"] == "error" and expected in error["errorText"]


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not json at all", 1007),
        ("[1, 2, 3]", 1003),
        ('{"no": "type"}', 1003),
        ('{"type": 7}', 1003),
    ],
)
def test_protocol_violations_close_with_the_matching_code(
    client: TestClient, frame: str, code: int
) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(frame)
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == code


def test_protocol_violation_as_first_frame_closes(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        ws.send_text("{broken")
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 1007


def test_oversized_messages_close_with_1009(settings: Settings) -> None:
    small = replace(settings, max_message_bytes=1000)
    with TestClient(create_app(small)) as client:
        with client.websocket_connect("/ws") as ws:
            start(ws)
            ws.send_bytes(b"\x00" * 1002)
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_json()
        assert closed.value.code == 1009
        with client.websocket_connect("/ws") as ws:
            start(ws)
            ws.send_text(json.dumps({"type": "text", "text": "x" * 2000}))
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_json()
        assert closed.value.code == 1009


def test_oversized_image_and_text_are_error_chunks(settings: Settings) -> None:
    small = replace(settings, max_image_bytes=100, max_text_chars=50)
    with TestClient(create_app(small)) as client, client.websocket_connect("/ws") as ws:
        start(ws)
        image = base64.b64encode(b"\xff" * 300).decode()
        assert "exceeds the limit of 100" in _error_then_alive(
            ws, json.dumps({"type": "image", "mediaType": "image/jpeg", "data": image})
        )
        assert "exceeds the limit of 50" in _error_then_alive(
            ws, json.dumps({"type": "text", "text": "y" * 51})
        )


def test_image_frame_is_accepted(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        start(ws)
        image = base64.b64encode(b"\xff\xd8\xff" + b"\x00" * 64).decode()
        ws.send_text(json.dumps({"type": "image", "mediaType": "image/jpeg", "data": image}))
        ws.send_text(json.dumps({"type": "text", "text": "what do you see"}))
        assert receive_until(ws, "finish")[0]["type"] == "start"  # no error in between


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        (None, True),
        ("http://testserver", True),  # same origin
        ("http://localhost:5173", True),
        ("http://127.0.0.1:9999", True),
        ("https://app.example.com", True),  # in the allowlist
        ("https://evil.example.com", False),
        ("http://testserver.evil.com", False),
        ("null", False),
    ],
)
def test_origin_allowlist(settings: Settings, origin: str | None, allowed: bool) -> None:
    listed = replace(settings, allowed_origins=("https://app.example.com",))
    headers = {"origin": origin} if origin else {}
    with TestClient(create_app(listed)) as client:
        if allowed:
            with client.websocket_connect("/ws", headers=headers) as ws:
                start(ws)
        else:
            with pytest.raises(WebSocketDisconnect) as closed:
                client.websocket_connect("/ws", headers=headers).__enter__()
            assert closed.value.code == 1008


def test_localhost_can_be_disallowed(settings: Settings) -> None:
    strict = replace(settings, allow_localhost=False)
    with TestClient(create_app(strict)) as client, pytest.raises(WebSocketDisconnect):
        client.websocket_connect("/ws", headers={"origin": "http://localhost:1"}).__enter__()


def test_teardown_leaves_nothing_behind(client: TestClient) -> None:
    connections = client.app.state.connections  # type: ignore[attr-defined]
    queues = []
    for _ in range(3):
        with client.websocket_connect("/ws") as ws:
            start(ws)
            (connection,) = connections
            queues.append(connection.queue)
            ws.send_text(json.dumps({"type": "text", "text": "bye"}))
            receive_until(ws, "finish")
    assert connections == set()
    assert all(queue.closed for queue in queues)
    assert client.get("/healthz").json()["connections"] == 0


def test_stalled_model_cannot_grow_the_request_queue(settings: Settings) -> None:
    tiny = replace(settings, max_pending_requests=0)
    with TestClient(create_app(tiny)) as client, client.websocket_connect("/ws") as ws:
        start(ws)
        ws.send_text(json.dumps({"type": "text", "text": "hello"}))
        error = ws.receive_json()
        assert error["type"] == "error" and "not keeping up" in error["errorText"]
        (connection,) = client.app.state.connections  # type: ignore[attr-defined]
        assert connection.queue.pending == 0


def test_turn_edges_are_never_dropped_by_the_bound(settings: Settings) -> None:
    """A dropped activity_end would leave a push-to-talk turn open for good
    (seen at 100 sessions on an overloaded machine)."""
    tiny = replace(settings, max_pending_requests=0)
    with TestClient(create_app(tiny)) as client, client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        ws.send_text(json.dumps({"type": "activity_start"}))
        ws.send_text(json.dumps({"type": "activity_end"}))
        ws.send_text(json.dumps({"type": "text", "text": "this one is refused"}))
        seen: list[dict] = []
        # Until the (empty) turn ends — or, were an edge dropped, a second error.
        while "finish" not in [m["type"] for m in seen]:
            seen.append(ws.receive_json())
            if [m["type"] for m in seen].count("error") > 1:
                break
    errors = [m["errorText"] for m in seen if m["type"] == "error"]
    assert len(errors) == 1 and "messages are dropped" in errors[0]  # the text, not the edges


# ---------------------------------------------------------------- audio over TestClient


def _tone_s16(seconds: float, level: float, rate: int = 16000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    ramp = np.minimum(1, np.minimum(t, t[::-1]) / 0.01)
    return np.rint(level * 32767 * ramp * np.sin(2 * np.pi * 330 * t)).astype("<i2").tobytes()


@pytest.mark.parametrize("carrier", ["binary", "audio_chunk"])
def test_default_s16_audio_before_any_start(client: TestClient, carrier: str) -> None:
    stream = bytes(6400) + _tone_s16(0.8, 0.3) + bytes(32000)  # 0.2 s, tone, 1 s silence
    with client.websocket_connect("/ws") as ws:
        for i in range(0, len(stream), 640):  # 20 ms frames, as fast as they go
            frame = stream[i : i + 640]
            if carrier == "binary":
                ws.send_bytes(frame)
            else:
                chunk = base64.b64encode(frame).decode()
                ws.send_text(json.dumps({"type": "audio_chunk", "data": {"chunk": chunk}}))
        session = ws.receive_json()
        assert session["type"] == "data-session"
        assert session["data"]["input"] == {"sampleRate": 16000, "format": "s16", "channels": 1}
        turn = receive_until(ws, "finish")
    transcript = next(m for m in turn if m["type"] == "data-transcript")["data"]["text"]
    n16 = int(transcript.split("(")[1].split(" samples")[0])
    echo = b"".join(base64.b64decode(m["data"]["content"]) for m in turn if m["type"] == "data-pcm")
    check_padded(echo, n16 * 3 // 2, 960)
    assert n16 >= 0.8 * 16000


def test_slow_reader_cannot_grow_server_memory(settings: Settings) -> None:
    """A client that sends but never reads: every buffer stays at its bound."""
    bounded = replace(
        settings,
        max_buffered_output_s=0.5,
        max_pending_requests=20,
    )
    with TestClient(create_app(bounded)) as client, client.websocket_connect("/ws") as ws:
        start(ws)
        (connection,) = client.app.state.connections  # type: ignore[attr-defined]
        speech = _tone_s16(3.0, 0.3)
        for _ in range(4):  # push-to-talk turns, far faster than real time
            ws.send_text(json.dumps({"type": "activity_start"}))
            for i in range(0, len(speech), 640):
                ws.send_bytes(speech[i : i + 640])
            ws.send_text(json.dumps({"type": "activity_end"}))
        peak_audio, peak_queue = 0.0, 0
        for _ in range(100):
            time.sleep(0.01)
            peak_audio = max(peak_audio, connection.conversation.pacer.buffered_seconds)
            peak_queue = max(peak_queue, connection.queue.pending)
        assert peak_audio <= 0.5 + 0.02
        assert peak_queue <= 20


def test_resuming_a_live_session_takes_it_over(client: TestClient) -> None:
    with client.websocket_connect("/ws") as first:
        session_id = start(first)["data"]["sessionId"]
        first.send_text(json.dumps({"type": "text", "text": "one"}))
        receive_until(first, "finish")
        with client.websocket_connect("/ws") as second:
            resumed = start(second, sessionId=session_id)
            assert resumed["data"]["resumed"] and resumed["data"]["sessionId"] == session_id
            # The first connection was told and closed before the second ran.
            error = first.receive_json()
            assert error == {
                "type": "error",
                "errorText": "this session was resumed by another connection",
            }
            with pytest.raises(WebSocketDisconnect) as closed:
                first.receive_json()
            assert closed.value.code == 1008
            second.send_text(json.dumps({"type": "text", "text": "two"}))
            answer = next(m for m in receive_until(second, "finish") if m["type"] == "text-delta")
            assert answer["delta"].startswith("You said: two (")


# ---------------------------------------------------------------- turn detection


def _send_audio(ws, pcm: bytes) -> None:
    for i in range(0, len(pcm), 640):  # 20 ms frames of 16 kHz s16, as fast as they go
        ws.send_bytes(pcm[i : i + 640])


def _push_to_talk_turn(ws, pcm: bytes) -> list[dict]:
    ws.send_text(json.dumps({"type": "activity_start"}))
    _send_audio(ws, pcm)
    ws.send_text(json.dumps({"type": "activity_end"}))
    return receive_until(ws, "finish")


def _transcripts(messages: list[dict]) -> list[str]:
    return [m["data"]["text"] for m in messages if m["type"] == "data-transcript"]


def test_turn_detection_is_negotiated_and_echoed(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        assert start(ws)["data"]["turnDetection"] == "server"
    with client.websocket_connect("/ws") as ws:
        assert start(ws, turnDetection="manual")["data"]["turnDetection"] == "manual"


def test_push_to_talk_setting_is_the_default_turn_detection(settings: Settings) -> None:
    manual = replace(settings, push_to_talk=True)
    with TestClient(create_app(manual)) as client:
        with client.websocket_connect("/ws") as ws:
            assert start(ws)["data"]["turnDetection"] == "manual"
        with client.websocket_connect("/ws") as ws:
            assert start(ws, turnDetection="server")["data"]["turnDetection"] == "server"


def test_manual_turns_ignore_audio_outside_activity_brackets(client: TestClient) -> None:
    speech = _tone_s16(0.8, 0.3)
    with client.websocket_connect("/ws") as ws:
        start(ws, turnDetection="manual")
        # Speech then a second of silence: a turn for voice activity detection,
        # nothing for manual turns. The text turn behind it answers first.
        _send_audio(ws, speech + bytes(32000))
        ws.send_text(json.dumps({"type": "text", "text": "after the audio"}))
        first = receive_until(ws, "finish")
        assert _transcripts(first) == []
        assert any(m["type"] == "text-delta" for m in first)
        # The bracket is the turn, exactly.
        turn = _push_to_talk_turn(ws, speech)
        assert _transcripts(turn) and f"({len(speech) // 2} samples" in _transcripts(turn)[0]


def test_server_turns_after_a_manual_connection_use_voice_activity(client: TestClient) -> None:
    speech = _tone_s16(0.8, 0.3)
    with client.websocket_connect("/ws") as ws:
        session_id = start(ws, turnDetection="manual")["data"]["sessionId"]
        assert _transcripts(_push_to_talk_turn(ws, speech))
    with client.websocket_connect("/ws") as ws:
        resumed = start(ws, sessionId=session_id, turnDetection="server")
        assert resumed["data"]["resumed"] and resumed["data"]["turnDetection"] == "server"
        _send_audio(ws, bytes(6400) + speech + bytes(32000))  # no brackets: VAD ends the turn
        assert _transcripts(receive_until(ws, "finish"))


def test_server_turns_still_accept_activity_brackets_then_resume_detection(
    client: TestClient,
) -> None:
    speech = _tone_s16(0.8, 0.3)
    with client.websocket_connect("/ws") as ws:
        start(ws)
        bracketed = _transcripts(_push_to_talk_turn(ws, speech))
        assert bracketed and f"({len(speech) // 2} samples" in bracketed[0]
        _send_audio(ws, bytes(6400) + speech + bytes(32000))
        assert _transcripts(receive_until(ws, "finish"))
