"""The parts of one live conversation, built and wired in one place.

``assemble`` builds, for a connection whose session is open, the pacer and
the collaborators that share it, and wires what each tells the others:
the microphone's voice and the playback's end → the line policy; the line
and the uplink → the task delivery; the playout's turn ends and barge-ins →
the line, the delivery and the sender's barge-in metric. Nothing here runs:
``audiocore_server/live/connection.py`` runs the result in its task group.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from google.adk.sessions import Session
from google.genai import types
from opentelemetry import trace
from starlette.websockets import WebSocket

from ..agent.runners import Agents, AppRunners
from ..audio.echo import MicEcho, echo_rate
from ..audio.pacer import OutputPacer
from ..gate.owners import key_owner, session_owner
from ..ops.metrics import ConnectionMetrics
from ..ops.turn_timing import TurnMetrics, TurnTimer, tracing_on
from ..settings import Settings
from ..storage.session_access import OpenedSession, SessionAccess, session_history
from ..storage.state_keys import TIME_ZONE_STATE_KEY
from ..tasks import TaskManager, TaskRecord, write_owner
from ..tools.delegation import Delegations, SessionDelegations
from ..turns.events import Translator
from ..wire import chunks
from ..wire.protocol import CLOSE_POLICY_VIOLATION, ProtocolError, Start, TurnDetection
from .budget import AddressBudgets
from .frames import Wire
from .line import LinePolicy
from .mic import MicPath
from .outcomes import TaskDelivery
from .playout import Playout
from .request_queue import BoundedLiveRequestQueue
from .sender import Sender
from .uplink import Uplink

log = logging.getLogger(__name__)

TASK_CARDS = 10  # the owner's latest tasks shown to a new connection


@dataclasses.dataclass(frozen=True)
class LiveParts:
    """What a live connection uses of the server's shared parts."""

    settings: Settings
    sessions: SessionAccess
    agents: Agents
    tasks: TaskManager
    delegations: Delegations
    budgets: AddressBudgets
    turn_metrics: TurnMetrics


class DelegationLink:
    """The conversation as its session's delegated calls see it
    (``delegation.DelegationSink``)."""

    def __init__(
        self,
        name: str,
        tell: Callable[[chunks.Chunk], None],
        uplink: Uplink,
        delivery: TaskDelivery,
        state: Callable[[], Awaitable[Session | None]],
    ) -> None:
        self.name = name
        self._tell = tell
        self._uplink = uplink
        self._delivery = delivery
        self._state = state

    def tell_client(self, items: Sequence[chunks.Chunk]) -> None:
        try:
            for chunk in items:
                self._tell(chunk)
        except ProtocolError:
            # Called from a timer too: the sender's timeout ends this connection.
            log.warning("connection %s: tool chunks dropped, client not reading", self.name)

    def tell_model(
        self, responses: Sequence[types.FunctionResponse], state_delta: Mapping[str, Any]
    ) -> None:
        self._uplink.tool_answer(responses, state_delta)
        self._delivery.wake()  # a call less may free the line

    async def session_state(self) -> Mapping[str, Any]:
        session = await self._state()
        return session.state if session is not None else {}


@dataclasses.dataclass(frozen=True)
class Conversation:
    session_id: str
    user_id: str
    tell: Callable[[chunks.Chunk], None]  # a chunk for the client, behind what is queued
    report: Callable[[str], None]  # an error chunk
    link: DelegationLink
    pacer: OutputPacer
    mic: MicPath
    uplink: Uplink
    line: LinePolicy
    playout: Playout
    sender: Sender
    delegations: SessionDelegations
    delivery: TaskDelivery
    timer: TurnTimer

    def task_changed(self, record: TaskRecord) -> None:
        """A task of the owner changed: its card, and maybe its outcome to tell."""
        self.link.tell_client([record.card()])
        self.delivery.wake()


def task_owner(start: Start, user_id: str, session_id: str) -> str:
    """Whose background tasks a connection sees: the user's, named by the
    client's key, or else the session's own."""
    if start.user_key is not None:
        return key_owner(start.user_key)
    return session_owner(user_id, session_id)


