"""The parts of a live conversation, each on its own: no socket, no runner.

The microphone's path, the uplink, the line policy, the playout, the model
events' watchdog, the sender, and the one model of delegated tool calls
that the live connection and the HTTP chat share; then the structure that
keeps their private names out of the tests.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import json
import math
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from google.adk.events import Event
from google.genai import types
from prometheus_client import CollectorRegistry

from audiocore_server.audio.pacer import AudioFrame, OutputPacer
from audiocore_server.audio.voice import LINE_HANGOVER_S
from audiocore_server.live.frames import SseOverWebSocketWire, UiStreamWire
from audiocore_server.live.line import LinePolicy
from audiocore_server.live.mic import MicPath
from audiocore_server.live.model_events import ModelEvents, answering
from audiocore_server.live.playout import Playout
from audiocore_server.live.request_queue import BoundedLiveRequestQueue
from audiocore_server.live.run_live import AdkEventTranslator, Speaker
from audiocore_server.live.sender import Sender
from audiocore_server.live.shutdown import Shutdown
from audiocore_server.live.uplink import Uplink
from audiocore_server.ops.metrics import ConnectionMetrics
from audiocore_server.ops.turn_timing import TurnMetrics, TurnTimer
from audiocore_server.tools.calls import (
    AskBrowser,
    PendingCall,
    RunOnServer,
    apply,
    approval_id_of,
    delegated_calls,
    pending_in,
    run_on_server,
)
from audiocore_server.tools.delegation import SessionDelegations
from audiocore_server.tools.spec import ToolSpec, ToolState, spec_of, tool
from audiocore_server.turns.events import TurnTranslator
from audiocore_server.wire import chunks, protocol
from audiocore_server.wire.fields import InputError, ToolApproval, ToolResult

F32_48K = protocol.InputFormat(48_000, "f32", 1)
S16_16K = protocol.InputFormat(16_000, "s16", 1)


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _sine(seconds: float, rate: int, amplitude: float) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    return (amplitude * np.sin(2 * math.pi * 440 * t)).astype(np.float32)


def _drain(queue: BoundedLiveRequestQueue) -> list[Any]:
    async def take() -> list[Any]:
        return [await queue.get() for _ in range(queue.pending)]

    return asyncio.run(take())


# ---------------------------------------------------------------- mic


def test_mic_path_converts_and_offers_steady_chunks_of_the_model_rate() -> None:
    queue = BoundedLiveRequestQueue(100)
    reports: list[str] = []
    mic = MicPath(queue, model_rate=16_000, chunk_ms=20, report=reports.append)
    mic.audio(protocol.Audio(_sine(0.1, 48_000, 0.5).tobytes(), F32_48K))
    requests = _drain(queue)
    assert requests and all(r.blob.mime_type == "audio/pcm;rate=16000" for r in requests)
    assert all(len(r.blob.data) == 640 for r in requests)  # 20 ms of 16 kHz PCM16
    assert mic.sent
    mic.flush()  # the resampler's tail and the short remainder
    total = sum(len(r.blob.data) for r in [*requests, *_drain(queue)]) // 2
    assert total == 1600  # 0.1 s at 16 kHz: nothing lost, nothing made up
    assert reports == []


def test_mic_path_keeps_the_voice_until_the_hangover_ends() -> None:
    clock = Clock()
    mic = MicPath(
        BoundedLiveRequestQueue(100), model_rate=16_000, chunk_ms=20, report=print, clock=clock
    )
    mic.audio(protocol.Audio(bytes(640), S16_16K))  # silence
    assert mic.voice_until == 0.0
    loud = (_sine(0.02, 16_000, 0.3) * 32767).astype("<i2").tobytes()
    mic.audio(protocol.Audio(loud, S16_16K))
    assert mic.voice_until == clock.now + LINE_HANGOVER_S
    clock.now += 1.0
    mic.audio(protocol.Audio(bytes(640), S16_16K))
    assert mic.voice_until == 100.0 + LINE_HANGOVER_S  # silence does not extend it


def test_mic_path_drops_past_the_bound_with_one_error_per_episode() -> None:
    queue = BoundedLiveRequestQueue(2)
    reports: list[str] = []
    mic = MicPath(queue, model_rate=16_000, chunk_ms=20, report=reports.append)
    chunk = protocol.Audio(bytes(640), S16_16K)
    for _ in range(5):
        mic.audio(chunk)
    assert queue.pending == 2 and queue.dropped_chunks == 3
    assert reports == ["the model is not keeping up; input audio is being dropped"]
    _drain(queue)
    mic.audio(chunk)  # room again: the episode is over
    for _ in range(3):
        mic.audio(chunk)
    assert len(reports) == 2


def test_mic_path_finishes_the_old_stream_when_the_format_changes() -> None:
    queue = BoundedLiveRequestQueue(100)
    mic = MicPath(queue, model_rate=16_000, chunk_ms=20, report=print)
    mic.audio(protocol.Audio(bytes(300), S16_16K))  # less than a chunk: held
    assert queue.pending == 0
    mic.audio(protocol.Audio(_sine(0.02, 48_000, 0.1).tobytes(), F32_48K))
    sizes = [len(r.blob.data) for r in _drain(queue)]
    assert sizes[0] == 300  # the 16 kHz stream's remainder went first, whole


# ---------------------------------------------------------------- uplink and line


class Playback:
    def __init__(self) -> None:
        self.playback_ends_at = 0.0


@dataclasses.dataclass
class Wired:
    """An uplink and a line policy on one queue, with what they read."""

    queue: BoundedLiveRequestQueue
    mic: MicPath
    playback: Playback
    translator: TurnTranslator
    line: LinePolicy
    uplink: Uplink
    reports: list[str]
    pending: list[int]


def _wired(edges_refused: bool = False, max_pending: int = 10) -> Wired:
    queue = BoundedLiveRequestQueue(max_pending)
    reports: list[str] = []
    mic = MicPath(queue, model_rate=16_000, chunk_ms=20, report=reports.append)
    playback, translator, pending = Playback(), TurnTranslator(), [0]
    line = LinePolicy(mic, playback, translator, lambda: pending[0])
    uplink = Uplink(queue, mic, line, report=reports.append, edges_refused=edges_refused)
    return Wired(queue, mic, playback, translator, line, uplink, reports, pending)


def test_uplink_turn_edges_flush_the_mic_and_tell_the_line() -> None:
    w = _wired()
    uplink, line, queue = w.uplink, w.line, w.queue
    w.mic.audio(protocol.Audio(bytes(300), S16_16K))  # less than a chunk: held
    uplink.activity_start()
    assert line.talking and line.free_at() is None
    uplink.activity_end()
    assert not line.talking and line.awaiting_answer
    requests = _drain(queue)
    assert [len(r.blob.data) if r.blob else None for r in requests][0] == 300
    assert requests[1].activity_start is not None and requests[-1].activity_end is not None


def test_uplink_refuses_turn_edges_where_the_model_detects_turns() -> None:
    w = _wired(edges_refused=True)
    uplink, line, queue = w.uplink, w.line, w.queue
    for edge in (uplink.activity_start, uplink.activity_end):
        with pytest.raises(InputError, match='turnDetection "manual"'):
            edge()
    assert queue.pending == 0 and not line.talking


def test_uplink_bounds_typed_turns_but_never_tool_answers() -> None:
    w = _wired(max_pending=1)
    uplink, line, queue, reports = w.uplink, w.line, w.queue, w.reports
    uplink.user_turn("one")
    assert line.awaiting_answer
    uplink.user_turn("two")  # past the content room: dropped, reported once
    uplink.user_turn("three")
    assert reports == ["the model is not keeping up; messages are dropped until it catches up"]
    response = types.FunctionResponse(id="c1", name="f", response={"ok": True})
    uplink.tool_answer([response], {"k": 1})
    uplink.task_outcome("the task finished")
    requests = _drain(queue)
    assert [r.content.parts[0].text for r in requests if r.content.parts[0].text] == [
        "one",
        "the task finished",
    ]
    answer = next(r for r in requests if r.content.parts[0].function_response)
    assert answer.state_delta == {"k": 1}


def test_line_is_free_only_when_nobody_speaks_and_nothing_waits() -> None:
    w = _wired()
    line, mic, playback, translator, pending = w.line, w.mic, w.playback, w.translator, w.pending
    mic.voice_until, playback.playback_ends_at = 5.0, 7.0
    assert line.free_at() == 7.0
    mic.voice_until = 9.0
    assert line.free_at() == 9.0
    pending[0] = 1  # a tool call waits for the user
    assert line.free_at() is None
    pending[0] = 0
    translator.begin()  # the model's turn is open
    assert line.free_at() is None
    translator.finish()
    line.turn_sent()
    assert line.free_at() is None
    line.answer_ended()
    assert line.free_at() == 9.0


def test_every_dialect_says_whether_the_models_turn_is_open() -> None:
    adk = AdkEventTranslator(Speaker())
    assert not adk.in_turn
    said = types.Content(role="model", parts=[types.Part(text="hi")])
    adk.translate(Event(author="voice_agent", content=said))
    assert adk.in_turn
    adk.translate(Event(author="voice_agent", turn_complete=True))
    assert not adk.in_turn
    adk.translate(Event(author="user", content=said))  # the user's own words
    assert not adk.in_turn


# ---------------------------------------------------------------- playout


PAY = ToolSpec("process_payment", lambda **_: None, approval=True)
MUSIC = ToolSpec("change_bgm", lambda **_: None, runs_in="browser")
TOOLS = {spec.name: spec for spec in (PAY, MUSIC)}


def _pacer() -> OutputPacer:
    return OutputPacer(
        sample_rate=24_000, frame_ms=20, lead_s=10.0, max_audio_s=30.0, max_messages=100
    )


def _playout(
    pacer: OutputPacer,
    delegations: SessionDelegations,
    *,
    output_rate: int = 24_000,
    on_turn_end: Any = lambda: None,
    on_barge_in: Any = lambda: None,
) -> Playout:
    return Playout(
        TurnTranslator(),
        pacer,
        output_rate=output_rate,
        tools=TOOLS,
        delegations=delegations,
        on_turn_end=on_turn_end,
        on_barge_in=on_barge_in,
        timer=_timer(),
    )


def _timer() -> TurnTimer:
    return TurnTimer(TurnMetrics(CollectorRegistry()))


async def _due(pacer: OutputPacer) -> list[AudioFrame | chunks.Chunk]:
    items = []
    while (item := pacer.get_nowait()) is not None:
        items.append(item)
    return items


def _call_event(*calls: tuple[str, str]) -> Event:
    parts = [types.Part(function_call=types.FunctionCall(id=i, name=n, args={})) for i, n in calls]
    return Event(
        author="voice_agent",
        content=types.Content(role="model", parts=parts),
        long_running_tool_ids={i for i, _ in calls},
    )


def test_playout_puts_an_answer_in_the_pacer_and_ends_the_turn() -> None:
    async def scenario() -> None:
        pacer, ends = _pacer(), []
        delegations = SessionDelegations("s", timeout_s=60, grace_s=1)
        playout = _playout(
            pacer, delegations, output_rate=48_000, on_turn_end=lambda: ends.append(1)
        )
        pcm = bytes(4800)  # 100 ms at 24 kHz
        blob = types.Blob(mime_type="audio/pcm;rate=24000", data=pcm)
        audio = types.Content(role="model", parts=[types.Part(inline_data=blob)])
        await playout.on_event(Event(author="voice_agent", content=audio))
        await playout.on_event(Event(author="voice_agent", turn_complete=True))
        items = await _due(pacer)
        frames = [i for i in items if isinstance(i, AudioFrame)]
        assert sum(len(f.pcm) for f in frames) == 9600  # resampled to 48 kHz, whole
        assert [type(i).__name__ for i in items if not isinstance(i, AudioFrame)] == [
            "Start",
            "Finish",
        ]
        assert ends == [1]

    asyncio.run(scenario())


def test_playout_hands_delegated_calls_over_and_ends_the_clients_stream() -> None:
    async def scenario() -> None:
        pacer = _pacer()
        delegations = SessionDelegations("s", timeout_s=60, grace_s=1)
        playout = _playout(pacer, delegations)
        await playout.on_event(_call_event(("c1", "process_payment"), ("c2", "change_bgm")))
        kinds = [i.type for i in await _due(pacer) if isinstance(i, chunks.Chunk)]
        assert kinds[-3:] == ["tool-approval-request", "finish-step", "end-of-stream"]
        assert delegations.pending == 2
        await delegations.close()

    asyncio.run(scenario())


def test_barge_in_drops_the_audio_and_cancels_the_waiting_calls() -> None:
    async def scenario() -> None:
        pacer, flushed = _pacer(), []
        delegations = SessionDelegations("s", timeout_s=60, grace_s=1)
        playout = _playout(pacer, delegations, on_barge_in=lambda: flushed.append(1))
        blob = types.Blob(mime_type="audio/pcm;rate=24000", data=bytes(48_000))  # 1 s
        audio = types.Content(role="model", parts=[types.Part(inline_data=blob)])
        await playout.on_event(Event(author="voice_agent", content=audio))
        delegations.add("c9", MUSIC, {})
        playout.barge_in("client")
        items = await _due(pacer)
        notice = next(i for i in items if isinstance(i, chunks.Interrupted))
        assert notice == chunks.Interrupted("client", 1000) and flushed == [1]
        assert pacer.buffered_seconds == 0 and delegations.pending == 0

    asyncio.run(scenario())


# ---------------------------------------------------------------- model events


async def _events(*items: Event, hang: bool = False) -> AsyncGenerator[Event, None]:
    for item in items:
        yield item
    if hang:
        await asyncio.Event().wait()  # a model that never says anything again


def test_a_model_silent_mid_answer_is_a_stall_and_between_answers_is_not() -> None:
    said = types.Content(role="model", parts=[types.Part(text="hi")])

    async def scenario() -> None:
        quiet = ModelEvents(
            _events(Event(author="voice_agent", turn_complete=True)), stall_timeout_s=0.01, name="t"
        )
        assert (await quiet.next()) is not None and not quiet.answering
        assert await quiet.next() is None  # over, not stalled
        stalled = ModelEvents(
            _events(Event(author="voice_agent", content=said), hang=True),
            stall_timeout_s=0.01,
            name="t",
        )
        assert (await stalled.next()) is not None and stalled.answering
        with pytest.raises(Shutdown) as ended:
            await stalled.next()
        assert ended.value.code == protocol.CLOSE_INTERNAL_ERROR
        assert "stopped answering" in ended.value.error
        await stalled.aclose()

    asyncio.run(scenario())
    assert answering(Event(author="voice_agent", content=said))
    assert not answering(Event(author="voice_agent", content=said, interrupted=True))


# ---------------------------------------------------------------- sender


class FakeSocket:
    def __init__(self, block: bool = False) -> None:
        self.frames: list[str | bytes] = []
        self.block = block

    async def send_text(self, text: str) -> None:
        if self.block:
            await asyncio.Event().wait()
        self.frames.append(text)

    async def send_bytes(self, data: bytes) -> None:
        self.frames.append(data)


def test_sender_frames_in_the_pacers_order_through_the_dialects_wire() -> None:
    async def scenario() -> list[str | bytes]:
        pacer, ws = _pacer(), FakeSocket()
        sender = Sender(
            ws,  # type: ignore[arg-type]
            SseOverWebSocketWire(),
            pacer,
            output_rate=24_000,
            send_timeout_s=5,
            metrics=ConnectionMetrics(),
            timer=_timer(),
        )
        await pacer.put_message(chunks.Start("m1"))
        await pacer.put_audio(bytes(960), turn=0)
        pacer.end_turn()
        await pacer.put_message(chunks.Finish())
        await sender.send_due()
        await sender.send_now(chunks.Error("later"))
        return ws.frames

    frames = asyncio.run(scenario())
    assert frames[0] == 'data: {"type":"start","messageId":"m1"}\n\n'
    assert json.loads(frames[1][len("data: ") :])["type"] == "data-pcm"
    # The finish says what audio the turn sent: one 20 ms frame at 24 kHz.
    audio = '{"audio":{"chunks":1,"bytes":960,"sampleRate":24000,"duration":0.02}}'
    assert frames[-3:] == [
        f'data: {{"type":"finish","finishReason":"stop","messageMetadata":{audio}}}\n\n',
        "data: [DONE]\n\n",
        'data: {"type":"error","errorText":"later"}\n\n',
    ]


def test_a_client_that_does_not_read_ends_the_connection_unsendable() -> None:
    async def scenario() -> None:
        pacer = _pacer()
        sender = Sender(
            FakeSocket(block=True),  # type: ignore[arg-type]
            UiStreamWire(),
            pacer,
            output_rate=24_000,
            send_timeout_s=0.01,
            metrics=ConnectionMetrics(),
            timer=_timer(),
        )
        await pacer.put_message(chunks.Start("m1"))
        with pytest.raises(Shutdown) as ended:
            await sender.send_due()
        assert ended.value.unsendable and ended.value.code == protocol.CLOSE_POLICY_VIOLATION

    asyncio.run(scenario())


# ---------------------------------------------------------------- delegated calls


def test_one_approval_id_scheme_and_one_rule_for_delegated_calls() -> None:
    event = _call_event(("c1", "process_payment"), ("c2", "change_bgm"))
    plain = types.Part(function_call=types.FunctionCall(id="c3", name="get_weather", args={}))
    event.content.parts.append(plain)
    assert [(c.id, s.name) for c, s in delegated_calls(event, TOOLS)] == [
        ("c1", "process_payment"),
        ("c2", "change_bgm"),
    ]
    not_long_running = event.model_copy(update={"long_running_tool_ids": set()})
    assert delegated_calls(not_long_running, TOOLS) == []
    call = PendingCall.new("c1", PAY, {}, 60)
    assert call.approval_id == approval_id_of("c1") == "apr_c1"
    assert call.ask() == [chunks.ToolApprovalRequest("apr_c1", "c1")]
    assert PendingCall.new("c2", MUSIC, {}, 60).ask() == []


def test_answers_resolve_calls_or_are_refused_with_the_reason() -> None:
    calls = {"c1": PendingCall.new("c1", PAY, {"amount": 1}, 60)}
    with pytest.raises(InputError, match="no pending approval 'apr_nope'"):
        apply(calls, [ToolApproval("apr_nope", True)], session_id="s", via="t")
    with pytest.raises(InputError, match="runs on the server"):
        apply(calls, [ToolResult("c1", output=1)], session_id="s", via="t")
    # Read from a resubmitted history: an unknown answer is no error.
    resubmitted = [ToolApproval("apr_x", True, from_history=True)]
    assert apply(calls, resubmitted, session_id="s", via="t") == []
    (step,) = apply(calls, [ToolApproval("apr_c1", True)], session_id="s", via="t")
    assert step == RunOnServer(calls["c1"]) and calls["c1"].running
    with pytest.raises(InputError, match="no pending approval"):  # spent
        apply(calls, [ToolApproval("apr_c1", True)], session_id="s", via="t")
    denied_calls = {"c2": PendingCall.new("c2", PAY, {}, 60)}
    (outcome,) = apply(denied_calls, [ToolApproval("apr_c2", False)], session_id="s", via="t")
    assert outcome.response["status"] == "denied"
    assert outcome.client == chunks.ToolOutputDenied("c2")


def test_a_browser_tool_needs_its_approval_before_its_result() -> None:
    where = ToolSpec("get_location", lambda: None, approval=True, runs_in="browser")
    calls = {"c1": PendingCall.new("c1", where, {}, 60)}
    with pytest.raises(InputError, match="waiting for its approval"):
        apply(calls, [ToolResult("c1", output={"city": "x"})], session_id="s", via="t")
    # Approval and result together (an AI SDK client's history): no "run now".
    steps = apply(
        calls,
        [ToolApproval("apr_c1", True), ToolResult("c1", output={"city": "x"})],
        session_id="s",
        via="t",
    )
    (outcome,) = steps
    assert outcome.response == {"city": "x"} and outcome.client == chunks.ToolOutput(
        "c1", {"city": "x"}
    )
    alone = {"c2": PendingCall.new("c2", where, {}, 60)}
    assert apply(alone, [ToolApproval("apr_c2", True)], session_id="s", via="t") == [
        AskBrowser(alone["c2"])
    ]


def test_the_http_view_reads_pending_calls_back_from_the_events() -> None:
    answered = Event(
        author="user",
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="c2", name="change_bgm", response={}
                    )
                )
            ],
        ),
    )
    pending = pending_in(
        [_call_event(("c1", "process_payment"), ("c2", "change_bgm")), answered], TOOLS, 60
    )
    assert list(pending) == ["c1"] and pending["c1"].approval_id == "apr_c1"


def test_an_approved_server_tool_runs_within_its_timeout_and_failures_get_a_reference() -> None:
    @tool(approval=True)
    def pay(amount: float, state: ToolState) -> dict[str, Any]:
        state["paid"] = amount
        return {"paid": amount}

    @tool(approval=True, timeout_s=0.01)
    async def slow() -> None:
        await asyncio.Event().wait()

    def boom() -> None:
        raise OSError("secret detail")

    def run(spec: ToolSpec, args: dict[str, Any]) -> Any:
        return run_on_server(PendingCall.new("c1", spec, args, 60), ToolState({}), "s")

    async def scenario() -> None:
        ok = await run(spec_of(pay), {"amount": 2})
        assert ok.response == {"paid": 2} and ok.state_delta == {"paid": 2}
        late = await run(spec_of(slow), {})
        assert late.response["status"] == "error" and "TimeoutError" in late.response["error"]
        failed = await run(ToolSpec("boom", boom), {})
        assert "OSError" in failed.response["error"] and "secret" not in failed.response["error"]
        assert "server log reference err_" in failed.response["error"]

    asyncio.run(scenario())


# ---------------------------------------------------------------- structure
# (the import graph's rules: tests/server/test_structure.py)

SERVER = Path(__file__).resolve().parents[2] / "audiocore_server"
PARTS = {
    f"live.{name}"
    for name in ("mic", "uplink", "line", "playout", "model_events", "sender", "conversation")
} | {"audio.voice"}


def test_no_test_imports_a_private_name_of_the_conversations_parts() -> None:
    private = []
    for path in (SERVER.parent / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "audiocore_server."
            ):
                module = node.module.split(".", 1)[1]
                if module in PARTS | {"live.connection"}:
                    private += [f"{path.name}: {a.name}" for a in node.names if a.name[0] == "_"]
    assert private == []
