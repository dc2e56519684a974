"""Pure parts: protocol decode/encode, event translation, the segmenter,
settings, the JSON checks (the pacer: test_pacer.py)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from google.adk.events import Event
from google.genai import types

from audiocore_server.offline.model import OfflineLiveModel
from audiocore_server.offline.speech import EnergySegmenter, describe_utterance
from audiocore_server.turns.events import ModelAudio, TurnEnd, TurnTranslator
from audiocore_server.wire import chunks, fields, protocol
from audiocore_server.wire.audio_mime import audio_rate

LIMITS = fields.Limits()
DEFAULT = protocol.InputFormat()


# ---------------------------------------------------------------- protocol


def test_decode_start_full() -> None:
    msg = protocol.decode_text(
        json.dumps(
            {
                "type": "start",
                "input": {"sampleRate": 48000, "format": "f32", "channels": 1},
                "output": {"sampleRate": 16000, "binary": True},
                "sessionId": "abc",
            }
        ),
        DEFAULT,
        LIMITS,
    )
    assert msg == protocol.Start(
        protocol.InputFormat(48000, "f32", 1), protocol.OutputFormat(16000, True), "abc"
    )


def test_decode_start_turn_detection() -> None:
    def decode(**fields):
        return protocol.decode_text(json.dumps({"type": "start", **fields}), DEFAULT, LIMITS)

    assert decode().turn_detection is None  # the server's default applies
    assert decode(turnDetection="server").turn_detection == "server"
    assert decode(turnDetection="manual").turn_detection == "manual"
    for bad in ("auto", "MANUAL", 1, True, {}):
        with pytest.raises(fields.InputError, match=r"turnDetection: expected one of"):
            decode(turnDetection=bad)


def test_session_chunk_echoes_turn_detection() -> None:
    chunk = chunks.SessionInfo(
        "id",
        DEFAULT,
        protocol.OutputFormat(),
        model="offline",
        resumed=False,
        history=[],
        turn_detection="manual",
    )
    assert chunk.to_json()["data"]["turnDetection"] == "manual"


def test_decode_audio_chunk_accepts_standard_and_url_safe_base64() -> None:
    pcm = bytes(range(250)) + bytes(6)  # contains bytes that differ between alphabets
    for encoded in (base64.b64encode(pcm), base64.urlsafe_b64encode(pcm)):
        frame = {"type": "audio_chunk", "data": {"chunk": encoded.decode(), "sampleRate": 16000}}
        assert protocol.decode_text(json.dumps(frame), DEFAULT, LIMITS) == protocol.Audio(
            pcm, DEFAULT
        )


def test_binary_must_hold_whole_samples() -> None:
    f32 = protocol.InputFormat(48000, "f32", 1)
    assert protocol.decode_binary(b"\0" * 8, f32, LIMITS).data == b"\0" * 8
    with pytest.raises(fields.InputError, match="expected a multiple of 4 bytes .* got 6"):
        protocol.decode_binary(b"\0" * 6, f32, LIMITS)


def test_limits_raise_protocol_error_with_close_code() -> None:
    small = fields.Limits(max_message_bytes=10)
    with pytest.raises(protocol.ProtocolError) as err:
        protocol.decode_binary(b"\0" * 12, DEFAULT, small)
    assert err.value.close_code == protocol.CLOSE_MESSAGE_TOO_BIG


def test_server_chunks_are_ai_sdk_shaped() -> None:
    pcm = b"\x01\x00\xff\x7f"
    wire_pcm = {
        "type": "data-pcm",
        "data": {"content": "AQD/fw==", "sampleRate": 24000, "channels": 1, "bitDepth": 16},
        "transient": True,
    }
    assert chunks.Pcm(pcm, 24000).to_json() == wire_pcm
    # The hot path's encoder writes the same JSON without the dict.
    assert json.loads(chunks.encode_pcm(pcm, 24000)) == wire_pcm
    assert chunks.encode_pcm(pcm, 24000) == chunks.encode(chunks.Pcm(pcm, 24000))
    assert chunks.Error("x").to_json() == {"type": "error", "errorText": "x"}
    assert chunks.Finish().to_json() == {"type": "finish", "finishReason": "stop"}
    assert chunks.Finish("other", {"model": "m"}).to_json() == {
        "type": "finish",
        "finishReason": "other",
        "messageMetadata": {"model": "m"},
    }
    assert chunks.ToolInput("c", "f", {"a": 1}).to_json() == {
        "type": "tool-input-available",
        "toolCallId": "c",
        "toolName": "f",
        "input": {"a": 1},
    }
    marked = chunks.ToolInput("c", "f", {}, client_executes=True).to_json()
    assert chunks.client_executes(marked) and not chunks.client_executes({"type": "x"})
    assert json.loads(chunks.encode(chunks.Transcript("é", final=True))) == {
        "type": "data-transcript",
        "data": {"text": "é", "final": True},
        "transient": True,
    }
    assert chunks.StartStep().to_json() == {"type": "start-step"}
    assert chunks.Interrupted("client", 120).to_json() == {
        "type": "data-interrupted",
        "data": {"source": "client", "droppedMs": 120},
        "transient": True,
    }


# ---------------------------------------------------------------- events


def _event(**fields) -> Event:
    return Event(author=fields.pop("author", "voice_agent"), **fields)


def _audio_event(pcm: bytes, rate: int = 24000) -> Event:
    blob = types.Blob(mime_type=f"audio/pcm;rate={rate}", data=pcm)
    return _event(content=types.Content(role="model", parts=[types.Part(inline_data=blob)]))


def _types(items) -> list[str]:
    """The chunk types, "audio" for model audio; the turn-end marker must sit
    right before every finish."""
    kinds = [
        i.type if isinstance(i, chunks.Chunk) else "end" if isinstance(i, TurnEnd) else "audio"
        for i in items
    ]
    ends = [k for k, kind in enumerate(kinds) if kind == "end"]
    assert ends == [k - 1 for k, kind in enumerate(kinds) if kind == "finish"], kinds
    return [kind for kind in kinds if kind != "end"]


def test_translator_streaming_transcription_deltas_then_aggregate() -> None:
    t = TurnTranslator()
    out = t.translate(
        _event(
            author="user",
            input_transcription=types.Transcription(text="hel"),
            partial=True,
        )
    )
    out += t.translate(_event(output_transcription=types.Transcription(text="Hi "), partial=True))
    out += t.translate(_audio_event(b"\0\0" * 10))
    out += t.translate(_event(output_transcription=types.Transcription(text="there"), partial=True))
    out += t.translate(
        _event(output_transcription=types.Transcription(text="Hi there", finished=True))
    )
    out += t.translate(_event(turn_complete=True))
    assert _types(out) == [
        "start",
        "data-transcript",
        "text-start",
        "text-delta",
        "audio",
        "text-delta",
        "text-end",
        "finish",
    ]
    assert "".join(i.delta for i in out if isinstance(i, chunks.TextDelta)) == "Hi there"
    assert out[4] == ModelAudio(b"\0\0" * 10, 24000)
    assert t.turn == 1 and not t.in_turn


def test_translator_no_finish_without_start_and_interrupted_closes_turn() -> None:
    t = TurnTranslator()
    assert t.translate(_event(turn_complete=True)) == []
    out = t.translate(_audio_event(b"\0\0"))
    out += t.translate(_event(interrupted=True))
    out += t.translate(_event(turn_complete=True))
    assert _types(out) == ["start", "audio", "finish"]


def test_translator_tool_turn_is_one_message() -> None:
    t = TurnTranslator()
    call = types.FunctionCall(id="adk-1", name="get_current_time", args={})
    resp = types.FunctionResponse(id="adk-1", name="get_current_time", response={"time": "x"})
    out = t.translate(
        _event(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
    )
    out += t.translate(
        _event(content=types.Content(role="user", parts=[types.Part(function_response=resp)]))
    )
    out += t.translate(
        _event(content=types.Content(role="model", parts=[types.Part(text="It is x.")]))
    )
    out += t.translate(_event(turn_complete=True))
    assert _types(out) == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-available",
        "tool-output-available",
        "finish-step",
        "start-step",  # the answer after the tool is a step of its own
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]


def test_translator_puts_one_responses_tool_calls_in_one_step() -> None:
    t = TurnTranslator()
    calls = [
        types.Part(function_call=types.FunctionCall(id=f"adk-{k}", name="get_weather", args={}))
        for k in (1, 2)
    ]
    out = t.translate(_event(content=types.Content(role="model", parts=calls)))
    responses = [
        types.Part(
            function_response=types.FunctionResponse(id=f"adk-{k}", name="get_weather", response={})
        )
        for k in (1, 2)
    ]
    out += t.translate(_event(content=types.Content(role="user", parts=responses)))
    assert _types(out) == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-available",
        "tool-input-start",
        "tool-input-available",
        "tool-output-available",
        "tool-output-available",
        "finish-step",
    ]


def test_audio_rate_from_mime() -> None:
    assert audio_rate("audio/pcm;rate=16000") == 16000
    assert audio_rate("audio/pcm") == 24000


# ---------------------------------------------------------------- offline model


def _tone(seconds: float, level: float) -> bytes:
    t = np.arange(int(seconds * 16000)) / 16000
    return np.rint(level * 32767 * np.sin(2 * np.pi * 440 * t)).astype("<i2").tobytes()


def test_segmenter_returns_an_exact_contiguous_slice() -> None:
    seg = EnergySegmenter(OfflineLiveModel(hangover_ms=200, preroll_ms=100))
    stream = _tone(0.5, 0.0) + _tone(0.4, 0.3) + _tone(0.6, 0.0)
    events = [seg.feed(stream[i : i + 640]) for i in range(0, len(stream), 640)]
    assert events.count("onset") == 1
    (utterance,) = [e for e in events if isinstance(e, bytes)]
    start = stream.index(utterance)
    assert start == (25 - 5) * 640  # 100 ms of pre-roll before the onset chunk
    assert len(utterance) == (5 + 20 + 10) * 640  # pre-roll + speech + 200 ms hangover


def test_segmenter_ignores_clicks() -> None:
    seg = EnergySegmenter(OfflineLiveModel(hangover_ms=100, min_speech_ms=60))
    stream = _tone(0.02, 0.5) + _tone(0.3, 0.0)
    events = [seg.feed(stream[i : i + 640]) for i in range(0, len(stream), 640)]
    assert events[0] == "onset" and not any(isinstance(e, bytes) for e in events)


def test_description_is_honest_about_no_asr() -> None:
    text = describe_utterance(_tone(1.0, 0.5))
    assert text.startswith("[offline model: no speech recognition] 1.00 s of audio (16000 samples")
    assert "peak -6.0 dBFS" in text and "RMS -9.0 dBFS" in text


# ---------------------------------------------------------------- settings


def test_settings_from_env() -> None:
    from pathlib import Path

    from audiocore_server.settings import Settings

    env = {
        "AUDIOCORE_PORT": "9001",
        "AUDIOCORE_ALLOWED_ORIGINS": "https://a.example, https://b.example",
        "AUDIOCORE_ALLOW_LOCALHOST": "false",
        "AUDIOCORE_DATA_DIR": "/srv/data",
        "AUDIOCORE_OUTPUT_LEAD_MS": "120",
        "AUDIOCORE_MAX_BUFFERED_OUTPUT_S": "2.5",
        "AUDIOCORE_DATABASE_URL": "postgresql+asyncpg://db/x",
    }
    s = Settings.from_env(env, port=9002)
    assert s.port == 9002  # overrides win
    assert s.allowed_origins == ("https://a.example", "https://b.example")
    assert s.allow_localhost is False and s.data_dir == Path("/srv/data")
    assert s.output_lead_ms == 120 and s.max_buffered_output_s == 2.5
    assert s.database_url == "postgresql+asyncpg://db/x"
    assert s.session_db_path == Path("/srv/data/sessions.db")


# ---------------------------------------------------------------- JSON checks and /run_live's audio


def test_json_tree_limits_depth_and_lone_surrogates_at_any_place() -> None:
    limit = protocol.MAX_JSON_DEPTH
    protocol.check_json_tree(json.loads("[" * limit + "]" * limit))
    protocol.check_json_tree({"a": [{"b": "x" * 10_000}], "c": None, "é": "ü"})
    for deep in (
        "[" * (limit + 1) + "]" * (limit + 1),
        '{"a":' * (limit + 1) + "1" + "}" * (limit + 1),
    ):
        with pytest.raises(protocol.UnparsableJson, match=f"nested at most {limit} deep"):
            protocol.check_json_tree(json.loads(deep))
    for bad in ({"\ud800": 1}, {"a": ["\udfff"]}, [[[{"x": "ok \ud812"}]]]):
        with pytest.raises(fields.InputError, match="lone surrogates"):
            protocol.check_json_tree(bad)


def test_load_json_refuses_what_the_tree_check_refuses_however_it_is_written() -> None:
    """``load_json`` walks the tree only when the text could hold something to
    refuse (more containers than the depth bound, an escape, non-ASCII): the
    refusals reach the client whichever way a frame is written."""
    limit = protocol.MAX_JSON_DEPTH
    assert protocol.load_json('{"a":' * (limit - 1) + r'"x\\u"' + "}" * (limit - 1), LIMITS)
    assert protocol.load_json(r'{"text": "caf\u00e9", "é": "ü"}', LIMITS)["text"] == "café"
    deep = '{"a":' * limit + "[1]" + "}" * limit  # one container more than the bound
    with pytest.raises(protocol.UnparsableJson, match=f"nested at most {limit} deep"):
        protocol.load_json(deep, LIMITS)
    for bad in (r'{"text": "bad \ud800 here"}', r'{"t": ["\uDFFF"]}', r'{"é": {"\ud812": 1}}'):
        with pytest.raises(fields.InputError, match="lone surrogates"):
            protocol.load_json(bad, LIMITS)
    with pytest.raises(protocol.UnparsableJson):
        protocol.load_json("\ufeff{}", LIMITS)  # a byte order mark: json.loads refuses it
    with pytest.raises(fields.InputError, match="finite"):
        protocol.load_json('{"x": NaN}', LIMITS)


def test_run_live_audio_fast_path_reads_what_adks_model_reads() -> None:
    """``audio_blob`` skips pydantic for the common audio request; whatever it
    reads, LiveRequest reads the same; what it declines goes the full path."""
    from google.adk.agents.live_request_queue import LiveRequest

    from audiocore_server.live.run_live import audio_blob

    pcm = bytes(range(256)) * 3 + b"\xfb\xff\xbf\x01"  # "+", "/" and "==" in base64
    standard = base64.b64encode(pcm).decode()
    urlsafe = base64.urlsafe_b64encode(pcm).decode()
    taken = [
        {"blob": {"mime_type": "audio/pcm;rate=16000", "data": standard}},
        {"blob": {"mimeType": "audio/pcm;rate=48000", "data": standard}},
        {"blob": {"mime_type": "audio/pcm", "data": ""}},
        {"blob": {"mime_type": "audio/pcm", "data": base64.b64encode(b"ab").decode()}},
    ]
    for request in taken:
        fast = audio_blob(request)
        full = LiveRequest.model_validate(request).blob
        assert full is not None and fast == (full.mime_type, full.data)
    declined = [
        {"blob": {"mime_type": "audio/pcm", "data": urlsafe}},  # URL-safe: pydantic's call
        {"blob": {"mime_type": "audio/pcm", "data": standard.rstrip("=")}},
        {"blob": {"mime_type": "audio/pcm", "data": "not base64!"}},
        {"blob": {"mime_type": "audio/pcm", "data": 5}},
        {"blob": {"mime_type": "image/png", "data": standard}},
        {"blob": {"mime_type": "audio/pcm", "data": standard, "extra": 1}},
        {"blob": {"mime_type": "audio/pcm", "mimeType": "audio/pcm", "data": standard}},
        {"blob": {"data": standard}},
        {"blob": [standard]},
        {"blob": {"mime_type": "audio/pcm", "data": standard}, "close": True},
        {"content": {"parts": [{"text": "hi"}]}},
    ]
    for request in declined:
        assert audio_blob(request) is None, request
    url_blob = LiveRequest.model_validate(declined[0]).blob
    assert url_blob is not None and url_blob.data == pcm  # and the full path reads it


def _rms_dbfs(dbfs: float) -> float:
    """``_tone``'s level for a sine whose RMS is ``dbfs`` (full scale 32768)."""
    return float(10 ** (dbfs / 20) * np.sqrt(2) * 32768 / 32767)