def assemble(
    parts: LiveParts,
    app: AppRunners,
    *,
    ws: WebSocket,
    wire: Wire,
    start: Start,
    mute_while_learning: bool,
    turn_detection: TurnDetection,
    user_id: str,
    session_id: str,
    queue: BoundedLiveRequestQueue,
    translator: Translator,
    metrics: ConnectionMetrics,
    name: str,
) -> Conversation:
    settings = parts.settings
    rate = start.output.sample_rate
    pacer = OutputPacer(
        sample_rate=rate,
        frame_ms=settings.output_frame_ms,
        lead_s=settings.output_lead_ms / 1000,
        max_audio_s=settings.max_buffered_output_s,
        max_messages=settings.max_pending_messages,
    )
    delegations = parts.delegations.for_session(session_id)
    timer = TurnTimer(
        parts.turn_metrics,
        tracer=trace.get_tracer("audiocore_server") if tracing_on() else None,
        attributes={
            "audiocore.app": app.name,
            "audiocore.surface": wire.name,
            "audiocore.model": parts.agents.live_model_name,
        },
    )

    def tell(chunk: chunks.Chunk) -> None:
        if not pacer.put_message_nowait(chunk):
            raise ProtocolError(CLOSE_POLICY_VIOLATION, "client is not reading its messages")

    def report(text: str) -> None:
        tell(chunks.Error(text))

    def client_speech(state: chunks.SpeechState) -> None:
        tell(chunks.Speech(state, "client"))
        if state == "stopped":
            timer.user_done("client")

    echo = None
    if start.echo_cancellation == "server":
        echo = MicEcho(
            echo_rate(start.input.sample_rate, settings.model_audio_rate),
            played_rate=rate,
            mute_while_learning=mute_while_learning,
        )
        pacer.listen(echo)
    mic = MicPath(
        queue,
        model_rate=settings.model_audio_rate,
        chunk_ms=settings.model_input_chunk_ms,
        report=report,
        echo=echo,
        playback_ends_at=lambda: pacer.playback_ends_at,
        on_voice=timer.user_voice,
    )
    line = LinePolicy(mic, pacer, translator, lambda: delegations.pending)
    uplink = Uplink(
        queue,
        mic,
        line,
        report=report,
        # Gemini refuses activity signals while its own detection is on;
        # the offline model takes them.
        edges_refused=settings.backend != "offline" and turn_detection != "manual",
        on_speech=client_speech,
        on_typed_turn=lambda: timer.user_done("text"),
    )

    delivery = TaskDelivery(
        parts.tasks,
        task_owner(start, user_id, session_id),
        name,
        line_free_at=line.free_at,
        playback_ends_at=lambda: pacer.playback_ends_at,
        hand_to_model=uplink.task_outcome,
        attach=translator.attach,
    )
    sender = Sender(
        ws,
        wire,
        pacer,
        output_rate=rate,
        send_timeout_s=settings.send_timeout_s,
        metrics=metrics,
        timer=timer,
    )

    def turn_ended() -> None:
        line.answer_ended()
        delivery.turn_ended()

    def barged_in() -> None:
        sender.flushed()
        delivery.interrupted()

    playout = Playout(
        translator,
        pacer,
        output_rate=rate,
        tools=app.tools,
        delegations=delegations,
        on_turn_end=turn_ended,
        on_barge_in=barged_in,
        timer=timer,
        heard=wire.heard,
    )
    queue.confirmation_hook = playout.confirmation_requested
    link = DelegationLink(
        name, tell, uplink, delivery, lambda: parts.sessions.get(user_id, session_id)
    )
    return Conversation(
        session_id,
        user_id,
        tell,
        report,
        link,
        pacer,
        mic,
        uplink,
        line,
        playout,
        sender,
        delegations,
        delivery,
        timer,
    )


async def welcome(
    app: AppRunners,
    c: Conversation,
    opened: OpenedSession,
    start: Start,
    turn_detection: TurnDetection,
    parts: LiveParts,
    translator: Translator,
) -> None:
    """What the client is told before the conversation runs: the session
    (where the dialect has it), why a requested session was not resumed,
    the tool calls still waiting for an answer, and the owner's latest
    background tasks."""
    session, agents = opened.session, parts.agents
    if c.sender.sends_session:
        await c.sender.send_now(
            chunks.SessionInfo(
                session.id,
                start.input,
                start.output,
                model=agents.live_model_name,
                resumed=opened.resumed,
                history=session_history(session) if opened.resumed else [],
                turn_detection=turn_detection,
                tools=app.describe_tools(),
                echo_cancellation=start.echo_cancellation,
            )
        )
    if opened.notice:
        await c.sender.send_now(chunks.Error(opened.notice))
    # Tool calls still waiting for this session's client are asked again.
    message_id, replay = c.delegations.attach(c.link)
    if replay:
        c.link.tell_client([*translator.begin(message_id), *replay])
    owner = c.delivery.owner
    # Whose memory and tasks the session's tools use is what this
    # connection proved, never what the session stored: a client that
    # resumes a session without a key has no key's memory or tasks. Before
    # the run, whose instruction holds the memory as the model connects.
    await write_owner(
        parts.sessions.service, session, owner if start.user_key is not None else None
    )
    if start.time_zone is not None:
        # For this connection's run only (``temp:``, never stored): the next
        # client of the session says its own, or has UTC.
        c.uplink.state({TIME_ZONE_STATE_KEY: start.time_zone})
    for record in (await parts.tasks.tasks(owner))[-TASK_CARDS:]:
        c.tell(record.card())
