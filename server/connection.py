"""One WebSocket ⇄ one ADK live run: the data path.

``LiveConnection`` owns everything per socket: the negotiated formats, the
audiocore converters, the ``LiveRequestQueue``, the output pacer and the turn
translator. Its session is opened and claimed through the runtime
(``Runtime.open_session``); concurrency is one task group per socket:

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
socket is closed with the matching code before the session's claim is let go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc
import numpy as np
from google.adk.agents.live_request_queue import LiveRequest
from google.adk.agents.run_config import RunConfig
from google.adk.events import Event
from google.genai import types
from starlette.types import Message
from starlette.websockets import (
    WebSocket,
    WebSocketDisconnect,
    WebSocketDisconnected,
    WebSocketState,
)

from . import protocol
from .audio import InputAudio, OutputAudio
from .claims import SessionBusy
from .delegation import SessionDelegations
from .delivery import TaskDelivery
from .dialects import Dialect
from .events import ModelAudio, TurnEnd
from .gemini_model import describe_model_failure
from .live_queue import BoundedLiveRequestQueue
from .metrics import ConnectionMetrics
from .pacer import AudioFrame, OutputPacer
from .runtime import USER_ID, OpenedSession, Runtime, SessionNotFound, session_history
from .tasks import OWNER_STATE_KEY, TaskRecord, session_owner
from .wire import Wire

log = logging.getLogger(__name__)

MODEL_AUDIO_MIME = "audio/pcm;rate={rate}"
_TASK_CARDS = 10  # the owner's latest tasks shown to a new connection
# The user is speaking: 16 kHz input louder than -40 dBFS RMS (the offline
# model's threshold), and for this long after (a pause between words).
_VOICE_RMS = 32768 * 10 ** (-40 / 20)
_VOICE_POWER = _VOICE_RMS * _VOICE_RMS
_VOICE_HANGOVER_S = 0.8


def _answering(event: Event) -> bool:
    """Whether the model is in the middle of an answer after ``event``: it
    said something and has neither ended its turn nor called a tool (then
    it waits for the tool's answer, which may take the user a while)."""
    if event.author == "user" or event.turn_complete or event.interrupted:
        return False
    if event.get_function_calls() or event.get_function_responses():
        return False
    return event.content is not None or event.output_transcription is not None


def _voiced(pcm: bytes) -> bool:
    """Whether a chunk's RMS reaches the voice threshold. Runs on every input
    chunk: one dot product (sum of squares ≥ threshold² · n), 1.7 µs a
    20 ms chunk where numpy's mean and sqrt took 5.6."""
    samples = np.frombuffer(pcm, "<i2", count=len(pcm) // 2).astype(np.float32)
    return samples.size > 0 and float(samples @ samples) >= _VOICE_POWER * samples.size


class _Shutdown(Exception):
    """Why a connection ends. ``code`` None: the client is already gone."""

    def __init__(
        self,
        code: int | None = protocol.CLOSE_NORMAL,
        reason: str = "",
        error: str = "",
        *,
        unsendable: bool = False,
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.error = error  # sent as an `error` chunk before closing
        # The socket's buffers are full: a close frame would wait behind
        # them for as long as the client does not read (for ever).
        self.unsendable = unsendable


def _internal_error(session_id: str | None, error: BaseException | None = None) -> _Shutdown:
    """Log the exception (``error``, or the one being handled) under a fresh
    reference; the client gets the reference, never the exception's text."""
    ref = protocol.new_id("err")
    error = error or sys.exc_info()[1]
    assert error is not None
    log.error(
        "connection failed (session %s, ref %s)",
        session_id,
        ref,
        exc_info=(type(error), error, error.__traceback__),
    )
    # The class only: an exception's text may hold anything. A model
    # service's refusal says what to fix (a bad key, an unknown model).
    what = describe_model_failure(error) or f"the live session failed: {type(error).__name__}"
    return _Shutdown(
        protocol.CLOSE_INTERNAL_ERROR,
        "internal error",
        error=f"{what} (server log reference {ref})",
    )


_SESSION_TAKEN = _Shutdown(
    protocol.CLOSE_POLICY_VIOLATION,
    "session resumed by another connection",
    error="this session was resumed by another connection",
)
# ADK's /run_live closes so for a session the client did not create first.
_SESSION_NOT_FOUND = _Shutdown(protocol.CLOSE_PROTOCOL_ERROR, "Session not found")
_SESSION_BUSY = _Shutdown(
    protocol.CLOSE_TRY_AGAIN_LATER,
    "session is busy",
    error="this session is still running elsewhere; try again later",
)


class LiveConnection:
    def __init__(self, websocket: WebSocket, runtime: Runtime, dialect: Dialect) -> None:
        self.ws = websocket
        self.runtime = runtime
        self.dialect = dialect
        self.name = protocol.new_id("conn")  # in the log
        settings = runtime.settings
        self.settings = settings
        self.limits = protocol.Limits(
            settings.max_message_bytes, settings.max_image_bytes, settings.max_text_chars
        )
        self.input_format = protocol.InputFormat()
        self.output_format = protocol.OutputFormat()
        self.wire: Wire = dialect.wire(self.output_format)
        self.turn_detection: protocol.TurnDetection = runtime.default_turn_detection
        self.run_config: RunConfig | None = None
        self.user_id = USER_ID
        # Gemini closes the live session (1007) on activity signals while its
        # own voice activity detection is on; the offline model takes them.
        self._signals_need_manual = settings.backend != "offline"
        self.session_id: str | None = None
        self.queue = BoundedLiveRequestQueue(settings.max_pending_requests)
        self.queue.watch_consumer(self._model_side_failed)
        self.translator = dialect.translator(runtime)
        self.delegations: SessionDelegations | None = None
        self.pacer: OutputPacer | None = None
        self.metrics = ConnectionMetrics(collect_timings=settings.collect_timings)
        self.close_code: int | None = None
        self._send_lock = asyncio.Lock()  # acquiring a free one never suspends
        self._input_audio: InputAudio | None = None
        self._input_mime = MODEL_AUDIO_MIME.format(rate=settings.model_input_rate)
        self._output_audio: OutputAudio | None = None
        self._input_overloaded = False
        self._content_overloaded = False
        self._flushed_at: float | None = None
        self._sent_audio = False
        self._stop: _Shutdown | None = None
        self._close_tried = False
        self._scope: anyio.CancelScope | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._user_key: str | None = None
        self.delivery: TaskDelivery | None = None
        # Is the line free (for a task's outcome)? The user's voice until
        # then (monotonic); push-to-talk held; a user turn not yet answered.
        self._voice_until = 0.0
        self._talking = False
        self._awaiting_answer = False
        self._model_answering = False  # the stall timer runs (see _next_event)

    # ------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Serve the accepted socket until either side ends the conversation."""
        try:
            opening = await self.dialect.open(self.ws, self.settings.hello_timeout_s, self.limits)
            self.input_format = opening.start.input
            self.output_format = opening.start.output
            self.wire = self.dialect.wire(self.output_format)
            self.turn_detection = opening.start.turn_detection or self.turn_detection
            self.run_config = opening.run_config
            self.user_id = opening.user_id
            self._user_key = opening.start.user_key
            async with self.runtime.open_session(
                opening.start.session_id,
                self._session_taken,
                user_id=opening.user_id,
                create_missing=opening.create_missing,
            ) as opened:
                await self._converse(opened, opening.first)
                # Still claimed: the client is told before anyone else may
                # read the session.
                await self._close()
        except SessionBusy:
            self._stop = self._stop or _SESSION_BUSY
        except SessionNotFound:
            self._stop = self._stop or _SESSION_NOT_FOUND
        except WebSocketDisconnect:
            self._stop = self._stop or _Shutdown(code=None)
        except protocol.ProtocolError as exc:
            self._stop = self._stop or _Shutdown(exc.close_code, exc.reason)
        except Exception:  # e.g. the session store failed: say so, then close
            self._stop = self._stop or _internal_error(self.session_id)
        finally:
            self.queue.close()
            self._fold_metrics()
        await self._close()

    async def _converse(self, opened: OpenedSession, first: Message | None) -> None:
        session = opened.session
        self.session_id = session.id
        if self._stop is not None:  # taken over while it was opening
            return
        settings = self.settings
        self.pacer = OutputPacer(
            sample_rate=self.output_format.sample_rate,
            frame_ms=settings.output_frame_ms,
            lead_s=settings.output_lead_ms / 1000,
            max_audio_s=settings.max_buffered_output_s,
            max_messages=settings.max_pending_messages,
        )
        if self.wire.sends_session:
            await self._send_chunk(
                protocol.session_chunk(
                    session.id,
                    self.input_format,
                    self.output_format,
                    model=self.runtime.model_name,
                    resumed=opened.resumed,
                    history=session_history(session) if opened.resumed else [],
                    turn_detection=self.turn_detection,
                    tools=[spec.describe() for spec in self.runtime.tools.values()],
                )
            )
        if opened.notice:
            await self._send_chunk(protocol.error_chunk(opened.notice))
        # Tool calls still waiting for this session's client are asked again.
        self.delegations = self.runtime.delegations.for_session(session.id)
        message_id, replay = self.delegations.attach(self)
        if replay:
            self.tell_client([*self.translator.begin(message_id), *replay])
        # Background tasks: the owner's cards, and their outcomes told here.
        owner = self._task_owner(session.id)
        if self._user_key is not None and session.state.get(OWNER_STATE_KEY) != owner:
            # The tools read it from the session (without: the session's own).
            self.queue.send(LiveRequest(state_delta={OWNER_STATE_KEY: owner}))
        tasks = self.runtime.tasks
        for record in (await tasks.tasks(owner))[-_TASK_CARDS:]:
            self._tell(protocol.task_chunk(record.chunk()))
        self.delivery = TaskDelivery(
            tasks,
            owner,
            self.name,
            line_free_at=self._line_free_at,
            playback_ends_at=lambda: self.pacer.playback_ends_at if self.pacer else 0.0,
            hand_to_model=self._hand_to_model,
        )
        unsubscribe = tasks.subscribe(owner, self._task_changed)
        try:
            async with anyio.create_task_group() as group:
                self._scope = group.cancel_scope
                self._group = group
                for task in (
                    self._receiver(first),
                    self._pump(),
                    self._sender(),
                    self.delivery.run(),
                ):
                    group.start_soon(self._guard, task, group.cancel_scope)
        finally:
            unsubscribe()
            await self.delivery.close()
            self.delegations.detach(self)

    def _task_owner(self, session_id: str) -> str:
        """Whose background tasks this connection sees: the user's, named by
        the client's key, or else the session's own."""
        if self._user_key is not None:
            return f"key:{self._user_key}"
        return session_owner(self.user_id, session_id)

    def _task_changed(self, record: TaskRecord) -> None:
        self.tell_client([protocol.task_chunk(record.chunk())])
        if self.delivery is not None:
            self.delivery.wake()

    def _model_side_failed(self, error: BaseException) -> None:
        """ADK's task sending to the model died: the run cannot go on."""
        self._stop = self._stop or _internal_error(self.session_id, error)
        if self._scope is not None:
            self._scope.cancel()

    def _session_taken(self) -> None:
        """Another connection resumes this session: stop (error chunk, 1008)."""
        self._stop = self._stop or _SESSION_TAKEN
        if self._scope is not None:
            self._scope.cancel()

    async def _guard(self, task: Awaitable[None], scope: anyio.CancelScope) -> None:
        """Run one task; however it ends, record why and stop the others."""
        try:
            await task
            stop = _Shutdown()
        except _Shutdown as exc:
            stop = exc
        except (WebSocketDisconnect, WebSocketDisconnected):
            # The second: a send after the first one found the peer gone.
            stop = _Shutdown(code=None)
        except protocol.ProtocolError as exc:
            stop = _Shutdown(exc.close_code, exc.reason)
        except Exception:
            if self._stop is not None:
                # Already ending, and logged: this is the same failure
                # reaching another task (the model's sender, then the pump).
                log.debug("connection %s: a task failed while ending", self.name, exc_info=True)
                scope.cancel()
                return
            stop = _internal_error(self.session_id)
        self._stop = self._stop or stop
        scope.cancel()

    async def _close(self) -> None:
        stop = self._stop or _Shutdown()
        self.close_code = stop.code
        if self._close_tried or stop.code is None:
            return
        self._close_tried = True
        if self.ws.application_state != WebSocketState.CONNECTED:
            return
        if stop.code != protocol.CLOSE_NORMAL:  # an operator asks why clients were dropped
            log.info("connection %s: closing with %d (%s)", self.name, stop.code, stop.reason)
        if stop.unsendable:
            return  # the server drops the TCP connection once this returns
        # A client that stops reading just now must not hold the close either.
        with anyio.move_on_after(self.settings.send_timeout_s), contextlib.suppress(Exception):
            if stop.error:
                await self.ws.send_text(protocol.encode(protocol.error_chunk(stop.error)))
            await self.ws.close(stop.code, stop.reason[:120])

    def _fold_metrics(self) -> None:
        metrics = self.metrics
        metrics.dropped_input_chunks = self.queue.dropped_chunks
        if self.pacer is not None:
            metrics.frames_sent = self.pacer.stats.frames
            metrics.late_frames = self.pacer.stats.late_frames
            metrics.concealed_frames = self.pacer.stats.concealed_frames

    # ------------------------------------------------------------ receiver
    async def _receiver(self, first: Message | None) -> None:
        if first is not None:
            await self._handle(first)
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                raise _Shutdown(code=None)
            await self._handle(message)

    async def _handle(self, message: Message) -> None:
        received = time.monotonic()
        try:
            for msg in self.dialect.decode(message, self.input_format, self.limits):
                self._dispatch(msg)
                if isinstance(msg, protocol.Audio) and self._sent_audio:
                    self.metrics.input_latency(time.monotonic() - received)
        except protocol.InputError as exc:
            self._report(str(exc))

    def _report(self, text: str) -> None:
        self._tell(protocol.error_chunk(text))

    def _tell(self, chunk: dict[str, Any]) -> None:
        """Queue a chunk for the client behind what is queued."""
        assert self.pacer is not None
        if not self.pacer.put_message_nowait(chunk):
            raise protocol.ProtocolError(
                protocol.CLOSE_POLICY_VIOLATION, "client is not reading its messages"
            )

    def _dispatch(self, msg: protocol.ClientMessage) -> None:
        q = self.queue
        assert self.delegations is not None
        if isinstance(msg, protocol.Audio):
            self._on_audio(msg)
        elif isinstance(msg, protocol.Interrupt):
            self._barge_in("client")
        elif isinstance(msg, protocol.Ping):
            self._tell(protocol.pong_chunk(msg.timestamp))
        elif isinstance(msg, protocol.Start):
            raise protocol.InputError("start: only allowed as the first message")
        elif isinstance(msg, (protocol.ToolApproval, protocol.ToolResult)):
            self.delegations.answer([msg])
        elif isinstance(msg, protocol.ToolResponse):
            self.delegations.answer_function_response(msg.tool_call_id, msg.response)
        elif isinstance(msg, protocol.TaskCancel):
            assert self._group is not None
            self._group.start_soon(self._cancel_task, msg.task_id)
        elif isinstance(msg, protocol.ChatSubmit):
            self.delegations.answer(msg.answers)
            if msg.text is not None or msg.images:
                self._user_turn(msg.text, msg.images)
        elif (
            isinstance(msg, (protocol.ActivityStart, protocol.ActivityEnd))
            and self._signals_need_manual
            and self.turn_detection != "manual"
        ):
            edge = "activity_start" if isinstance(msg, protocol.ActivityStart) else "activity_end"
            raise protocol.InputError(
                f'{edge}: this model takes turn edges only with turnDetection "manual"'
            )
        # Turn edges pass the queue's bound (a few bytes each): dropped, they
        # would leave the turn open for good, and no client retries them.
        elif isinstance(msg, protocol.ActivityStart):
            # The turn holds exactly the audio sent after this: flush what the
            # converter still holds from before.
            self._send_audio_chunks(self._flush_input_audio())
            q.send_activity_start()
            self._talking = True
        elif isinstance(msg, protocol.ActivityEnd):
            self._send_audio_chunks(self._flush_input_audio())
            q.send_activity_end()
            self._talking = False
            self._awaiting_answer = True
        elif isinstance(msg, protocol.AudioControl):
            if msg.action == "stop":  # the microphone is off: end what was said
                self._send_audio_chunks(self._flush_input_audio())
                q.send_audio_stream_end()
        elif isinstance(msg, protocol.Close):
            # The run ends once the model's connection closes; then this one.
            self._send_audio_chunks(self._flush_input_audio())
            q.close()
        elif isinstance(msg, protocol.Text):
            self._user_turn(msg.text, ())
        elif isinstance(msg, protocol.Image):
            self._user_turn(None, (msg,))
        elif isinstance(msg, protocol.UserContent):
            self._offer(LiveRequest(content=msg.content, state_delta=msg.state_delta))

    def _user_turn(self, text: str | None, images: Sequence[protocol.Image]) -> None:
        for image in images:
            self._offer(LiveRequest(blob=types.Blob(mime_type=image.media_type, data=image.data)))
        if text is not None:
            content = types.Content(role="user", parts=[types.Part(text=text)])
            if self._offer(LiveRequest(content=content)):
                self._awaiting_answer = True

    def _offer(self, request: LiveRequest) -> bool:
        """Queue a typed turn, an image, content; past the bound, dropped, with
        one error per overload episode (not one per message)."""
        if self.queue.offer_content(request):
            self._content_overloaded = False
            return True
        if not self._content_overloaded:
            self._content_overloaded = True
            self._report("the model is not keeping up; messages are dropped until it catches up")
        return False

    async def _cancel_task(self, task_id: str | None) -> None:
        """The client's cancel button: confirmed when the task says so (its
        card); a task that is not there gets an error."""
        owner = self.delivery.owner if self.delivery else ""
        if await self.runtime.tasks.cancel(owner, task_id) is None:
            self._report(f"task_cancel: no task {task_id!r}" if task_id else "task_cancel: no task")

    # ------------------------------------------------------------ background tasks
    def _line_free_at(self) -> float | None:
        """When the line is free for a task's outcome: None while the user
        holds push-to-talk, a turn is on its way or being answered, or a
        tool call waits for the user; else once the user's voice and the
        answer's audio have ended."""
        assert self.pacer is not None and self.delegations is not None
        if self._talking or self._awaiting_answer or self.delegations.pending:
            return None
        if getattr(self.translator, "in_turn", False):
            return None
        return max(self._voice_until, self.pacer.playback_ends_at)

    def _hand_to_model(self, text: str) -> None:
        # Past the queue's bound: the outcome is waited for, not realtime input.
        content = types.Content(role="user", parts=[types.Part(text=text)])
        self.queue.send(LiveRequest(content=content))
        self._awaiting_answer = True

    # ------------------------------------------------------------ delegated tools
    # (server/delegation.py's DelegationSink)
    def tell_client(self, chunks: Sequence[dict[str, Any]]) -> None:
        try:
            for chunk in chunks:
                self._tell(chunk)
        except protocol.ProtocolError:
            # Called from a timer too: the sender's timeout ends this connection.
            log.warning("connection %s: tool chunks dropped, client not reading", self.name)

    def tell_model(self, response: types.FunctionResponse, state_delta: dict[str, Any]) -> None:
        # Not subject to the queue's bound: the model waits for this answer.
        content = types.Content(role="user", parts=[types.Part(function_response=response)])
        self.queue.send(LiveRequest(content=content, state_delta=state_delta or None))
        if self.delivery is not None:
            self.delivery.wake()  # a call less may free the line

    async def session_state(self) -> Mapping[str, Any]:
        assert self.session_id is not None
        session = await self.runtime.session_service.get_session(
            app_name=self.settings.app_name, user_id=self.user_id, session_id=self.session_id
        )
        return session.state if session is not None else {}

    def _on_audio(self, audio: protocol.Audio) -> None:
        converter = self._input_audio
        if converter is None or converter.format != audio.format:
            # The first audio, or a client that changed its rate (ADK's
            # blobs say theirs each time): finish the old stream first.
            tail = converter.flush() if converter is not None else []
            converter = self._input_audio = InputAudio(
                audio.format,
                out_rate=self.settings.model_input_rate,
                chunk_ms=self.settings.model_input_chunk_ms,
            )
            self._send_audio_chunks(tail)
        self._send_audio_chunks(converter.process(audio.data))

    def _flush_input_audio(self) -> list[bytes]:
        return self._input_audio.flush() if self._input_audio is not None else []

    def _send_audio_chunks(self, chunks: list[bytes]) -> None:
        mime = self._input_mime
        self._sent_audio = bool(chunks)
        if chunks and _voiced(chunks[-1]):
            self._voice_until = time.monotonic() + _VOICE_HANGOVER_S
        for chunk in chunks:
            # Built without pydantic's validation (2.1 µs instead of 3.5, at
            # 50 chunks a second): the fields are our own bytes and string.
            if self.queue.offer_realtime(types.Blob.model_construct(mime_type=mime, data=chunk)):
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
        if self.delivery is not None:
            self.delivery.interrupted()
        if self.delegations is not None:
            self.delegations.cancel_all(
                f"interrupted by the {'user' if source == 'client' else 'model'}"
            )

    # ------------------------------------------------------------ pump
    async def _pump(self) -> None:
        assert self.session_id is not None
        events = self.runtime.runner.run_live(
            user_id=self.user_id,
            session_id=self.session_id,
            live_request_queue=self.queue,
            run_config=self.run_config or self.runtime.run_config_for(self.turn_detection),
        )
        self.runtime.live_runs += 1
        try:
            async with contextlib.aclosing(events):
                while (event := await self._next_event(events)) is not None:
                    self._model_answering = _answering(event)
                    await self._on_event(event)
                    await self._send_due()
                    # ADK hands over a burst of ready events without suspending;
                    # let the sender run between them so due frames leave on time.
                    await asyncio.sleep(0)
        finally:
            self.runtime.live_runs -= 1

    async def _next_event(self, events: AsyncIterator[Event]) -> Event | None:
        """The run's next event (None: the run is over). While the model is
        answering, a silence of ``model_stall_timeout_s`` is a stalled model:
        the user would wait for the rest of the answer for ever."""
        if not self._model_answering:
            return await anext(events, None)
        timeout = self.settings.model_stall_timeout_s
        # asyncio's own timeout, not anyio's scope: this runs once per model
        # event, and anyio's scope costs several times more to enter and leave.
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await anext(events, None)
        except TimeoutError:
            if not deadline.expired():
                raise  # the model's own error, not our deadline
        log.warning(
            "connection %s: the model stopped mid-answer for %g s (session %s)",
            self.name,
            timeout,
            self.session_id,
        )
        raise _Shutdown(
            protocol.CLOSE_INTERNAL_ERROR,
            "the model stalled",
            error=f"the model stopped answering for {timeout:g} s; reconnect to go on",
        )

    async def _on_event(self, event: Event) -> None:
        received = time.monotonic()
        pacer = self.pacer
        assert pacer is not None
        if event.interrupted:
            self._barge_in("model")
        turn = self.translator.turn  # the pacer rejects late audio of a flushed turn
        for item in self.translator.translate(event):
            if isinstance(item, ModelAudio):
                pcm = self._out_audio().process(item.pcm, item.sample_rate)
                await pacer.put_audio(pcm, received, turn)
            elif isinstance(item, TurnEnd):
                await pacer.put_audio(self._out_audio().end_turn(), received, turn)
                pacer.end_turn()
                turn += 1
                self._awaiting_answer = False
                if self.delivery is not None:
                    self.delivery.turn_ended()
            else:
                await pacer.put_message(item)
        for chunk in self._delegate_calls(event):
            await pacer.put_message(chunk)

    def _delegate_calls(self, event: Event) -> list[dict[str, Any]]:
        """Hand the event's delegated tool calls to the session's delegations;
        returns what asks the client about them, ending their step and the
        client's stream."""
        assert self.delegations is not None
        chunks: list[dict[str, Any]] = []
        long_running = event.long_running_tool_ids or set()
        delegated = False
        for call in event.get_function_calls():
            spec = self.runtime.tools.get(call.name or "")
            if spec is not None and spec.delegated and call.id in long_running:
                delegated = True
                chunks += self.delegations.add(
                    call.id or "", spec, dict(call.args or {}), self.translator.message_id
                )
        if delegated:
            chunks += [*self.translator.end_step(), protocol.END_OF_STREAM]
        return chunks

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

    async def _send_chunk(self, chunk: dict[str, Any]) -> None:
        """Send a chunk now, outside the pacer (before the conversation starts)."""
        for frame in self.wire.chunk_frames(chunk):
            await self.ws.send_text(frame)

    async def _send(self, item: AudioFrame | dict[str, Any]) -> None:
        popped_at = time.monotonic()
        pacer = self.pacer
        assert pacer is not None
        ws = self.ws
        deadline = asyncio.timeout(self.settings.send_timeout_s)
        try:
            # asyncio's timeout (see _next_event): once per frame sent.
            async with deadline:
                if isinstance(item, AudioFrame):
                    frame = self.wire.audio_frame(item.pcm, self.output_format.sample_rate)
                    if isinstance(frame, bytes):
                        await ws.send_bytes(frame)
                    else:
                        await ws.send_text(frame)
                else:
                    for text in self.wire.chunk_frames(item):
                        await ws.send_text(text)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise _Shutdown(
                protocol.CLOSE_POLICY_VIOLATION,
                "client is not reading (send timed out)",
                unsendable=True,
            ) from None
        if isinstance(item, AudioFrame):
            # Paced frames may leave up to the timer slack early: count 0.
            self.metrics.output_latency(max(0.0, time.monotonic() - pacer.last_due))
        flushed_at = self._flushed_at
        if flushed_at is not None and (
            isinstance(item, AudioFrame) or item.get("type") == "data-interrupted"
        ):
            # Barge-in: how long after the flush the last stale frame left
            # (0 when none was on its way out).
            stale = isinstance(item, AudioFrame) and popped_at < flushed_at
            self.metrics.bargein_last_frame_s.append(
                time.monotonic() - flushed_at if stale else 0.0
            )
            self._flushed_at = None
