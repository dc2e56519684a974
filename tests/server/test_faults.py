"""Faults, each on the real parts: uvicorn on 127.0.0.1, ADK's runner, the
SQLite session store (PostgreSQL where the fault is PostgreSQL's), and a
model that is a real ADK ``BaseLlm`` (the offline model, which fails or
stalls mid-answer on a cue).

Every wait is on an event or a condition polled against a deadline; no
fixed sleep decides a result. The figures (how long a client that stops
reading holds on, what it costs in memory) are in benchmarks/README.md
("Faults").
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import json
import os
import shutil
import signal
import socket
import sqlite3
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
import uvicorn
import websockets
from google.adk.events import Event
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from postgres_helpers import allow_connections, postgres_url, refuse_connections  # noqa: F401
from server_helpers import Collector, assert_clean, check_padded, open_ws, say, server_process

from audiocore_server import Settings, create_app
from audiocore_server.live.model_events import answering
from audiocore_server.models.live_request import manual_turns
from audiocore_server.offline.model import (
    OfflineLiveConnection,
    OfflineLiveModel,
    _audio_response,
    _declared_tools,
    audio_cue,
)

_T = TypeVar("_T")

# ---------------------------------------------------------------- a model that fails

FAIL_CUE = "fail mid-answer"
STALL_CUE = "stall mid-answer"
LONG_CUE = "answer at length"
LATE_END_CUE = "end late"
_FAIL = LlmResponse(error_code="TEST_FAIL")  # a marker in the response queue
# Lets the model end its LATE_END_CUE answer (set from the test's thread).
_LATE_END = threading.Event()


def _half_an_answer(text: str) -> list[LlmResponse]:
    """The model has begun: some text and a little audio, no turn end."""
    said = types.Content(role="model", parts=[types.Part(text=f"Starting on: {text}")])
    return [LlmResponse(content=said), _audio_response(audio_cue(0.1))]


class FaultyLiveConnection(OfflineLiveConnection):
    """The offline model's connection; on a cue, the answer breaks off."""

    async def send_content(self, content: types.Content) -> None:
        text = " ".join(p.text for p in content.parts or [] if p.text)
        if FAIL_CUE in text:
            await self._emit_all([*_half_an_answer(text), _FAIL])
        elif STALL_CUE in text:
            await self._emit_all(_half_an_answer(text))  # and then nothing, ever
        elif LATE_END_CUE in text:
            # The whole answer, but its turn_complete only when the test says:
            # as a loaded server's runner hands it over late.
            await self._emit_all(_half_an_answer(text))
            await asyncio.to_thread(_LATE_END.wait, 30)
            await self._emit(LlmResponse(turn_complete=True))
        elif LONG_CUE in text:
            # 20 s of audio in 100 ms responses, as a live model streams it.
            said = types.Content(role="model", parts=[types.Part(text=f"You said: {text}")])
            await self._emit(LlmResponse(content=said))
            for _ in range(200):
                await self._emit(_audio_response(audio_cue(0.1)))
            await self._emit(LlmResponse(turn_complete=True))
        else:
            await super().send_content(content)

    async def receive(self) -> AsyncGenerator[LlmResponse, None]:
        async for response in super().receive():
            if response is _FAIL:
                raise ConnectionResetError("the model's connection broke mid-answer")
            yield response


class FaultyLiveModel(OfflineLiveModel):
    @contextlib.asynccontextmanager
    async def _connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
        connection = FaultyLiveConnection(
            self, _declared_tools(llm_request), manual=manual_turns(llm_request)
        )
        try:
            yield connection
        finally:
            await connection.close()


@pytest.fixture
def faulty_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Apps created in the test run on ``FaultyLiveModel``."""
    monkeypatch.setattr("audiocore_server.agent.definition.OfflineLiveModel", FaultyLiveModel)


# ---------------------------------------------------------------- a server in this process


@dataclasses.dataclass
class Served:
    """The app on real uvicorn in a thread, with its event loop at hand."""

    base: str  # http://127.0.0.1:port
    app: Any
    loop: asyncio.AbstractEventLoop
    data_dir: Path

    def call(self, fn: Callable[[], Awaitable[_T]]) -> _T:
        """``fn()`` run on the server's loop (where its objects live)."""
        return asyncio.run_coroutine_threadsafe(_awaited(fn), self.loop).result(10)

    @property
    def runtime(self) -> Any:
        return self.app.state.runtime


