"""The local OpenAI Realtime endpoint: a TLS WebSocket server on 127.0.0.1
that speaks the GA Realtime API's events, validates what it receives
(``wire.py``) and answers deterministically.

It understands no speech, as the offline model: a spoken turn (cut by an
energy detector — the service's server VAD — or by the client's commit) is
answered with the user's own 24 kHz audio back, exactly, and words that
describe it; a typed turn with "You said: …" and a short tone; a typed tool
cue (the offline model's, several in one turn) with function calls. Answers
go out in bursts faster than real time. Switches refuse keys (HTTP 401, or
close 3000), rate-limit the next answers, drop, stall or expire the
session mid-answer (``fail_next``), refuse the next handshakes (HTTP 503),
and end a session as the service does at its time limit.

It runs its own event loop in a thread; tests read ``records``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import urllib.parse
from http import HTTPStatus
from pathlib import Path
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from audiocore_server.audio.voice import VOICE_DBFS
from audiocore_server.offline.speech import EnergySegmenter
from tests.gemini_live.tls import SelfSignedCert, make_self_signed_cert
from tests.local_endpoint import ThreadedEndpoint

log = logging.getLogger(__name__)

DEFAULT_API_KEY = "sk-local-openai-realtime-key"
Event = dict[str, Any]


@dataclasses.dataclass
class EndpointConfig:
    api_keys: frozenset[str] = frozenset({DEFAULT_API_KEY})
    refuse_with: str = "http"  # a wrong key: "http" (401 at the handshake) or "close" (3000)
    audio_chunk_ms: int = 40  # audio per response.output_audio.delta
    burst_ms: int = 200  # answers go out in bursts of this much audio…
    speed: float = 2.0  # …at this multiple of real time
    vad_threshold_dbfs: float = VOICE_DBFS
    silence_ms: int = 500  # server VAD: silence that ends a turn (silence_duration_ms wins)
    prefix_ms: int = 300  # audio kept before speech (prefix_padding_ms wins)


@dataclasses.dataclass
class ConnectionRecord:
    """One connection as the endpoint saw it (read under the endpoint's lock)."""

    index: int
    path: str
    query: dict[str, list[str]]
    authorization_ok: bool
    headers: dict[str, str]  # the Authorization header left out
    session: Event = dataclasses.field(default_factory=dict)  # the effective configuration
    updates: list[Event] = dataclasses.field(default_factory=list)  # session.update as sent
    received: list[Event] = dataclasses.field(default_factory=list)  # audio replaced by its size
    sent: list[str] = dataclasses.field(default_factory=list)  # event types, in order
    errors: list[Event] = dataclasses.field(default_factory=list)  # error events sent
    truncations: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    audio_in: int = 0  # samples appended
    echoed: list[bytes] = dataclasses.field(default_factory=list)  # spoken turns' audio
    close_code: int | None = None

    def received_types(self) -> list[str]:
        return [e["type"] for e in self.received]


class _Segmenter:
    """The offline model's energy detector at 24 kHz: its durations are
    counted in 16 kHz samples, so each is given 3/2 as long."""

    def __init__(self, config: EndpointConfig, silence_ms: int, prefix_ms: int) -> None:
        self.vad_threshold_dbfs = config.vad_threshold_dbfs
        self.hangover_ms = silence_ms * 3 // 2
        self.preroll_ms = prefix_ms * 3 // 2
        self.min_speech_ms = 90
        self.max_utterance_s = 45.0
        self.detector = EnergySegmenter(self)


class LocalOpenAIRealtime(ThreadedEndpoint[ConnectionRecord]):
    """``with LocalOpenAIRealtime(cert_dir=tmp) as endpoint:`` →
    ``endpoint.base_url``, ``endpoint.ca_file``, ``endpoint.api_key``."""

    thread_name = "the local OpenAI Realtime endpoint"

    def __init__(
        self, config: EndpointConfig | None = None, *, cert_dir: Path, port: int = 0
    ) -> None:
        super().__init__()
        self.cert: SelfSignedCert = make_self_signed_cert(cert_dir)
        self.config = config or EndpointConfig()
        self.port = port
        self._server: Server | None = None
        self._sessions: set[_Session] = set()
        self.rate_limited_answers = 0  # the next this many answers fail: rate limit
        # The next answer fails after its first audio: "abort" resets the
        # connection, "stall" stops sending and keeps it open, "expire" ends
        # the session as at its time limit; "silent": it never starts (the
        # response asked for is ignored). None: no failure.
        self.fail_next_answer: str | None = None
        self.refused_connections = 0  # the next this many handshakes get HTTP 503
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}/v1"

    @property
    def ca_file(self) -> Path:
        return self.cert.cert_file

    @property
    def api_key(self) -> str:
        return sorted(self.config.api_keys)[0]

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}"

    async def _listen(self) -> None:
        self._server = await serve(
            self._serve,
            "127.0.0.1",
            self.port,
            ssl=self.cert.server_context(),
            process_request=self._handshake,
            max_size=16 * 1024 * 1024,
            compression=None,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        for session in list(self._sessions):
            session.ws.transport.abort()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # ------------------------------------------------------------ steering
    def expire_sessions(self) -> None:
        """Every session ends as at the service's time limit: ``error``
        session_expired, then close 1001."""
        assert self._loop is not None
        for session in list(self._sessions):
            asyncio.run_coroutine_threadsafe(session.expire(), self._loop).result(10)

    def fail_next(self, how: str) -> None:
        """The next answer fails after its first audio (``fail_next_answer``)."""
        if how not in ("abort", "stall", "expire", "silent"):
            raise ValueError(f'how: expected "abort", "stall", "expire" or "silent", got {how!r}')
        self.fail_next_answer = how

    def abort_sessions(self) -> None:
        """Every connection is reset (no close frame): the service is gone
        for them, and takes their conversations along."""
        assert self._loop is not None

        async def abort() -> None:
            for session in list(self._sessions):
                session.ws.transport.abort()

        asyncio.run_coroutine_threadsafe(abort(), self._loop).result(10)

    # ------------------------------------------------------------ records
    def _describe(self, record: ConnectionRecord) -> object:
        return (record.index, record.received_types()[-6:], record.sent[-6:])

    # ------------------------------------------------------------ connections
    def _handshake(self, connection: ServerConnection, request: Request) -> Response | None:
        path, _, query = request.path.partition("?")
        if path != "/v1/realtime":
            return connection.respond(HTTPStatus.NOT_FOUND, "Not Found\n")
        if self.refused_connections > 0:
            self.refused_connections -= 1
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "Service Unavailable\n")
        if not urllib.parse.parse_qs(query).get("model"):
            return connection.respond(HTTPStatus.BAD_REQUEST, "missing model\n")
        if not self._authorized(request) and self.config.refuse_with == "http":
            response = connection.respond(HTTPStatus.UNAUTHORIZED, _INVALID_KEY_BODY)
            response.headers["Content-Type"] = "application/json"
            return response
        return None

    def _authorized(self, request: Request) -> bool:
        given = request.headers.get("Authorization", "")
        return given.removeprefix("Bearer ") in self.config.api_keys

    async def _serve(self, ws: ServerConnection) -> None:
        path, _, query = ws.request.path.partition("?")
        record = ConnectionRecord(
            index=0,
            path=path,
            query=urllib.parse.parse_qs(query),
            authorization_ok=self._authorized(ws.request),
            headers={
                k.lower(): v
                for k, v in ws.request.headers.raw_items()
                if k.lower() != "authorization"
            },
        )

        self.add_record(record)
        if not record.authorization_ok:
            await ws.close(3000, "invalid_request_error.invalid_api_key")
            self.update(lambda: setattr(record, "close_code", 3000))
            return
        session = _Session(self, ws, record)
        self._sessions.add(session)
        try:
            await session.run()
        except ConnectionClosed:
            pass
        finally:
            self._sessions.discard(session)
            session.stop()
            code = ws.close_code if ws.close_code is not None else 1006
            self.update(lambda: setattr(record, "close_code", code))


_INVALID_KEY_BODY = json.dumps(
    {
        "error": {
            "message": "Incorrect API key provided.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
            "param": None,
        }
    }
)

# The answer part of this module is in conversation.py.
from .conversation import _Session  # noqa: E402
