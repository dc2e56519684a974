"""One WebSocket ⇄ one ADK live run: the shell around the data path.

``LiveConnection`` opens the conversation (the dialect's opening, the
claimed session), builds the parts of one conversation, runs them in one
task group, dispatches the client's messages to them, and closes the socket
with the code of whatever ended it:

* ``audiocore_server/live/mic.py`` — the microphone's audio to the model's queue;
* ``audiocore_server/live/uplink.py`` — everything else to the model: turns, edges, answers;
* ``audiocore_server/live/line.py`` — when the line is free for a task's outcome;
* ``audiocore_server/live/playout.py`` — the model's events to the pacer, and barge-in;
* ``audiocore_server/live/model_events.py`` — the run's events, with the stall watchdog;
* ``audiocore_server/live/sender.py`` — the pacer to the socket at real-time pace;
* ``audiocore_server/live/dispatch.py`` — each client message to the part it is for;
* ``audiocore_server/tools/delegation.py``, ``audiocore_server/live/outcomes.py`` —
  delegated tool calls, and background tasks' outcomes told at a safe moment.

Tasks of the group: the receiver (client frames → dispatch), the pump (model
events → playout, then what is due at once → the socket), the sender, and
the delivery. When any of them ends (client gone, protocol error, model run
over) the group is cancelled; the queue is closed, run_live's generator is
closed, and the socket is closed with the matching code before the
session's claim is let go.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable

import anyio
import anyio.abc
from google.adk.agents.run_config import RunConfig
from opentelemetry import context as otel_context
from starlette.types import Message
from starlette.websockets import (
    WebSocket,
    WebSocketDisconnect,
    WebSocketDisconnected,
    WebSocketState,
)

from ..agent.runners import AppRunners
from ..models import model_link, played_audio
from ..ops.metrics import ConnectionMetrics
from ..storage.claims import SessionBusy
from ..storage.session_access import OpenedSession, SessionNotFound
from ..wire import chunks, fields, large_json, protocol
from .conversation import Conversation, LiveParts, assemble, welcome
from .dialects import Dialect
from .dispatch import Dispatch, Dispatcher
from .model_events import ModelEvents
from .opening import Opening
from .request_queue import BoundedLiveRequestQueue
from .shutdown import (
    Shutdown,
    app_to_serve,
    client_gone,
    internal_error,
    session_busy,
    session_not_found,
    session_taken,
)

log = logging.getLogger(__name__)

_YIELD_EVERY = 64  # client messages handled in a row, at most


class LiveConnection:
    def __init__(self, websocket: WebSocket, parts: LiveParts, dialect: Dialect) -> None:
        self.ws = websocket
        self.parts = parts
        self.dialect = dialect
        self.name = chunks.new_id("conn")  # in the log
        settings = self.settings = parts.settings
        self.limits = fields.Limits(
            settings.max_message_bytes, settings.max_image_bytes, settings.max_text_chars
        )
        self.input_format = protocol.InputFormat()
        self.queue = BoundedLiveRequestQueue(settings.max_pending_requests)
        self.queue.watch_consumer(self._model_side_failed)
        self.app: AppRunners | None = None  # the app the client selected, once it has
        self.metrics = ConnectionMetrics(collect_timings=settings.collect_timings)
        self._address = websocket.client.host if websocket.client else ""
        self.budget = parts.budgets.for_connection(
            self._address, close_after=settings.max_dropped_messages
        )
        self.session_id: str | None = None
        self.close_code: int | None = None
        self.conversation: Conversation | None = None
        self._stop: Shutdown | None = None
        self._close_tried = False
        self._scope: anyio.CancelScope | None = None
        self.dispatch: Dispatch = lambda msg: None  # the conversation's, once it is built

    # ------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Serve the accepted socket until either side ends the conversation."""
        try:
            opening = await self.dialect.open(self.ws, self.settings.hello_timeout_s, self.limits)
            self.input_format = opening.start.input
            app = self.app = app_to_serve(self.parts.agents, opening.start.app)
            self.translator = self.dialect.translator(app.tools, self.parts.agents.live_model_name)
            async with self.parts.sessions.for_app(app.name).open_session(
                opening.start.session_id,
                self._session_taken,
                user_id=opening.user_id,
                create_missing=opening.create_missing,
            ) as opened:
                await self._converse(opened, opening)
                # Still claimed: the client is told before anyone else may
                # read the session.
                await self._close()
        except Shutdown as exc:
            self._end(exc)
        except SessionBusy:
            self._end(session_busy())
        except SessionNotFound:
            self._end(session_not_found())
        except WebSocketDisconnect:
            self._end(client_gone())
        except protocol.ProtocolError as exc:
            self._end(Shutdown(exc.close_code, exc.reason))
        except Exception:  # e.g. the session store failed: say so, then close
            self._end(internal_error(self.session_id))
        finally:
            self.parts.agents.live_runs_recorder.abort_run(self.queue)
            self.queue.close()
            self.parts.budgets.release(self._address)
            self._fold_metrics()
        await self._close()

    async def _converse(self, opened: OpenedSession, opening: Opening) -> None:
        session = opened.session
        self.session_id = session.id
        if self._stop is not None:  # taken over while it was opening
            return
        start, agents, app = opening.start, self.parts.agents, self.app
        assert app is not None
        turn_detection = start.turn_detection or agents.default_turn_detection
        parts = dataclasses.replace(self.parts, sessions=self.parts.sessions.for_app(app.name))
        c = self.conversation = assemble(
            parts,
            app,
            ws=self.ws,
            wire=self.dialect.wire(start.output),
            start=start,
            mute_while_learning=opening.mute_while_learning,
            turn_detection=turn_detection,
            user_id=opening.user_id,
            session_id=session.id,
            queue=self.queue,
            translator=self.translator,
            metrics=self.metrics,
            name=self.name,
        )
        await welcome(app, c, opened, start, turn_detection, parts, self.translator)
        run_config = opening.run_config or agents.run_config_for(turn_detection)
        unsubscribe = self.parts.tasks.subscribe(c.delivery.owner, c.task_changed)
        try:
            async with anyio.create_task_group() as group:
                self._scope = group.cancel_scope
                self.dispatch = Dispatcher(c, self.parts.tasks, group).dispatch
                for task in (
                    self._receiver(opening.first),
                    self._pump(opening.user_id, run_config),
                    c.sender.run(),
                    c.delivery.run(),
                ):
                    group.start_soon(self._guard, task, group.cancel_scope)
        finally:
            unsubscribe()
            await c.delivery.close()
            c.delegations.detach(c.link)
            c.timer.close()

    def _model_side_failed(self, error: BaseException) -> None:
        """ADK's task sending to the model died: the run cannot go on."""
        self._end(internal_error(self.session_id, error))

    def stop(self, why: Shutdown) -> None:
        """End the conversation from outside (e.g. its credentials' time is up)."""
        self._end(why)

    def _session_taken(self) -> None:
        """Another connection resumes this session: stop (error chunk, 1008)."""
        self._end(session_taken())

    def _end(self, why: Shutdown) -> None:
        """The first reason to end wins; the group is cancelled."""
        if self._stop is None:
            # Kept as a value: with its traceback it would hold the frame
            # that raised it, and that frame this connection (a reference
            # cycle that only the collector frees, and whole connections
            # would wait for it).
            self._stop = why.with_traceback(None)
            why.__context__ = None
            # Before the cancellation reaches ADK's run (audiocore_server/agent/live_runs.py).
            self.parts.agents.live_runs_recorder.abort_run(self.queue)
        if self._scope is not None:
            self._scope.cancel()

    async def _guard(self, task: Awaitable[None], scope: anyio.CancelScope) -> None:
        """Run one task; however it ends, record why and stop the others."""
        try:
            await task
            stop = Shutdown()
        except asyncio.CancelledError:
            # The group is ending (another task stopped it, or the server's
            # shutdown): nothing to record. Returning, not raising: anyio
            # keeps a task's CancelledError in a reference cycle with its
            # traceback, and that traceback holds every frame that was
            # running — the whole connection — until the collector runs.
            return
        except Shutdown as exc:
            stop = exc
        except (WebSocketDisconnect, WebSocketDisconnected):
            # The second: a send after the first one found the peer gone.
            stop = client_gone()
        except protocol.ProtocolError as exc:
            stop = Shutdown(exc.close_code, exc.reason)
        except Exception:
            if self._stop is not None:
                # Already ending, and logged: this is the same failure
                # reaching another task (the model's sender, then the pump).
                log.debug("connection %s: a task failed while ending", self.name, exc_info=True)
                scope.cancel()
                return
            stop = internal_error(self.session_id)
        self._end(stop)

    async def _close(self) -> None:
        stop = self._stop or Shutdown()
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
            if stop.error and self.dialect.error_before_close:
                await self.ws.send_text(chunks.encode(chunks.Error(stop.error)))
            await self.ws.close(stop.code, stop.reason[:120])

    def _fold_metrics(self) -> None:
        metrics = self.metrics
        metrics.dropped_input_chunks = self.queue.dropped_chunks
        if self.conversation is not None:
            stats = self.conversation.pacer.stats
            metrics.frames_sent = stats.frames
            metrics.late_frames = stats.late_frames
            metrics.concealed_frames = stats.concealed_frames
            metrics.made_up_samples = stats.made_up_samples

    # ------------------------------------------------------------ receiver
    async def _receiver(self, first: Message | None) -> None:
        if first is not None:
            await self._handle(first)
        handled = 0
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                raise client_gone()
            await self._handle(message)
            handled += 1
            if handled % _YIELD_EVERY == 0:
                # One read of the socket may hold thousands of small frames,
                # and taking the next from the queue does not suspend: let
                # the other conversations run between them.
                await asyncio.sleep(0)

    async def _handle(self, message: Message) -> None:
        received = time.monotonic()
        c, budget = self.conversation, self.budget
        assert c is not None
        refused = budget.admit_frame()  # None: admitted; "": dropped, already told
        if refused is not None:
            if refused:
                c.report(refused)
            return
        text = message.get("text")
        if text is not None and len(text) > large_json.SMALL:
            # A large frame is parsed in a thread, in pieces (large_json):
            # one C call over 4 MB of JSON would hold this loop.
            decoded = await anyio.to_thread.run_sync(self._decode_in_thread, message)
            del message, text  # nothing here may keep a 4 MB frame alive
            if isinstance(decoded, fields.InputError):
                if budget.may_report():
                    c.report(str(decoded))
                return
        else:
            decoded = None
        try:
            if decoded is None:
                decoded = self._decode(message)
            for msg in decoded:
                refused = budget.admit(msg)
                if refused is None:
                    self.dispatch(msg)
                    if isinstance(msg, protocol.Audio) and c.mic.sent:
                        self.metrics.input_latency(time.monotonic() - received)
                elif refused:
                    c.report(refused)
        except fields.InputError as exc:
            if budget.may_report():
                c.report(str(exc))

    def _decode(self, message: Message) -> list[protocol.ClientMessage]:
        return list(self.dialect.decode(message, self.input_format, self.limits))

    def _decode_in_thread(
        self, message: Message
    ) -> list[protocol.ClientMessage] | fields.InputError:
        """``_decode``, with a mistake returned rather than raised, without
        its traceback: an exception that crosses from the thread through a
        future is in a reference cycle with the frames it passed, the frame
        holding the 4 MB message among them, and a cycle waits for the
        garbage collector (hundreds of MB under a flood of large frames)."""
        try:
            return self._decode(message)
        except fields.InputError as exc:
            return exc.with_traceback(None)

    # ------------------------------------------------------------ pump
    async def _pump(self, user_id: str, run_config: RunConfig) -> None:
        c = self.conversation
        assert c is not None
        agents, app = self.parts.agents, self.app
        assert app is not None
        played_audio.bind(c.playout.played)  # for the model's connection, opened below

        def recovered(cause: str) -> None:
            c.timer.recovered(cause)
            c.tell(chunks.ModelReconnected(cause))

        link = model_link.ModelLink(on_recovered=recovered)
        model_link.bind(link)  # the same way: across the run's reconnects
        events = ModelEvents(
            app.runner.run_live(
                user_id=user_id,
                session_id=c.session_id,
                live_request_queue=self.queue,
                run_config=run_config,
            ),
            stall_timeout_s=self.settings.model_stall_timeout_s,
            name=f"connection {self.name} (session {c.session_id})",
            recover=link.stall,
        )
        c.uplink.on_tool_answer = events.owe
        agents.live_runs += 1
        # ADK's spans for the run (and its tasks, which copy this context)
        # are children of the connection's (ops/turn_timing.py).
        parent = c.timer.parent_context
        token = otel_context.attach(parent) if parent is not None else None
        try:
            async with contextlib.aclosing(events):
                while (event := await events.next()) is not None:
                    if event.actions.transfer_to_agent:  # first: see the method
                        self.queue.hold_for_transfer()
                    await c.playout.on_event(event)
                    await c.sender.send_due()
                    # ADK hands over a burst of ready events without suspending;
                    # let the sender run between them so due frames leave on time.
                    await asyncio.sleep(0)
        finally:
            agents.live_runs -= 1
            c.uplink.on_tool_answer = _nothing  # the run's events are gone: no cycle left
            if token is not None:
                otel_context.detach(token)


def _nothing() -> None:
    pass