def test_voice_check_against_the_rms_and_on_odd_input() -> None:
    from audiocore_server.audio.voice import energy, voiced

    threshold = voiced.rms
    assert not voiced(b"") and not voiced(b"\x7f")  # no whole sample
    assert not voiced(bytes(640))  # silence
    # The threshold is -40 dBFS: 20 ms just above and just below it.
    assert voiced(_tone(0.02, _rms_dbfs(-39)))
    assert not voiced(_tone(0.02, _rms_dbfs(-41)))
    # An odd trailing byte is no sample: the verdict is the whole samples'.
    loud = _tone(0.02, _rms_dbfs(-20))
    assert voiced(loud + b"\x00") and not voiced(bytes(640) + b"\xff")
    # The energy it compares (which the echo's mute shares): whole samples
    # only, exact.
    assert energy(b"") == 0.0 and energy(b"\x7f") == 0.0
    assert energy(np.array([3, -4], "<i2").tobytes() + b"\xff") == 25.0
    assert energy(np.full(16000, -32768, "<i2").tobytes()) == 32768.0**2 * 16000
    # Full scale cannot overflow: 32767² · 16000 samples in one chunk.
    assert voiced(np.full(16000, 32767, "<i2").tobytes())
    assert voiced(np.full(16000, -32768, "<i2").tobytes())
    # Against the RMS in float64, away from the threshold's rounding.
    rng = np.random.default_rng(7)
    for n in (1, 2, 319, 320, 800, 16000):
        for scale in (10.0, 100.0, 300.0, 1000.0):
            pcm = rng.normal(0, scale, n).clip(-32768, 32767).astype("<i2")
            rms = float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2)))
            if abs(rms / threshold - 1) > 1e-3:
                assert voiced(pcm.tobytes()) == (rms >= threshold), (n, scale, rms)