async def _awaited(fn: Callable[[], Awaitable[_T]]) -> _T:
    return await fn()


@contextlib.contextmanager
def serving(settings: Settings) -> Iterator[Served]:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        log_level="warning",
        ws_max_size=settings.max_message_bytes,
        ws_per_message_deflate=False,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(
        target=loop.run_until_complete, args=(server.serve(sockets=[sock]),), daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        threading.Event().wait(0.01)
    try:
        yield Served(f"http://127.0.0.1:{sock.getsockname()[1]}", app, loop, settings.data_dir)
    finally:
        server.should_exit = True
        thread.join(20)
        loop.close()
        sock.close()


def health(base: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


async def until(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> float:
    """Poll ``condition`` (in a thread: it may do blocking I/O) until it
    holds; returns how long that took."""
    started = time.monotonic()
    while not await asyncio.to_thread(condition):
        assert time.monotonic() - started < timeout, f"not {what} within {timeout} s"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


def _tone_s16(seconds: float, rate: int = 16_000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return np.rint(0.3 * 32767 * np.sin(2 * np.pi * 330 * t)).astype("<i2").tobytes()


@pytest.fixture
def fault_settings(settings: Settings) -> Settings:
    return replace(settings, allowed_hosts=(), model_stall_timeout_s=0.5, tool_grace_s=0.5)


# ---------------------------------------------------------------- 1. the client vanishes


def _leases_held(data_dir: Path) -> int:
    with contextlib.closing(sqlite3.connect(data_dir / "leases.db")) as db:
        return int(db.execute("SELECT count(*) FROM leases").fetchone()[0])


def _what_is_left(served: Served, tasks_before: set[asyncio.Task[Any]]) -> dict[str, int]:
    async def on_the_loop() -> dict[str, int]:
        runtime = served.runtime
        mine = asyncio.current_task()
        return {
            "sockets": len(served.app.state.connections),
            "claims": len(runtime.sessions.claims),
            "live runs": runtime.agents.live_runs,
            "tasks": len(asyncio.all_tasks() - tasks_before - {mine}),
        }

    left = served.call(on_the_loop)
    left["leases"] = _leases_held(served.data_dir)
    return left


def _connection_parts(served: Served) -> list[weakref.ref[Any]]:
    """Weak references to the one live connection and its queues."""

    async def parts() -> list[weakref.ref[Any]]:
        (connection,) = served.app.state.connections
        conversation = connection.conversation
        parts = [connection, connection.queue]
        if conversation is not None:  # each part of the conversation
            parts += [getattr(conversation, f.name) for f in dataclasses.fields(conversation)]
            parts = [p for p in parts if not isinstance(p, str)]
        return [weakref.ref(p) for p in parts]

    return served.call(parts)


@pytest.mark.parametrize("when", ["while the model answers", "while its audio flows"])
def test_a_client_that_vanishes_leaves_nothing_behind(
    fault_settings: Settings, faulty_model: None, when: str
) -> None:
    async def scenario(served: Served) -> None:
        tasks_before = served.call(_all_tasks)
        client, _ = await open_ws(served.base, input={"sampleRate": 16000, "format": "s16"})
        if when == "while the model answers":
            await client.ws.send(json.dumps({"type": "text", "text": LONG_CUE}))
            await client.wait_for("data-pcm")
        else:
            tone = _tone_s16(0.4)
            for i in range(0, len(tone), 640):  # the first 0.4 s of a turn, then gone
                await client.ws.send(tone[i : i + 640])
            await until(lambda: _model_has_audio(served), "audio at the model")
        parts = _connection_parts(served)
        client.ws.transport.abort()  # no close frame: the peer is simply gone
        await client.task
        await until(
            lambda: not any(_what_is_left(served, tasks_before).values()),
            f"nothing left: {_what_is_left(served, tasks_before)}",
        )
        served.call(_collect)
        assert [part() for part in parts] == [None] * len(parts)  # queues and all: gone
        status, body = health(served.base)
        assert status == 200 and body["connections"] == 0 and body["liveRuns"] == 0

    with serving(fault_settings) as served:
        asyncio.run(scenario(served))


async def _all_tasks() -> set[asyncio.Task[Any]]:
    return asyncio.all_tasks()


async def _collect() -> None:
    gc.collect()


def _model_has_audio(served: Served) -> bool:
    async def sent() -> bool:
        (connection,) = served.app.state.connections
        return connection.conversation is not None and connection.conversation.mic.sent

    return served.call(sent)


# ---------------------------------------------------------------- 2. the model fails


@pytest.mark.parametrize("cue", [FAIL_CUE, STALL_CUE])
def test_a_model_that_fails_or_stalls_mid_answer_ends_the_socket_and_keeps_the_session(
    fault_settings: Settings, faulty_model: None, cue: str
) -> None:
    async def scenario(base: str) -> None:
        client, session = await open_ws(base)
        session_id = session["data"]["sessionId"]
        await client.ws.send(json.dumps({"type": "text", "text": cue}))
        await client.wait_for("text-delta")  # the model had begun its answer
        await asyncio.wait_for(client.task, 20)  # and the server closed the socket
        assert client.ws.close_code == 1011
        error = client.messages[-1][1]
        assert error["type"] == "error"
        if cue == STALL_CUE:
            assert "stopped answering for 0.5 s" in error["errorText"]
        else:
            assert "ConnectionResetError" in error["errorText"]
            assert "broke mid-answer" not in error["errorText"]  # the class only
        again, resumed = await open_ws(base, sessionId=session_id)
        assert resumed["data"]["resumed"] and resumed["data"]["sessionId"] == session_id
        assert {"role": "user", "text": cue} in resumed["data"]["history"]
        assert (await say(again, "still here?", 1)).startswith("You said: still here? (")
        await again.close()
        await until(lambda: health(base)[1]["liveRuns"] == 0, "no live run left")

    with serving(fault_settings) as served:
        asyncio.run(scenario(served.base))


def test_a_model_waiting_for_a_tool_is_not_stalled() -> None:
    """The stall timer runs only while the model owes an answer: not while
    a tool call waits for its answer (an approval may take the user a
    minute)."""
    said = types.Content(role="model", parts=[types.Part(text="Let me see")])
    call = types.Content(
        role="model", parts=[types.Part(function_call=types.FunctionCall(name="pay", args={}))]
    )
    assert answering(Event(author="voice_agent", content=said))
    assert not answering(Event(author="voice_agent", content=call))
    assert not answering(Event(author="voice_agent", turn_complete=True))
    assert not answering(Event(author="voice_agent", interrupted=True, content=said))
    assert not answering(Event(author="user", content=said))
    # A tool's answer went to the model: it owes the rest of the turn.
    answer = types.Content(
        role="user",
        parts=[types.Part(function_response=types.FunctionResponse(name="pay", response={}))],
    )
    assert answering(Event(author="voice_agent", content=answer))
    # …but not after a transfer: the next agent speaks when the user does.
    moved = Event(author="voice_agent", content=answer)
    moved.actions.transfer_to_agent = "billing"
    assert not answering(moved)


def test_a_turn_that_ends_after_its_audio_ran_dry_does_not_hold_the_next(
    settings: Settings, faulty_model: None
) -> None:
    """The model's turn_complete comes after the client played the turn's
    audio and the pacer concealed the stall: the concealment's fade-out is
    owed, and the next turn's audio and finish come after it (they waited
    for good: the jitter buffer holds them behind a frame never ready)."""
    frame = 960  # 40 ms at 24 kHz
    _LATE_END.clear()

    async def scenario(base: str) -> None:
        client, _ = await open_ws(base, output={"sampleRate": 24_000, "binary": True})
        await client.ws.send(json.dumps({"type": "text", "text": LATE_END_CUE}))
        # The cue's 100 ms: two whole frames, then its last 20 ms leave in a
        # frame filled by concealment once the client is about to run dry.
        # The pacer goes on concealing, a frame each 40 ms, until the model
        # resumes: how many went before the test lets it is not the point.
        await until(lambda: len(client.binary) >= 3, "the stall concealed")
        stalled = np.frombuffer(client.binary[2][1], "<i2")
        assert stalled[len(audio_cue(0.1)) // 2 - 2 * frame :].any()  # not the padded tail
        _LATE_END.set()
        await client.wait_for("finish")
        assert (await say(client, "and now?", 2)).startswith("You said: and now?")
        # The socket's order splits the turns: the stalled turn's frames and
        # its fade-out arrived before its finish, the next turn's after it.
        ended = next(t for t, m in client.messages if m["type"] == "finish")
        before = [pcm for t, pcm in client.binary if t <= ended]
        after = [pcm for t, pcm in client.binary if t > ended]
        assert len(before) >= 2 + 1 + 1  # two frames, concealment, the fade-out
        assert len(after) == 4
        cue = audio_cue()
        assert check_padded(b"".join(after), len(cue) // 2, frame).tobytes() == cue
        await client.close()

    with serving(replace(settings, allowed_hosts=())) as served:
        asyncio.run(scenario(served.base))


# ---------------------------------------------------------------- 3. a client that never reads


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))
    return int(kib) / 1024


def test_a_client_that_never_reads_is_closed_with_1008_and_memory_stays_bounded(
    tmp_path: Path,
) -> None:
    """The client reads ``data-session`` and nothing more while the model
    answers at length. Sends block only once the socket's buffers (the
    kernel's, the client's) are full; ``send_timeout_s`` after that, the
    server closes with 1008. Set FAULTS_SEND_TIMEOUT_S=10 for the
    default's figures (benchmarks/README.md, "Faults")."""
    send_timeout = float(os.environ.get("FAULTS_SEND_TIMEOUT_S", "2"))
    env = {"AUDIOCORE_SEND_TIMEOUT_S": str(send_timeout)}
    log = tmp_path / "audiocore_server.log"

    async def scenario(base: str, pid: int) -> None:
        ws = await websockets.connect(base.replace("http", "ws") + "/ws", max_size=None)
        await ws.send(json.dumps({"type": "start", "turnDetection": "manual"}))
        assert json.loads(await ws.recv())["type"] == "data-session"
        rss_before = _rss_mb(pid)
        # One 28 s push-to-talk turn at ten times real time (faster, and
        # the model's request queue drops audio); the echo is the answer.
        turn = _tone_s16(28.0)
        await ws.send(json.dumps({"type": "activity_start"}))
        for i in range(0, len(turn), 3200):
            await ws.send(turn[i : i + 3200])
            await asyncio.sleep(0.01)
        await ws.send(json.dumps({"type": "activity_end"}))
        peak = rss_before

        def closed() -> bool:
            nonlocal peak
            peak = max(peak, _rss_mb(pid))
            return health(base)[1]["connections"] == 0

        waited = await until(closed, "the client dropped", timeout=150)
        held = 0
        with contextlib.suppress(websockets.ConnectionClosed):
            async for _ in ws:  # what the buffers held, then the close
                held += 1
        print(
            f"\nnever-reading client: closed {waited:.1f} s after it stopped reading "
            f"(send_timeout_s {send_timeout:g}); {held} messages were still in the buffers; "
            f"server RSS {rss_before:.0f} MB -> peak {peak:.0f} MB (+{peak - rss_before:.1f}); "
            f"close {ws.close_code} {ws.close_reason!r}"
        )
        # Nothing more reaches a client that does not read: the server
        # decided 1008 and dropped the connection (the client sees 1006).
        assert "closing with 1008 (client is not reading (send timed out))" in log.read_text()
        assert ws.close_code in (1006, 1008), (ws.close_code, ws.close_reason)
        # The buffers' worth of audio (well under a minute), then the timeout.
        assert waited < 30 + send_timeout
        assert peak - rss_before < 50

    with server_process(tmp_path, log, env=env) as (base, proc):
        asyncio.run(scenario(base, proc.pid))
    assert_clean(log)


# ---------------------------------------------------------------- 5. the database is lost


def _delete_session_files(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):  # as `rm sessions.db*` would
        db.with_name(db.name + suffix).unlink(missing_ok=True)


async def _started(base: str) -> Collector:
    """A socket that has sent its ``start`` (and waits for nothing)."""
    ws = await websockets.connect(base.replace("http", "ws") + "/ws", max_size=None)
    await ws.send(json.dumps({"type": "start"}))
    return Collector(ws)


async def _closed_with_an_error(client: Any) -> str:
    await asyncio.wait_for(client.task, 20)
    assert client.ws.close_code == 1011
    error = client.messages[-1][1]
    assert error["type"] == "error"
    return str(error["errorText"])


@pytest.mark.parametrize("comeback", ["restored", "created anew"])
def test_a_deleted_session_file_fails_loudly_and_works_again_once_back(
    fault_settings: Settings, comeback: str
) -> None:
    """The open connection kept writing to the deleted file: every turn
    since then was lost at the next start, without a word."""
    db = fault_settings.session_db_path
    backup = db.with_name("backup.db")

    async def scenario(base: str) -> None:
        client, session = await open_ws(base)
        session_id = session["data"]["sessionId"]
        await say(client, "before", 1)
        with (
            contextlib.closing(sqlite3.connect(db)) as live,
            contextlib.closing(sqlite3.connect(backup)) as copy,
        ):
            live.backup(copy)
        _delete_session_files(db)
        status, body = health(base)
        assert status == 503 and "gone" in body["database"]
        await client.ws.send(json.dumps({"type": "text", "text": "lost?"}))
        assert "SessionFileLost" in await _closed_with_an_error(client)
        newcomer = await _started(base)  # no session can be opened either
        assert "SessionFileLost" in await _closed_with_an_error(newcomer)

        if comeback == "restored":
            shutil.copy(backup, db)
        else:
            sqlite3.connect(db).close()  # an empty file: the schema is made again
        assert health(base)[0] == 200
        again, resumed = await open_ws(base, sessionId=session_id)
        history = resumed["data"]["history"]
        if comeback == "restored":
            assert resumed["data"]["resumed"] and {"role": "user", "text": "before"} in history
            assert {"role": "user", "text": "lost?"} not in history
        else:
            assert not resumed["data"]["resumed"] and history == []
        await say(again, "after", 1)
        await again.close()
        # What was said since is in the file on disk, not in a deleted one.
        with contextlib.closing(sqlite3.connect(db)) as on_disk:
            rows = on_disk.execute("SELECT event_data FROM events").fetchall()
        assert any('"after"' in row[0] for row in rows)

    with serving(fault_settings) as served:
        asyncio.run(scenario(served.base))


# ---------------------------------------------------------------- 4. the server restarts


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "kill -9"])
def test_a_restarted_server_resumes_the_sessions(tmp_path: Path, stop: signal.Signals) -> None:
    logs = tmp_path / "first.log", tmp_path / "second.log"

    async def before(base: str, proc: Any) -> tuple[str, Collector]:
        client, session = await open_ws(base)
        await say(client, "before the restart", 1)
        proc.send_signal(stop)
        await asyncio.wait_for(client.task, 30)  # the server ended the socket
        # uvicorn ends a graceful shutdown by re-raising the signal.
        assert await asyncio.to_thread(proc.wait, 30) == -stop
        return session["data"]["sessionId"], client

    async def after(base: str, session_id: str) -> None:
        client, resumed = await open_ws(base, sessionId=session_id)
        assert resumed["data"]["resumed"] and resumed["data"]["sessionId"] == session_id
        assert {"role": "user", "text": "before the restart"} in resumed["data"]["history"]
        answer = await say(client, "after", 1)
        assert answer.startswith("You said: after ("), answer  # (n earlier turns …)
        await client.close()

    with server_process(tmp_path, logs[0]) as (base, proc):
        session_id, client = asyncio.run(before(base, proc))
    # SIGTERM: uvicorn's "service restart" close; kill -9: the peer is simply gone.
    assert client.ws.close_code == (1012 if stop == signal.SIGTERM else 1006)
    with server_process(tmp_path, logs[1]) as (base, _):
        asyncio.run(after(base, session_id))
    if stop == signal.SIGTERM:
        assert "Application shutdown complete" in logs[0].read_text()
    assert_clean(*(logs if stop == signal.SIGTERM else logs[1:]))


def test_an_unreachable_postgresql_fails_loudly_and_works_again_once_back(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    log = tmp_path / "audiocore_server.log"

    async def scenario(base: str) -> None:
        client, session = await open_ws(base)
        session_id = session["data"]["sessionId"]
        await say(client, "before", 1)
        await refuse_connections(postgres_url)
        status, body = await asyncio.to_thread(health, base)
        assert status == 503 and "database" in body
        with contextlib.suppress(websockets.ConnectionClosed):  # it may be over already
            await client.ws.send(json.dumps({"type": "text", "text": "lost?"}))
        # The turn's write fails (1011), or first the session's lease, which
        # can no longer be renewed (1008): either way the client is told.
        await asyncio.wait_for(client.task, 30)
        assert client.ws.close_code in (1008, 1011)
        assert client.messages[-1][1]["type"] == "error"

        await allow_connections(postgres_url)
        await until(lambda: health(base)[0] == 200, "the database back")
        again, resumed = await open_ws(base, sessionId=session_id)
        assert resumed["data"]["resumed"]
        assert {"role": "user", "text": "before"} in resumed["data"]["history"]
        assert (await say(again, "after", 1)).startswith("You said: after (")
        await again.close()

    env = {"AUDIOCORE_DATABASE_URL": postgres_url}
    with server_process(tmp_path, log, env=env) as (base, _):
        asyncio.run(scenario(base))
