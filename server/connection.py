"""One WebSocket ⇄ one ADK live run.

``LiveConnection`` owns everything per socket: the negotiated formats, the
audiocore converters, the ADK session and ``LiveRequestQueue``, the output
pacer and the turn translator. Concurrency is one task group per socket:

* receiver — client frames → decode → ``LiveRequestQueue``;
* pump     — ``runner.run_live`` events → chunks and audio → pacer; it reads
             events as they come so an ``interrupted`` is seen at once even
             while seconds of audio wait in the pacer;
* sender   — pacer → socket, audio at real-time pace.

Frames that are due the moment their audio arrives (a turn's first ones, up
to the lead) the pump sends itself, at once: woken through the event loop's
queue, the sender would run only after every other task already waiting in
it, and at a turn end every connection's pump has a burst of events queued
(at 100 sessions, 1 ms median and 8 ms p99 for exactly these frames). All
sends go through one lock, taken before an item leaves the pacer, so the
order on the wire is the pacer's whatever task sends. (A send suspends only
when the client's socket is backed up; the pump then waits with the sender,
at most ``send_timeout_s``, and the client hears nothing meanwhile anyway.)

When any of them ends (client gone, protocol error, model run over) the group
is cancelled; the queue is closed, run_live's generator is closed, and the
socket is closed with the matching code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import anyio
from google.adk.agents.live_request_queue import LiveRequestQueue
from google.genai import types
from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from . import protocol
from .audio import InputAudio, OutputAudio
from .events import ModelAudio, TurnTranslator
from .pacer import AudioFrame, OutputPacer
from .runtime import LEASE_WAIT_S, USER_ID, Runtime, session_history

log = logging.getLogger(__name__)

MODEL_AUDIO_MIME = "audio/pcm;rate={rate}"


class BoundedLiveRequestQueue(LiveRequestQueue):
    """ADK's queue (unbounded by design) with a bound the server enforces.

    Realtime audio is dropped rather than queued past ``max_pending``: audio
    that waits seconds for a stalled model is useless, and memory stays flat.
    """

    def __init__(self, max_pending: int) -> None:
        super().__init__()
        self.max_pending = max_pending
        self.dropped_chunks = 0

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    def has_room(self) -> bool:
        return self._queue.qsize() < self.max_pending

    def offer_realtime(self, blob: types.Blob) -> bool:
        if not self.has_room():
            self.dropped_chunks += 1
            return False
        self.send_realtime(blob)
        return True


class _Shutdown(Exception):
    """Why a connection ends. ``code`` None: the client is already gone."""

    def __init__(
        self, code: int | None = protocol.CLOSE_NORMAL, reason: str = "", error: str = ""
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.error = error  # sent as an `error` chunk before closing


def _client_gone() -> _Shutdown:
    return _Shutdown(code=None)


class LiveConnection:
    def __init__(self, websocket: WebSocket, runtime: Runtime) -> None:
        self.ws = websocket
        self.runtime = runtime
        settings = runtime.settings
        self.settings = settings
        self.limits = protocol.Limits(
            settings.max_message_bytes, settings.max_image_bytes, settings.max_text_chars
        )
        self.input_format = protocol.InputFormat()
        self.output_format = protocol.OutputFormat()
        self.turn_detection: protocol.TurnDetection = runtime.default_turn_detection
        self.session_id: str | None = None
        self.queue = BoundedLiveRequestQueue(settings.max_pending_requests)
        self.translator = TurnTranslator()
        self.pacer: OutputPacer | None = None
        self._send_lock = asyncio.Lock()  # acquiring a free one never suspends
        self._input_audio: InputAudio | None = None
        self._output_audio: OutputAudio | None = None
        self._input_overloaded = False
        self._tool_calls: dict[str, str] = {}  # long-running call id -> tool name
        self._flushed_at: float | None = None
        self.bargein_last_frame_s: list[float] = []  # flush → last frame sent, per barge-in
        # Server-added latency samples (seconds), only with settings.collect_timings:
        # client frame received → its audio handed to send_realtime, and model
        # audio event received → frame sent (beyond the intended pacing).
        self.latency_in: list[float] | None = [] if settings.collect_timings else None
        self.latency_out: list[float] | None = [] if settings.collect_timings else None
        self.close_code: int | None = None
        self._stop: _Shutdown | None = None
        self._scope: anyio.CancelScope | None = None
        self._finished = anyio.Event()
        self._requested_session: str | None = None
        self._sent_audio = False

    # ------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        await self.ws.accept()
        self.runtime.connections.add(self)
        try:
            try:
                first = await self._negotiate()
                await self._open_session()
                if self._stop is not None:  # told to yield while it was opening
                    raise self._stop
                async with anyio.create_task_group() as group:
                    self._scope = group.cancel_scope
                    for task in (self._receiver(first), self._pump(), self._sender()):
                        group.start_soon(self._guard, task, group.cancel_scope)
            except _Shutdown as exc:  # before the task group started
                self._stop = self._stop or exc
            finally:
                self.queue.close()
                self.runtime.connections.discard(self)
                if self.session_id and self.runtime.live.get(self.session_id) is self:
                    del self.runtime.live[self.session_id]
                self.runtime.record(self)
            await self._close(self._stop or _Shutdown())
        finally:
            # Only now may another process's connection read the session: this
            # run_live is over and the client was told. (Also when cancelled.)
            if self.session_id is not None:
                with anyio.CancelScope(shield=True):
                    await self.runtime.leases.release(self.session_id)
            self._finished.set()

    def yield_session(self) -> None:
        """Another connection resumes this session: stop (error chunk, 1008)."""
        self._stop = self._stop or _Shutdown(
            protocol.CLOSE_POLICY_VIOLATION,
            "session resumed by another connection",
            error="this session was resumed by another connection",
        )
        if self._scope is not None:
            self._scope.cancel()

    async def hand_over(self, timeout: float = 5.0) -> None:
        """Stop, and return once this run_live is over, so two runs never
        append to one session at once."""
        self.yield_session()
        with anyio.move_on_after(timeout):
            await self._finished.wait()

    async def _guard(self, coro: Any, scope: anyio.CancelScope) -> None:
        """Run one task; however it ends, record why and stop the others."""
        try:
            await coro
            stop = _Shutdown()
        except _Shutdown as exc:
            stop = exc
        except WebSocketDisconnect:
            stop = _client_gone()
        except protocol.ProtocolError as exc:
            stop = _Shutdown(exc.close_code, exc.reason)
        except Exception as exc:
            log.exception("connection %s failed", self.session_id)
            stop = _Shutdown(
                protocol.CLOSE_INTERNAL_ERROR,
                "internal error",
                error=f"the live session failed: {type(exc).__name__}: {exc}"[:500],
            )
        self._stop = self._stop or stop
        scope.cancel()

    async def _close(self, stop: _Shutdown) -> None:
        self.close_code = stop.code
        if stop.code is None or self.ws.application_state != WebSocketState.CONNECTED:
            return
        with contextlib.suppress(Exception):
            if stop.error:
                await self.ws.send_text(protocol.encode(protocol.error_chunk(stop.error)))
            await self.ws.close(stop.code, stop.reason[:120])

    async def _negotiate(self) -> Message | None:
        """Read the optional `start`. Returns the first message if it was not one."""
        message = None
        with anyio.move_on_after(self.settings.hello_timeout_s):
            message = await self.ws.receive()
        if message is None:
            return None
        if message["type"] == "websocket.disconnect":
            raise _client_gone()
        text = message.get("text")
        if text is not None:
            try:
                decoded = protocol.decode_text(text, self.input_format, self.limits)
            except protocol.ProtocolError as exc:
                raise _Shutdown(exc.close_code, exc.reason) from None
            except protocol.InputError:
                return message  # reported when processed
            if isinstance(decoded, protocol.Start):
                self.input_format = decoded.input
                self.output_format = decoded.output
                self.turn_detection = decoded.turn_detection or self.turn_detection
                self._requested_session = decoded.session_id
                return None
        return message

    async def _open_session(self) -> None:
        # One live run per session: a reconnecting client takes its session over
        # from a connection the server has not yet seen die.
        requested = self._requested_session
        previous = self.runtime.live.get(requested or "")
        if previous is not None:
            await previous.hand_over()
        leases = self.runtime.leases
        if requested is not None:
            # Another process may run it: ask it to let go, before reading it.
            if not await leases.acquire(requested, LEASE_WAIT_S):
                raise _Shutdown(
                    protocol.CLOSE_TRY_AGAIN_LATER,
                    "session is busy",
                    error="this session is still running elsewhere; try again later",
                )
            self.session_id = requested  # released in run()
        session, resumed, notice = await self.runtime.open_session(requested)
        if session.id != requested:
            if requested is not None:
                await leases.release(requested)
            await leases.acquire(session.id, LEASE_WAIT_S)  # a new id: nobody holds it
        self.session_id = session.id
        self.runtime.live[session.id] = self
        settings = self.settings
        self.pacer = OutputPacer(
            sample_rate=self.output_format.sample_rate,
            frame_ms=settings.output_frame_ms,
            lead_s=settings.output_lead_ms / 1000,
            max_audio_s=settings.max_buffered_output_s,
            max_messages=settings.max_pending_messages,
        )
        await self.ws.send_text(
            protocol.encode(
                protocol.session_chunk(
                    session.id,
                    self.input_format,
                    self.output_format,
                    model=self.runtime.model_name,
                    resumed=resumed,
                    history=session_history(session) if resumed else [],
                    turn_detection=self.turn_detection,
                )
            )
        )
        if notice:
            await self.ws.send_text(protocol.encode(protocol.error_chunk(notice)))

    # ------------------------------------------------------------ receiver
    async def _receiver(self, first: Message | None) -> None:
        if first is not None:
            await self._handle(first)
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                raise _client_gone()
            await self._handle(message)

    async def _handle(self, message: Message) -> None:
        received = time.monotonic()
        try:
            data = message.get("bytes")
            if data is not None:
                self._on_audio(protocol.decode_binary(data, self.input_format, self.limits))
                if self.latency_in is not None and self._sent_audio:
                    self.latency_in.append(time.monotonic() - received)
            else:
                text = message.get("text") or ""
                self._dispatch(protocol.decode_text(text, self.input_format, self.limits))
        except protocol.InputError as exc:
            self._report(str(exc))

    def _report(self, text: str) -> None:
        assert self.pacer is not None
        if not self.pacer.put_message_nowait(protocol.error_chunk(text)):
            raise protocol.ProtocolError(
                protocol.CLOSE_POLICY_VIOLATION, "client is not reading its messages"
            )

    def _dispatch(self, msg: protocol.ClientMessage) -> None:
        q = self.queue
        if isinstance(msg, protocol.Audio):
            self._on_audio(msg)
        elif isinstance(msg, protocol.Interrupt):
            self._barge_in("client")
        elif isinstance(msg, protocol.Start):
            raise protocol.InputError("start: only allowed as the first message")
        elif not q.has_room():
            raise protocol.InputError("the model is not keeping up; message dropped, retry later")
        elif isinstance(msg, protocol.Text):
            q.send_content(types.Content(role="user", parts=[types.Part(text=msg.text)]))
        elif isinstance(msg, protocol.ActivityStart):
            # The turn holds exactly the audio sent after this: flush what the
            # converter still holds from before.
            self._send_audio_chunks(self._ensure_input_audio().flush())
            q.send_activity_start()
        elif isinstance(msg, protocol.ActivityEnd):
            self._send_audio_chunks(self._ensure_input_audio().flush())
            q.send_activity_end()
        elif isinstance(msg, protocol.Image):
            q.send_realtime(types.Blob(mime_type=msg.media_type, data=msg.data))
        elif isinstance(msg, protocol.ToolResult):
            name = self._tool_calls.pop(msg.tool_call_id, None)
            if name is None:
                raise protocol.InputError(f"tool_result: no pending tool call {msg.tool_call_id!r}")
            output = msg.output if isinstance(msg.output, dict) else {"result": msg.output}
            response = types.FunctionResponse(id=msg.tool_call_id, name=name, response=output)
            q.send_content(
                types.Content(role="user", parts=[types.Part(function_response=response)])
            )
        elif isinstance(msg, protocol.ToolApproval):
            # ADK live cannot approve tools (require_confirmation never runs in
            # live mode); this agent has none that need approval.
            raise protocol.InputError(f"tool_approval: no pending approval {msg.approval_id!r}")

    def _ensure_input_audio(self) -> InputAudio:
        if self._input_audio is None:
            self._input_audio = InputAudio(
                self.input_format,
                out_rate=self.settings.model_input_rate,
                chunk_ms=self.settings.input_chunk_ms,
            )
        return self._input_audio

    def _on_audio(self, audio: protocol.Audio) -> None:
        self._send_audio_chunks(self._ensure_input_audio().process(audio.data))

    def _send_audio_chunks(self, chunks: list[bytes]) -> None:
        mime = MODEL_AUDIO_MIME.format(rate=self.settings.model_input_rate)
        self._sent_audio = bool(chunks)
        for chunk in chunks:
            if self.queue.offer_realtime(types.Blob(mime_type=mime, data=chunk)):
                self._input_overloaded = False
            elif not self._input_overloaded:
                self._input_overloaded = True  # one error per overload episode
                self._report("the model is not keeping up; input audio is being dropped")

    # ------------------------------------------------------------ barge-in
    def _barge_in(self, source: str) -> None:
        assert self.pacer is not None
        dropped_ms = round(self.pacer.buffered_seconds * 1000)
        self.pacer.flush(protocol.interrupted_chunk(source, dropped_ms))
        self._flushed_at = time.monotonic()
        if self._output_audio is not None:
            self._output_audio.end_turn(discard=True)

    # ------------------------------------------------------------ pump
    async def _pump(self) -> None:
        assert self.session_id is not None and self.pacer is not None
        events = self.runtime.runner.run_live(
            user_id=USER_ID,
            session_id=self.session_id,
            live_request_queue=self.queue,
            run_config=self.runtime.run_config_for(self.turn_detection),
        )
        async with contextlib.aclosing(events):
            async for event in events:
                await self._on_event(event)
                await self._send_due()
                # ADK hands over a burst of ready events without suspending;
                # let the sender run between them so due frames leave on time.
                await asyncio.sleep(0)

    async def _on_event(self, event: Any) -> None:
        received = time.monotonic()
        pacer = self.pacer
        assert pacer is not None
        if event.interrupted:
            self._barge_in("model")
        for call in event.get_function_calls():
            if event.long_running_tool_ids and call.id in event.long_running_tool_ids:
                self._tool_calls[call.id] = call.name
        turn = self.translator.turn  # the pacer rejects late audio of a flushed turn
        for item in self.translator.translate(event):
            if isinstance(item, ModelAudio):
                pcm = self._out_audio().process(item.pcm, item.sample_rate)
                await pacer.put_audio(pcm, received, turn)
                continue
            if item["type"] == "finish":
                await pacer.put_audio(self._out_audio().end_turn(), received, turn)
                pacer.end_turn()
                turn += 1
            await pacer.put_message(item)

    def _out_audio(self) -> OutputAudio:
        if self._output_audio is None:
            self._output_audio = OutputAudio(self.output_format.sample_rate)
        return self._output_audio

    # ------------------------------------------------------------ sender
    async def _sender(self) -> None:
        pacer = self.pacer
        assert pacer is not None
        while True:
            await pacer.wait_due()
            async with self._send_lock:
                item = pacer.get_nowait()  # None if the pump sent it meanwhile
                if item is not None:
                    await self._send(item)

    async def _send_due(self) -> None:
        """From the pump: send what is due now, unless a send is under way."""
        pacer = self.pacer
        assert pacer is not None
        if self._send_lock.locked():
            return  # the sender is sending; it takes the rest in order
        async with self._send_lock:
            while (item := pacer.get_nowait()) is not None:
                await self._send(item)

    async def _send(self, item: AudioFrame | dict[str, Any]) -> None:
        popped_at = time.monotonic()
        pacer = self.pacer
        assert pacer is not None
        ws = self.ws
        with anyio.move_on_after(self.settings.send_timeout_s) as deadline:
            if isinstance(item, AudioFrame):
                if self.output_format.binary:
                    await ws.send_bytes(item.pcm)
                else:
                    chunk = protocol.pcm_chunk(item.pcm, self.output_format.sample_rate)
                    await ws.send_text(protocol.encode(chunk))
            else:
                await ws.send_text(protocol.encode(item))
        if deadline.cancelled_caught:
            raise protocol.ProtocolError(
                protocol.CLOSE_POLICY_VIOLATION, "client is not reading (send timed out)"
            )
        if self.latency_out is not None and isinstance(item, AudioFrame):
            # Paced frames may leave up to the timer slack early: count 0.
            self.latency_out.append(max(0.0, time.monotonic() - pacer.last_due))
        flushed_at = self._flushed_at
        if flushed_at is not None and (
            isinstance(item, AudioFrame) or item.get("type") == "data-interrupted"
        ):
            # Barge-in: how long after the flush the last stale frame left
            # (0 when none was on its way out).
            stale = isinstance(item, AudioFrame) and popped_at < flushed_at
            self.bargein_last_frame_s.append(time.monotonic() - flushed_at if stale else 0.0)
            self._flushed_at = None