def test_run_live_reads_each_blobs_rate_also_when_it_changes() -> None:
    """/run_live reads the rate once per mime type: a client that switches
    rates mid-stream, back and forth, is read at each one; a bad rate after a
    good one is still refused, and does not replace the good one."""
    from google.adk.agents.run_config import RunConfig

    from audiocore_server.live.run_live import AdkDialect, RunLiveQuery

    dialect = AdkDialect(RunLiveQuery("app", "user", "session"), RunConfig())

    def blob(rate: int, pcm: bytes = b"\1\0\2\0") -> dict:
        data = base64.b64encode(pcm).decode()
        text = json.dumps({"blob": {"mime_type": f"audio/pcm;rate={rate}", "data": data}})
        return {"type": "websocket.receive", "text": text}

    for rate in (16_000, 16_000, 24_000, 16_000, 48_000, 48_000):
        (audio,) = dialect.decode(blob(rate), DEFAULT, LIMITS)
        assert isinstance(audio, protocol.Audio)
        assert (audio.format.sample_rate, audio.data) == (rate, b"\1\0\2\0")
    with pytest.raises(fields.InputError, match="audio rate 12345"):
        dialect.decode(blob(12_345), DEFAULT, LIMITS)
    with pytest.raises(fields.InputError, match="multiple of 2 bytes"):
        dialect.decode(blob(48_000, b"\1\0\2"), DEFAULT, LIMITS)  # odd length: half a sample
    (audio,) = dialect.decode(blob(48_000, b""), DEFAULT, LIMITS)  # empty: nothing to play
    assert audio.format.sample_rate == 48_000 and audio.data == b""
