"""The local Gemini Live endpoint: a TLS WebSocket server on 127.0.0.1 that
speaks the Live API's wire protocol, validates what it receives
(``wire.py``) and answers deterministically (``conversation.py``).

It runs its own event loop in a thread, so a test's clients, the server
under test (uvicorn in another thread) and the endpoint never share a loop.
Tests read what happened on the wire from ``records`` (one
``ConnectionRecord`` per connection: the handshake, the setup, every client
message, every server message kind, the close) and steer the endpoint with
``go_away``, ``fail_next_reply``, ``kill`` and ``revive``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import re
import secrets
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any, TypeVar

import websockets
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

import audiocore
from audiocore_server.offline.model import OfflineLiveModel
from audiocore_server.offline.speech import INPUT_RATE, EnergySegmenter
from tests.local_endpoint import ThreadedEndpoint

from . import wire
from .conversation import (
    FRAME_TOKENS,
    OUTPUT_RATE,
    Conversation,
    Message,
    Reply,
    audio_tokens,
    resumption_update,
    server_content,
    spoken_reply,
    text_reply,
    text_tokens,
    tool_call_for,
    tool_result_words,
    usage,
)
from .tls import SelfSignedCert, make_self_signed_cert

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_API_KEY = "local-gemini-live-key"
# The path genai builds: {base_url}/ws/google.ai.generativelanguage.{version}.
# GenerativeService.{method}; any base path before it (and genai's "//ws"
# from a base URL ending in "/") is accepted, as Google's front end does.
_PATH = re.compile(
    r"/ws/google\.ai\.generativelanguage\.(v1alpha|v1beta)\.GenerativeService\."
    r"(BidiGenerateContent|BidiGenerateContentConstrained)$"
)


@dataclasses.dataclass
class EndpointConfig:
    api_keys: frozenset[str] = frozenset({DEFAULT_API_KEY})
    # A connection lives this long, then is closed 1011 "Deadline expired"
    # (Gemini API: about 10 minutes); goAway{timeLeft} comes notice_s before.
    connection_lifetime_s: float | None = 600.0
    go_away_notice_s: float = 50.0
    context_tokens: int | None = None  # None: the model's context window
    audio_chunk_ms: int = 40  # model audio per serverContent message
    burst_ms: int = 200  # model audio is sent in bursts of this much…
    speed: float = 2.0  # …at this multiple of real time
    vad_threshold_dbfs: float = -40.0
    hangover_ms: int = 600  # silence that ends a turn (setup's silenceDurationMs wins)
    preroll_ms: int = 300  # audio kept before speech (setup's prefixPaddingMs wins)
    permessage_deflate: bool = False
    # Send the documented ``voiceActivity`` messages (``ACTIVITY_START`` at
    # the detector's onset, ``ACTIVITY_END`` when it ends the utterance, with
    # ``audioOffset`` in the stream). Off by default: when the service sends
    # them is not documented, and no other test should depend on them.
    voice_activity: bool = False


@dataclasses.dataclass
class ConnectionRecord:
    """One connection as the endpoint saw it (read it under ``LocalGeminiLive``'s lock)."""

    index: int
    path: str
    headers: dict[str, str]
    query: dict[str, list[str]]
    setup: dict[str, Any] | None = None  # the raw setup message
    parsed: wire.Setup | None = None
    resumed_from: str | None = None  # the handle it resumed
    received: list[tuple[str, Any]] = dataclasses.field(default_factory=list)
    sent: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # audio data elided
    refusal: str | None = None  # why the endpoint closed it (detail)
    close_code: int | None = None  # as the endpoint saw the close (1006: aborted)
    close_reason: str = ""
    closed_at: float | None = None

    def sent_kinds(self) -> list[str]:
        """``serverContent.turnComplete``-style names of what was sent, in order."""
        kinds = []
        for message in self.sent:
            for key, value in message.items():
                if key == "serverContent":
                    kinds += [f"serverContent.{k}" for k in value]
                else:
                    kinds.append(key)
        return kinds

    def received_kinds(self) -> list[str]:
        return [kind for kind, _ in self.received]


class _ReplyFailed(Exception):
    """The endpoint was told to fail this reply (``fail_next_reply``)."""


class LocalGeminiLive(ThreadedEndpoint[ConnectionRecord]):
    """``with LocalGeminiLive(cert_dir=tmp) as endpoint:`` → ``endpoint.url``,
    ``endpoint.ca_file``, ``endpoint.api_key``."""

    thread_name = "the local Gemini Live endpoint"

    def __init__(
        self,
        config: EndpointConfig | None = None,
        *,
        cert: SelfSignedCert | None = None,
        cert_dir: Path | None = None,
        port: int = 0,
    ) -> None:
        super().__init__()
        if cert is None:
            if cert_dir is None:
                raise TypeError("expected cert or cert_dir")
            cert = make_self_signed_cert(cert_dir)
        self.cert = cert
        self.config = config or EndpointConfig()
        self.port = port
        self._server: Server | None = None
        self._live: set[_LiveSession] = set()
        self._sessions: dict[str, _LiveSession] = {}  # conversation id → its live connection
        self._handles: dict[str, tuple[str, Conversation]] = {}  # handle → (conversation id, state)
        self._fail_next: tuple[int, str] | None = None
        self._go_away_next: float | None = None
        self.refused_connections = 0  # the next this many handshakes get HTTP 503

    # ------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.cert.cert_file

    @property
    def api_key(self) -> str:
        return sorted(self.config.api_keys)[0]

    def call(self, fn: Callable[[], Awaitable[T]], timeout: float = 10) -> T:
        """Run a coroutine on the endpoint's loop from another thread."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(fn(), self._loop).result(timeout)

    async def _listen(self) -> None:
        self._server = await serve(
            self._serve,
            "127.0.0.1",
            self.port,
            ssl=self.cert.server_context(),
            process_request=self._check_path,
            max_size=16 * 1024 * 1024,  # history and video frames (genai caps ours at 1 MiB)
            compression="deflate" if self.config.permessage_deflate else None,
            reuse_address=True,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        for session in list(self._live):
            session.abort()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        others = asyncio.all_tasks() - {asyncio.current_task()}
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    # ------------------------------------------------------------ steering
    def go_away(self, time_left_s: float = 1.0, close: bool = True) -> None:
        """Every live connection gets ``goAway{timeLeft}``; then, unless
        ``close`` is False, it is closed 1011 "Deadline expired" when the time is up."""

        async def send() -> None:
            for session in list(self._live):
                session.start_go_away(time_left_s, close)

        self.call(send)

    def fail_next_reply(self, after_audio_chunks: int = 3, how: str = "abort") -> None:
        """The next reply fails after this many audio chunks: "internal" closes
        1011 "Internal error encountered.", "abort" resets the TCP connection,
        "die" is ``kill`` (the service is gone), "stall" stops sending and
        keeps the connection open (the answer never comes)."""
        if how not in ("abort", "internal", "die", "stall"):
            raise ValueError(f'how: expected "abort", "internal", "die" or "stall", got {how!r}')
        self._fail_next = (after_audio_chunks, how)

    def abort_sessions(self) -> None:
        """Every live connection is reset (no close frame); the service
        keeps its sessions and handles."""

        async def abort() -> None:
            for session in list(self._live):
                session.abort()

        self.call(abort)

    def go_away_at_next_answer(self, time_left_s: float) -> None:
        """The next reply gets ``goAway{timeLeft}`` right after its first audio
        chunk (mid-answer), and the connection is closed when the time is up."""
        self._go_away_next = time_left_s

    def kill(self) -> None:
        """The service dies: every connection is reset, nothing listens, and
        every session and handle is forgotten."""
        self.call(self._die)

    async def _die(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close(close_connections=False)  # no close frames: the process is gone
        for session in list(self._live):
            session.abort()
        if server is not None:
            await server.wait_closed()
        self._sessions.clear()
        self._handles.clear()

    def revive(self) -> None:
        """Listen again, on the same port."""
        self.call(self._listen)

    # ------------------------------------------------------------ records
    def _describe(self, record: ConnectionRecord) -> object:
        return (record.index, record.received_kinds()[-5:], record.close_code)

    # ------------------------------------------------------------ connections
    def _check_path(self, connection: ServerConnection, request: Request) -> Response | None:
        if _PATH.search(request.path.partition("?")[0]) is None:
            return connection.respond(HTTPStatus.NOT_FOUND, "Not Found\n")
        if self.refused_connections > 0:
            self.refused_connections -= 1
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "Service Unavailable\n")
        return None

    async def _serve(self, ws: ServerConnection) -> None:
        # Not urlsplit: genai's "//ws/…" (a base URL ending in "/") would parse as a host.
        path, _, query = ws.request.path.partition("?")
        record = ConnectionRecord(
            index=0,
            path=path,
            headers={k.lower(): v for k, v in ws.request.headers.raw_items()},
            query=urllib.parse.parse_qs(query),
        )

        self.add_record(record)
        match = _PATH.search(path)
        assert match is not None
        version = match.group(1)
        session: _LiveSession | None = None
        try:
            # The key is checked once the setup is in, as genai sees Google
            # do it: its first read after sending the setup gets the 1007.
            first = await ws.recv()
            self._authenticate(record, constrained=match.group(2).endswith("Constrained"))
            try:
                message = json.loads(first)
            except (ValueError, UnicodeDecodeError):
                raise wire.invalid("the first frame is not JSON") from None
            self.update(lambda: setattr(record, "setup", message))
            setup = wire.parse_setup(message, version)
            conversation_id, conversation = self._conversation(setup)
            self.update(
                lambda: (
                    setattr(record, "parsed", setup),
                    setattr(record, "resumed_from", setup.resume_handle),
                )
            )
            session = _LiveSession(self, ws, record, setup, conversation_id, conversation)
            await session.run()
        except wire.Refusal as refusal:
            detail = refusal.detail
            self.update(lambda: setattr(record, "refusal", detail))
            with contextlib.suppress(websockets.ConnectionClosed):
                await ws.close(refusal.code, refusal.reason)
        except websockets.ConnectionClosed:
            pass
        finally:
            if session is not None:
                await session.finish()
            code = ws.close_code if ws.close_code is not None else 1006

            def closed() -> None:
                if record.close_code is None:
                    record.close_code, record.close_reason = code, ws.close_reason or ""
                record.closed_at = time.monotonic()

            self.update(closed)

    def _authenticate(self, record: ConnectionRecord, constrained: bool) -> None:
        key = record.headers.get("x-goog-api-key") or next(iter(record.query.get("key", [])), None)
        token = record.headers.get("authorization", "")
        if constrained or token.startswith("Token "):
            key = token.removeprefix("Token ") or next(
                iter(record.query.get("access_token", [])), None
            )
        if not key:
            raise wire.Refusal(wire.CLOSE_INVALID, wire.KEY_NOT_FOUND)
        if key not in self.config.api_keys:
            raise wire.Refusal(wire.CLOSE_INVALID, wire.KEY_INVALID)

    def _conversation(self, setup: wire.Setup) -> tuple[str, Conversation]:
        if setup.resume_handle is None:
            return secrets.token_hex(8), Conversation()
        found = self._handles.get(setup.resume_handle)
        if found is None:  # assumed: an unknown or expired handle is an unknown entity
            raise wire.Refusal(wire.CLOSE_POLICY, wire.NOT_FOUND, "unknown resumption handle")
        conversation_id, state = found
        if conversation_id in self._sessions:
            # Third-party report (aicc2025/sip-to-ai#14): Gemini refuses a
            # resume while an older socket of the session is still open.
            raise wire.Refusal(wire.CLOSE_INTERNAL, wire.INTERNAL, "the session is still open")
        return conversation_id, state.snapshot()

    def _issue_handle(self, conversation_id: str, state: Conversation) -> str:
        handle = secrets.token_urlsafe(24)
        self._handles[handle] = (conversation_id, state.snapshot())
        return handle

    def _take_failure(self) -> tuple[int, str] | None:
        failure, self._fail_next = self._fail_next, None
        return failure

    def _take_go_away(self) -> float | None:
        time_left, self._go_away_next = self._go_away_next, None
        return time_left


class _LiveSession:
    """One live connection after a valid setup: turn detection, replies, resumption."""

    def __init__(
        self,
        endpoint: LocalGeminiLive,
        ws: ServerConnection,
        record: ConnectionRecord,
        setup: wire.Setup,
        conversation_id: str,
        conversation: Conversation,
    ) -> None:
        self.endpoint = endpoint
        self.config = endpoint.config
        self.ws = ws
        self.record = record
        self.setup = setup
        self.conversation_id = conversation_id
        self.conversation = conversation
        self.family = setup.info.family
        self._segmenter = EnergySegmenter(
            OfflineLiveModel(
                vad_threshold_dbfs=self.config.vad_threshold_dbfs,
                hangover_ms=setup.silence_duration_ms or self.config.hangover_ms,
                preroll_ms=setup.prefix_padding_ms
                if setup.prefix_padding_ms is not None
                else self.config.preroll_ms,
            )
        )
        self._in_activity = False
        self._audio_in_samples = 0  # 16 kHz samples of automatic-detection audio so far
        self._jobs: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()
        self._current: asyncio.Task[None] | None = None
        self._speaking_until = 0.0
        self._generating = False
        self._pending_calls: dict[str, str] = {}
        self._exchanged = False  # anything but history happened
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        endpoint = self.endpoint
        endpoint._live.add(self)
        endpoint._sessions[self.conversation_id] = self
        await self.send({"setupComplete": {}})
        if self.setup.resumption:
            await self._resumable()
        lifetime = self.config.connection_lifetime_s
        if lifetime is not None:
            notice = min(self.config.go_away_notice_s, lifetime)
            self._spawn(self._go_away_after(lifetime - notice, notice, close=True))
        self._spawn(self._speaker())
        try:
            async for frame in self.ws:
                for message in wire.parse_client_message(frame):
                    await self._on(message)
        except websockets.ConnectionClosed:
            pass

    async def finish(self) -> None:
        for task in list(self._tasks) + [t for t in [self._current] if t]:
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.endpoint._live.discard(self)
        if self.endpoint._sessions.get(self.conversation_id) is self:
            del self.endpoint._sessions[self.conversation_id]

    def abort(self) -> None:
        """Reset the TCP connection (no close frame: the client sees 1006)."""
        self.record.close_code = 1006
        transport = self.ws.transport
        if transport is not None:
            transport.abort()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def send(self, message: Message) -> None:
        # Google sends its JSON in binary frames; genai reads either.
        await self.ws.send(json.dumps(message).encode())
        self.endpoint.update(lambda: self.record.sent.append(_elide_audio(message)))

    def _received(self, kind: str, detail: Any = None) -> None:
        self.endpoint.update(lambda: self.record.received.append((kind, detail)))

    async def _close(self, code: int, reason: str) -> None:
        self.endpoint.update(lambda: setattr(self.record, "close_code", code))
        with contextlib.suppress(websockets.ConnectionClosed):
            await self.ws.close(code, reason)

    def start_go_away(self, time_left_s: float, close: bool) -> None:
        self._spawn(self._go_away_after(0.0, time_left_s, close))

    async def _go_away_after(self, delay_s: float, time_left_s: float, close: bool) -> None:
        await asyncio.sleep(delay_s)
        await self._go_away(time_left_s, close)

    async def _go_away(self, time_left_s: float, close: bool) -> None:
        # timeLeft is a protobuf Duration in JSON: "50s", "1.5s".
        await self.send({"goAway": {"timeLeft": f"{time_left_s:g}s"}})
        if close:
            self._spawn(self._close_after(time_left_s))

    async def _close_after(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        await self._close(wire.CLOSE_INTERNAL, wire.DEADLINE)

    # ------------------------------------------------------------ input
    async def _on(self, message: wire.ClientMessage) -> None:
        if isinstance(message, wire.AudioIn):
            self._received("audio", (len(message.pcm), message.rate, message.field))
            await self._on_audio(message)
        elif isinstance(message, (wire.ActivityStart, wire.ActivityEnd)):
            self._received(type(message).__name__[0].lower() + type(message).__name__[1:])
            if self.setup.automatic_activity_detection:
                raise wire.Refusal(wire.CLOSE_INVALID, wire.EXPLICIT_ACTIVITY)
            if isinstance(message, wire.ActivityStart):
                self._in_activity = True
                self._segmenter.start_manual()
                await self._maybe_interrupt()
            elif self._in_activity:
                self._in_activity = False
                await self._user_spoke(self._segmenter.end_manual())
        elif isinstance(message, wire.AudioStreamEnd):
            self._received("audioStreamEnd")
            if self.setup.automatic_activity_detection:
                was_active = self._segmenter.active
                utterance = self._segmenter.force_end()
                if was_active:
                    await self._voice_activity("ACTIVITY_END")
                await self._user_spoke(utterance)
        elif isinstance(message, wire.TextIn):
            self._received("text", message.text)
            await self._user_typed(message.text)
        elif isinstance(message, wire.VideoIn):
            digest = hashlib.sha256(message.data).hexdigest()  # which image came
            self._received("video", (len(message.data), message.mime_type, message.field, digest))
            self.conversation.add("media", message.mime_type, FRAME_TOKENS)
        elif isinstance(message, wire.ClientContent):
            self._received("clientContent", (message.turns, message.turn_complete))
            await self._on_client_content(message)
        elif isinstance(message, wire.ToolResponse):
            self._received("toolResponse", message.responses)
            await self._on_tool_response(message)

    async def _on_audio(self, audio: wire.AudioIn) -> None:
        self._exchanged = True
        pcm = audio.pcm
        if audio.rate != INPUT_RATE:
            pcm = bytes(audiocore.resample(pcm, audio.rate, INPUT_RATE, input="s16", output="s16"))
        if not self.setup.automatic_activity_detection:
            if self._in_activity:
                self._segmenter.append_manual(pcm)
            return  # outside activityStart…activityEnd: not part of any turn
        was_active = self._segmenter.active
        event = self._segmenter.feed(pcm)
        self._audio_in_samples += len(pcm) // 2
        if event == "onset":
            await self._voice_activity("ACTIVITY_START")
            await self._maybe_interrupt()
        elif was_active and not self._segmenter.active:
            await self._voice_activity("ACTIVITY_END")  # an utterance, or noise dropped
            if isinstance(event, bytes):
                await self._user_spoke(event)

    async def _voice_activity(self, kind: str) -> None:
        if self.config.voice_activity:
            offset = f"{self._audio_in_samples / INPUT_RATE:.3f}s"  # a protobuf Duration
            await self.send({"voiceActivity": {"type": kind, "audioOffset": offset}})

    async def _on_client_content(self, content: wire.ClientContent) -> None:
        if self.setup.model == "gemini-3.1-flash-live-preview" and (
            self._exchanged or not self.setup.history_in_client_content
        ):
            # Its docs: client content only seeds the initial history.
            raise wire.invalid("client_content is only for the initial history on this model")
        waits = (
            self.family == "3.x" and self.setup.history_in_client_content and not self._exchanged
        )
        if waits or not content.turn_complete:
            # gemini-3.x answers its initial history only on the next input
            # (ADK sends a "." for that); other turns are context.
            for role, text in content.turns:
                self.conversation.add(role, text, text_tokens(text))
            return
        for role, text in content.turns[:-1]:
            self.conversation.add(role, text, text_tokens(text))
        if content.turns:
            role, text = content.turns[-1]
            if role == "user":
                await self._user_typed(text)
            else:
                self.conversation.add(role, text, text_tokens(text))

    async def _on_tool_response(self, response: wire.ToolResponse) -> None:
        for call_id, name, result in response.responses:
            expected = self._pending_calls.pop(call_id, None)
            if expected is None:
                raise wire.Refusal(
                    wire.CLOSE_POLICY, wire.NOT_FOUND, f"no pending call {call_id!r}"
                )
            if expected != name:
                raise wire.invalid(
                    f"function response {call_id!r} names {name!r}, not {expected!r}"
                )
            words = tool_result_words(name, result)
            self.conversation.add("tool", words, text_tokens(words))
            self._enqueue(lambda w=words: self._play(self._text_reply(w)))

    # ------------------------------------------------------------ turns
    async def _user_spoke(self, pcm: bytes | None) -> None:
        if not pcm:
            return
        self._exchanged = True
        heard, reply = spoken_reply(
            pcm,
            family=self.family,
            input_transcription=self.setup.input_transcription,
            output_transcription=self.setup.output_transcription,
            chunk_ms=self.config.audio_chunk_ms,
        )
        await self._user_turn(heard, audio_tokens(len(pcm) // 2, INPUT_RATE))
        self._enqueue(lambda: self._play(reply))

    async def _user_typed(self, text: str) -> None:
        self._exchanged = True
        await self._user_turn(text, text_tokens(text))
        call = tool_call_for(text, set(self.setup.functions))
        if call is not None:
            self._enqueue(lambda: self._call_tool(*call))
            return
        earlier = self.conversation.user_turns - 1
        note = f" ({earlier} earlier turns in this session)" if earlier > 0 else ""
        reply = self._text_reply(f"You said: {text.strip()}{note}")
        self._enqueue(lambda: self._play(reply))

    def _text_reply(self, words: str) -> Reply:
        return text_reply(
            words,
            family=self.family,
            output_transcription=self.setup.output_transcription,
            chunk_ms=self.config.audio_chunk_ms,
        )

    async def _user_turn(self, text: str, tokens: int) -> None:
        """Add a user turn to the context, as the context window allows."""
        self.conversation.add("user", text, tokens)
        limit = self.config.context_tokens or self.setup.info.context_tokens
        if self.setup.compression:
            # Defaults per the reference: compress at 80% of the context
            # window, down to half of the trigger.
            trigger = self.setup.trigger_tokens or limit * 4 // 5
            if self.conversation.tokens > trigger:
                self.conversation.slide(self.setup.target_tokens or trigger // 2)
        elif self.conversation.tokens > limit:
            # Assumed: REST's answer to too long an input, as a close.
            raise wire.Refusal(
                wire.CLOSE_INVALID,
                f"The input token count ({self.conversation.tokens}) exceeds the maximum number "
                f"of tokens allowed ({limit}).",
            )

    def _enqueue(self, job: Callable[[], Awaitable[None]]) -> None:
        self._jobs.put_nowait(job)

    async def _speaker(self) -> None:
        """Replies one after another; a barge-in cancels the current one and the queued."""
        while True:
            job = await self._jobs.get()
            self._current = asyncio.ensure_future(job())
            await asyncio.wait({self._current})
            if not self._current.cancelled() and self._current.exception() is not None:
                error = self._current.exception()
                if isinstance(error, wire.Refusal):
                    await self._close(error.code, error.reason)
                elif not isinstance(error, (_ReplyFailed, websockets.ConnectionClosed)):
                    log.error("local Gemini Live reply failed", exc_info=error)
                    await self._close(wire.CLOSE_INTERNAL, wire.INTERNAL)
                return
            self._current = None

    async def _maybe_interrupt(self) -> None:
        speaking = self._current is not None or time.monotonic() < self._speaking_until
        if not (speaking and self.setup.interrupts):
            return
        if self._current is not None:
            self._current.cancel()
        while not self._jobs.empty():
            self._jobs.get_nowait()
        self._speaking_until = 0.0
        await self.send(server_content(interrupted=True))
        if self._pending_calls:
            # "…occurs only in cases where the clients interrupt server turns."
            await self.send({"toolCallCancellation": {"ids": list(self._pending_calls)}})
            self._pending_calls.clear()
        await self.send(server_content(turnComplete=True))
        await self._resumable()

    async def _call_tool(self, name: str, args: dict[str, Any]) -> None:
        call_id = f"fc-{secrets.token_hex(6)}"
        self._pending_calls[call_id] = name
        await self._unresumable()
        await self.send(
            {"toolCall": {"functionCalls": [{"id": call_id, "name": name, "args": args}]}}
        )
        self.conversation.add("model", f"call {name}", text_tokens(json.dumps(args)))
        if self.family == "2.5":
            # 2.5 native-audio models end the turn after a tool call (ADK
            # waits for this before it runs the tool).
            await self.send(server_content(turnComplete=True))

    async def _play(self, reply: Reply) -> None:
        await self._unresumable()
        for message in reply.before:
            await self.send(message)
        failure = self.endpoint._take_failure()
        go_away = self.endpoint._take_go_away()
        speed = self.config.speed
        burst_s = self.config.burst_ms / 1000
        started = time.monotonic()
        sent_s = 0.0
        chunks = 0
        for message in reply.stream:
            await self.send(message)
            turn = message["serverContent"].get("modelTurn")
            if turn is None:
                continue
            if chunks == 0:
                self._speaking_until = time.monotonic() + reply.audio_samples / OUTPUT_RATE
                if go_away is not None:
                    await self._go_away(go_away, close=True)
            chunks += 1
            sent_s += self.config.audio_chunk_ms / 1000
            if failure is not None and chunks >= failure[0]:
                await self._fail(failure[1])
            ahead = started + (sent_s - burst_s) / speed - time.monotonic()
            if ahead > 0:  # bursts of burst_ms, faster than real time on average
                await asyncio.sleep(ahead)
        self.conversation.add("model", reply.words, audio_tokens(reply.audio_samples, OUTPUT_RATE))
        await self.send(server_content(generationComplete=True))
        prompt = self.conversation.tokens
        response = audio_tokens(reply.audio_samples, OUTPUT_RATE)
        await self.send({**server_content(turnComplete=True), **usage(prompt, response)})
        await self._resumable()

    async def _fail(self, how: str) -> None:
        if how == "stall":
            await asyncio.Future()  # until the connection ends (finish cancels it)
        if how == "abort":
            self.abort()
        elif how == "die":
            await self.endpoint._die()
        else:
            await self._close(wire.CLOSE_INTERNAL, wire.INTERNAL)
        raise _ReplyFailed(how)

    async def _unresumable(self) -> None:
        if self.setup.resumption and not self._generating:
            self._generating = True
            await self.send(resumption_update(None))

    async def _resumable(self) -> None:
        self._generating = False
        if self.setup.resumption and not self._pending_calls:
            handle = self.endpoint._issue_handle(self.conversation_id, self.conversation)
            await self.send(resumption_update(handle))


def _elide_audio(message: Message) -> Message:
    """The message as recorded: audio data replaced by its decoded length."""
    content = message.get("serverContent")
    if not content or "modelTurn" not in content:
        return message
    parts = [
        {
            "inlineData": {
                "mimeType": p["inlineData"]["mimeType"],
                "bytes": len(p["inlineData"]["data"]) * 3 // 4,
            }
        }
        if "inlineData" in p
        else p
        for p in content["modelTurn"]["parts"]
    ]
    return {**message, "serverContent": {**content, "modelTurn": {"parts": parts}}}
