"""Where a turn's time goes, as Prometheus histograms and OpenTelemetry spans.

A ``TurnTimer`` belongs to one live connection. Its parts tell it what
happens, each as it happens:

* the end of the user's words (``user_done``): the model's voice detection
  (its ``ACTIVITY_END``), the client's ``activity_end``, or a typed turn
  handed to the model — whichever comes first since the last answer;
* the model's answer arriving (``model_output``, ``model_audio``) and its
  first audio frame leaving for the client (``client_audio``);
* the turn's end (``turn_end``), a barge-in (``barge_in``) and the silence
  after it (``silence``: the last stale frame out, 0 when none was);
* the user's voice beginning over an answer (``user_voice``: when the
  frame that carries it was read) and the model's barge-in told to the
  client (``barge_in_told``: ``clear`` on a phone, ``data-interrupted``);
* each tool call's chunks as they leave for the client (``tool_chunk``):
  its input, an approval request, its output.

``TurnMetrics`` holds the histograms, one set per app (``/metrics``):

* ``audiocore_turn_latency_seconds{stage, edge}``: from the end of the
  user's words (``edge``: ``model``, ``client``, ``text``) to the model's
  first output of any kind (``stage="model_first_byte"``), to its first
  audio (``model_first_audio``), to the first audio sent to the client
  (``client_first_audio``);
* ``audiocore_tool_round_trip_seconds{kind}``: from a call's input sent to
  its output sent (``server``: ADK ran it; ``browser``: the client ran it;
  ``approval``: the user was asked first);
* ``audiocore_bargein_silence_seconds``: from a barge-in's flush to the
  last stale audio frame out;
* ``audiocore_bargein_latency_seconds``: from the first voiced frame of the
  user's words over an answer, as the server read it, to the model's
  barge-in told to the client;
* ``audiocore_model_recoveries_total{cause}``: model sessions lost and
  recovered on the same socket (``recovered``; an event on the turn's span).

When a tracer is given (OpenTelemetry configured: docs/observability.md),
the same moments are spans: ``audiocore.connection`` for the connection
(ADK's own spans for the run are its children: ``parent_context``),
``audiocore.turn`` per turn with an event per stage, and, inside the turn,
``audiocore.tool`` per call and ``audiocore.barge_in``. Without one, no span
is made.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Literal

from opentelemetry import context as otel_context
from opentelemetry import trace
from prometheus_client import CollectorRegistry, Counter, Histogram

from ..wire import chunks

Edge = Literal["model", "client", "text"]
ToolKind = Literal["server", "browser", "approval"]

_LATENCY_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)
_TOOL_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_SILENCE_BUCKETS = (0.0, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64)
_BARGEIN_BUCKETS = (0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


class TurnMetrics:
    """The histograms every connection of an app records into."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.latency = Histogram(
            "audiocore_turn_latency_seconds",
            "from the end of the user's words to the model's first output, its first audio, "
            "and the first audio sent to the client",
            ["stage", "edge"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.tool = Histogram(
            "audiocore_tool_round_trip_seconds",
            "from a tool call's input sent to its output sent, by who answered it",
            ["kind"],
            buckets=_TOOL_BUCKETS,
            registry=registry,
        )
        self.bargein = Histogram(
            "audiocore_bargein_silence_seconds",
            "from a barge-in's flush to the last stale audio frame sent",
            buckets=_SILENCE_BUCKETS,
            registry=registry,
        )
        self.bargein_latency = Histogram(
            "audiocore_bargein_latency_seconds",
            "from the user's first voiced frame over an answer, as read, to the model's "
            "barge-in told to the client",
            buckets=_BARGEIN_BUCKETS,
            registry=registry,
        )
        self.recoveries = Counter(
            "audiocore_model_recoveries",
            "model sessions lost and recovered on the same socket, by cause",
            ["cause"],
            registry=registry,
        )


@dataclasses.dataclass
class _Turn:
    edge: Edge | None  # None: the model spoke first (no user words to time from)
    done_at: float
    span: trace.Span | None
    first_byte: bool = False
    first_audio: bool = False
    client_audio: bool = False


@dataclasses.dataclass
class _Call:
    name: str
    asked_at: float
    kind: ToolKind
    span: trace.Span | None


def tracing_on() -> bool:
    """An OpenTelemetry SDK provider is set (by ``configure_from_env`` or by
    the app that embeds the server): spans are recorded."""
    return not isinstance(
        trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    )


class TurnTimer:
    def __init__(
        self,
        metrics: TurnMetrics,
        *,
        tracer: trace.Tracer | None = None,
        attributes: dict[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._metrics = metrics
        self._tracer = tracer
        self._clock = clock
        self._turn: _Turn | None = None
        # Ended on the model's side, its first audio not sent yet (paced
        # behind what plays): the client stage and the span end with it.
        self._unsent: _Turn | None = None
        self._calls: dict[str, _Call] = {}
        self._bargein: trace.Span | None = None
        self._voice_at: float | None = None  # the user's voice began over an answer
        self._bargein_voice_at: float | None = None  # that voice, for the barge-in it made
        self._span = (
            tracer.start_span("audiocore.connection", attributes=attributes or {})
            if tracer is not None
            else None
        )

    @property
    def parent_context(self) -> otel_context.Context | None:
        """The context ADK's run runs in, so that its spans join ours."""
        return trace.set_span_in_context(self._span) if self._span is not None else None

    # ------------------------------------------------------------ the turn
    def user_done(self, edge: Edge) -> None:
        """The user's words ended (the first edge since the last answer counts)."""
        if self._turn is not None:
            return
        self._turn = _Turn(edge, self._clock(), self._start("audiocore.turn", edge=edge))

    def model_output(self) -> None:
        turn = self._answer()
        if not turn.first_byte:
            turn.first_byte = True
            self._stage(turn, "model_first_byte")

    def model_audio(self) -> None:
        turn = self._answer()
        if not turn.first_byte:
            turn.first_byte = True
            self._stage(turn, "model_first_byte")
        if not turn.first_audio:
            turn.first_audio = True
            self._stage(turn, "model_first_audio")

    def client_audio(self) -> None:
        unsent, self._unsent = self._unsent, None
        if unsent is not None:
            unsent.client_audio = True
            self._stage(unsent, "client_first_audio")
            _end(unsent)
            return
        turn = self._turn
        if turn is not None and turn.first_audio and not turn.client_audio:
            turn.client_audio = True
            self._stage(turn, "client_first_audio")

    def turn_end(self, *, interrupted: bool = False) -> None:
        """The model ended its turn (or it was cut)."""
        turn, self._turn = self._turn, None
        if not interrupted:
            self._voice_at = None  # the answer ended: no barge-in of it to come
        if turn is None:
            return
        if turn.span is not None:
            turn.span.set_attribute("audiocore.interrupted", interrupted)
        if turn.first_audio and not turn.client_audio and not interrupted:
            self._drop_unsent()
            self._unsent = turn
        else:
            _end(turn)

    def user_voice(self, at: float) -> None:
        """The user's voice began over an answer: its first voiced frame was
        read at ``at``."""
        self._voice_at = at

    def barge_in(self) -> None:
        self._bargein_voice_at, self._voice_at = self._voice_at, None
        self._drop_unsent()  # flushed: never heard
        if self._bargein is None:
            self._bargein = self._start("audiocore.barge_in", parent=self._turn_span())

    def silence(self, seconds: float) -> None:
        """After a barge-in: the last stale frame left ``seconds`` after the flush."""
        self._metrics.bargein.observe(seconds)
        span, self._bargein = self._bargein, None
        if span is not None:
            span.set_attribute("audiocore.silence_s", seconds)
            span.end()

    def barge_in_told(self) -> float | None:
        """The model's barge-in left for the client: the seconds since the
        user's voice that made it (None: no voice was seen before it)."""
        at, self._bargein_voice_at = self._bargein_voice_at, None
        if at is None:
            return None
        seconds = self._clock() - at
        self._metrics.bargein_latency.observe(seconds)
        if self._bargein is not None:
            self._bargein.set_attribute("audiocore.latency_s", seconds)
        return seconds

    def recovered(self, cause: str) -> None:
        """The model's session was lost (``cause``: drop, stall, limit) and
        a new one took the conversation over."""
        self._metrics.recoveries.labels(cause).inc()
        span = self._turn_span() or self._span
        if span is not None:
            span.add_event("model_recovered", {"audiocore.cause": cause})

    # ------------------------------------------------------------ tools
    def tool_chunk(self, chunk: chunks.Chunk) -> None:
        """A tool chunk on its way to the client."""
        if isinstance(chunk, chunks.ToolInput):
            call = self._calls.get(chunk.call_id)
            if call is None:
                kind: ToolKind = "browser" if chunk.client_executes else "server"
                span = self._start("audiocore.tool", parent=self._turn_span(), tool=chunk.tool_name)
                self._calls[chunk.call_id] = _Call(chunk.tool_name, self._clock(), kind, span)
        elif isinstance(chunk, chunks.ToolApprovalRequest):
            call = self._calls.get(chunk.call_id)
            if call is not None:
                call.kind = "approval"
        elif isinstance(
            chunk, (chunks.ToolOutput, chunks.ToolOutputDenied, chunks.ToolOutputError)
        ):
            call = self._calls.pop(chunk.call_id, None)
            if call is not None:
                self._metrics.tool.labels(call.kind).observe(self._clock() - call.asked_at)
                if call.span is not None:
                    call.span.set_attribute("audiocore.tool_kind", call.kind)
                    call.span.set_attribute("audiocore.outcome", chunk.type)
                    call.span.end()

    def close(self) -> None:
        """The connection ended: what is open ends with it."""
        for call in self._calls.values():
            if call.span is not None:
                call.span.end()
        self._calls.clear()
        if self._bargein is not None:
            self._bargein.end()
            self._bargein = None
        self.turn_end(interrupted=True)
        self._drop_unsent()
        if self._span is not None:
            self._span.end()
            self._span = None

    # ------------------------------------------------------------ helpers
    def _drop_unsent(self) -> None:
        unsent, self._unsent = self._unsent, None
        if unsent is not None:
            _end(unsent)

    def _answer(self) -> _Turn:
        """The turn the model's output belongs to (one with no user edge
        when the model speaks first)."""
        if self._turn is None:
            self._turn = _Turn(None, self._clock(), self._start("audiocore.turn"))
        return self._turn

    def _stage(self, turn: _Turn, stage: str) -> None:
        if turn.edge is not None:
            self._metrics.latency.labels(stage, turn.edge).observe(self._clock() - turn.done_at)
        if turn.span is not None:
            turn.span.add_event(stage)

    def _turn_span(self) -> trace.Span | None:
        return self._turn.span if self._turn is not None else None

    def _start(
        self, name: str, *, parent: trace.Span | None = None, **attributes: str
    ) -> trace.Span | None:
        if self._tracer is None:
            return None
        within = parent if parent is not None else self._span
        ctx = trace.set_span_in_context(within) if within is not None else None
        attrs = {f"audiocore.{k}": v for k, v in attributes.items()}
        return self._tracer.start_span(name, context=ctx, attributes=attrs)


def _end(turn: _Turn) -> None:
    if turn.span is not None:
        turn.span.end()
