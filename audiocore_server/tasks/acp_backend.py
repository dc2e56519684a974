"""Tasks done by an external ACP agent (``--task-backend acp``).

The agent is a process the server runs (``--acp-command``), spoken to over
its stdin/stdout with the Agent Client Protocol (the ``agent-client-protocol``
package). ``AgentProcess`` starts it lazily, on the first task — no task, no
process — initialises it once (protocol version and capabilities: fs only
with ``--acp-fs``, never a terminal), logs its stderr, and after it dies
starts a fresh one for the next task, waiting longer after each death in a
row (``acp_restart_backoff_s``, doubled, at most ``MAX_BACKOFF_S``).

``AcpBackend.run`` is ``Backend.run``'s twin: each owner has one ACP
session per agent and project (``acp_sessions.py``), created once and its
id kept in the owner's task ledger, working in the project's directory
(``projects.py``); a later task — or the same owner after a restart —
continues it (``session/resume``, else ``session/load``), else a new
session's first prompt recalls the earlier results. Every session is
offered the coordination tools over MCP (``coordination.py``), served
from the first task of an agent that takes MCP over HTTP. The manager's FIFO already sends one
prompt at a time per owner. A cancel sends ``session/cancel`` and waits
(bounded) for the ``cancelled`` stop reason; one that comes later holds the
session's next prompt until it has come (``_settled``); a prompt with no answer within
``acp_prompt_timeout_s`` fails its task; an agent that dies fails the task
it was working on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shlex
import time
from pathlib import Path
from typing import Any, cast

import pydantic
from acp import PROTOCOL_VERSION, Client, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    FileSystemCapabilities,
    HttpMcpServer,
    Implementation,
)
from acp.transports import spawn_stdio_transport

from ..settings import Settings
from .acp_client import AcpClient, AgentFiles
from .acp_permissions import PermissionDesk
from .acp_progress import ORGANIZING, STARTING, PromptRun
from .acp_sessions import OwnerSessions, UnusableSession, takes_http_mcp
from .acp_status import AgentStatus, ask
from .acp_stdio import SLICE_BYTES, AgentStdout, StderrLog
from .adk_backend import MAX_FAILURE_CHARS, TASK_FILES_DIR, BackendOutcome, Progress, TaskFiles
from .coordination import Binding, CoordinationServer, Coordinator
from .envelope import envelope, split_answer
from .ledger import TaskStore
from .projects import ProjectError, project_dir
from .records import MAX_INLINE_CHARS, TaskRecord, clip
from .redact import redact, screened

MAX_BACKOFF_S = 30.0
INIT_TIMEOUT_S = 30.0
EXIT_WAIT_S = 2.0  # after its stdout closed, how long the process has to be reaped

log = logging.getLogger(__name__)


class AgentUnavailable(RuntimeError):
    """The agent could not be started or initialised, or gave no usable
    session (the message says why)."""


class AgentProcess:
    """The one agent process, started when first needed."""

    def __init__(self, settings: Settings, client: AcpClient, cwd: Path) -> None:
        assert settings.acp_command
        self.command = shlex.split(settings.acp_command)
        self.cwd = cwd
        self._client = client
        self._fs = settings.acp_fs
        self._backoff_s = settings.acp_restart_backoff_s
        # Its own bound, not the prompt's: an interpreter that imports its
        # packages takes seconds to start on a loaded machine, whatever a
        # prompt is allowed.
        self._init_timeout_s = INIT_TIMEOUT_S
        self._lock = asyncio.Lock()
        self._stack: contextlib.AsyncExitStack | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._watchers: list[asyncio.Task[None]] = []
        self.conn: ClientSideConnection | None = None
        self.capabilities = AgentCapabilities()
        self.generation = 0  # one more for every process started
        self._deaths = 0  # in a row, without an answered prompt between
        self._died_at = 0.0
        self._broken = False  # its connection failed: replaced, even if it runs
        self.failure: str | None = None  # why we ended it, when we did

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def ensure(self) -> ClientSideConnection:
        """The connection to a live, initialised agent; started if need be."""
        async with self._lock:
            if self.conn is not None:
                if self.alive and not self._broken:
                    return self.conn
                self._died()  # since the last task: it counts for the backoff
            await self._stop()
            if self._deaths:
                wait = min(MAX_BACKOFF_S, self._backoff_s * 2 ** (self._deaths - 1))
                await asyncio.sleep(max(0.0, self._died_at + wait - time.monotonic()))
            return await self._start()

    def lost(self) -> None:
        """Its connection failed (closed stdout, garbage): the next task
        starts a fresh process, whether or not this one still runs."""
        self._broken = True

    def answered(self) -> None:
        """A prompt was answered: the agent works, the backoff starts over."""
        self._deaths = 0

    async def exit_code(self) -> int | None:
        """The code the process exited with (waited for briefly), None if it runs."""
        process = self._process
        if process is None:
            return None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), EXIT_WAIT_S)
        return process.returncode

    async def _start(self) -> ClientSideConnection:
        stack = contextlib.AsyncExitStack()
        # Our own settings (an API key, token secrets) are not the agent's.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AUDIOCORE_")}
        try:
            stdout, stdin, process = await stack.enter_async_context(
                spawn_stdio_transport(
                    self.command[0],
                    *self.command[1:],
                    cwd=self.cwd,
                    env=env,
                    # The pipes' buffers: what an agent writes past them waits
                    # until we read it (``acp_stdio.py`` reads a slice at a time).
                    limit=SLICE_BYTES,
                )
            )
        except OSError as exc:
            await stack.aclose()
            self._died()
            raise AgentUnavailable(
                f"the ACP agent {self.command[0]!r} could not be started ({exc.strerror or exc})"
            ) from None
        self.failure = None
        conn = ClientSideConnection(
            # Not every method of the protocol: the terminal's are missing on
            # purpose, and answered "method not found".
            cast(Client, self._client),
            AgentStdout(stdout, stdin, lambda why: self._end(process, why)),
        )
        stack.push_async_callback(conn.close)
        self._stack, self._process, self.conn = stack, process, conn
        self._broken = False
        self.generation += 1
        if process.stderr is not None:
            self._watchers.append(asyncio.create_task(StderrLog().follow(process.stderr)))
        self._watchers.append(asyncio.create_task(self._watch(process, self.generation)))
        try:
            response = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(
                        fs=FileSystemCapabilities(
                            read_text_file=self._fs, write_text_file=self._fs
                        ),
                        terminal=False,
                    ),
                    client_info=Implementation(name="audiocore", version="1"),
                ),
                self._init_timeout_s,
            )
        except (
            asyncio.TimeoutError,
            ConnectionError,
            RequestError,
            pydantic.ValidationError,
        ) as exc:
            # Stopped, not kept half-started: the next task starts afresh.
            await self._stop()
            self._died()
            if isinstance(exc, asyncio.TimeoutError):
                why = f"no answer within {self._init_timeout_s:g} s"
            elif isinstance(exc, pydantic.ValidationError):
                why = out_of_protocol(exc)
            else:
                why = str(exc) or type(exc).__name__
            raise AgentUnavailable(f"the ACP agent did not initialise ({why})") from None
        if response.protocol_version != PROTOCOL_VERSION:
            await self._stop()
            self._died()
            raise AgentUnavailable(
                f"the ACP agent speaks protocol version {response.protocol_version}, "
                f"this server {PROTOCOL_VERSION}"
            )
        self.capabilities = response.agent_capabilities or AgentCapabilities()
        log.info(
            "ACP agent started (pid %s, %s): loadSession %s, MCP over HTTP %s%s",
            process.pid,
            shlex.join(self.command),
            bool(self.capabilities.load_session),
            takes_http_mcp(self.capabilities),
            "" if takes_http_mcp(self.capabilities) else " (no coordination tools offered)",
        )
        return conn

    def _died(self) -> None:
        self._deaths += 1
        self._died_at = time.monotonic()

    async def _watch(self, process: asyncio.subprocess.Process, generation: int) -> None:
        # Only told: the next ``ensure`` sees it dead, counts it and restarts.
        code = await process.wait()
        if generation == self.generation:
            log.warning("the ACP agent (pid %s) exited with code %s", process.pid, code)

    def _end(self, process: asyncio.subprocess.Process, why: str) -> None:
        """End the agent for ``why`` (its task fails saying so)."""
        if self.failure is None:
            self.failure = why
            log.error("%s (pid %s)", why, process.pid)
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        self._broken = True

    async def _stop(self) -> None:
        stack, self._stack = self._stack, None
        self.conn = None
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()  # stdin closed, then terminate, then kill
        process, self._process = self._process, None
        for watcher in self._watchers:
            watcher.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        self._watchers.clear()
        if process is not None:
            await _drain(process)

    async def close(self) -> None:
        async with self._lock:
            self.generation += 1  # its exit is ours: not a death
            await self._stop()


class AcpBackend:
    def __init__(
        self,
        settings: Settings,
        store: TaskStore,
        permissions: PermissionDesk,
        coordinator: Coordinator | None = None,
    ) -> None:
        self.files = TaskFiles(settings.data_dir / TASK_FILES_DIR)
        self.cwd = (settings.acp_cwd or self.files.directory).resolve()
        self.projects_root = settings.acp_projects_root
        self.fs = settings.acp_fs
        self.store = store
        self.permissions = permissions
        self.client = AcpClient(AgentFiles(self.cwd, settings.acp_fs), permissions)
        self.process = AgentProcess(settings, self.client, self.cwd)
        self.prompt_timeout_s = settings.acp_prompt_timeout_s
        self.status_timeout_s = settings.acp_status_timeout_s
        # Within the manager's grace, so the run ends before it is cancelled.
        self.cancel_wait_s = settings.task_cancel_grace_s / 2
        self.max_result_chars = settings.max_task_result_chars
        self.sessions = OwnerSessions(store, self.process.command, self._offer)
        # The coordination tools (``coordination.py``), served from the first
        # task on; (owner, project) -> the task prompting in that session.
        self.coordination = CoordinationServer(self.sessions.sessions, self._asking)
        self.coordination.coordinator = coordinator
        self.prompting: dict[Binding, str] = {}
        # Session id -> a cancelled prompt the agent has not yet ended: the
        # session takes no other prompt until it has (``_settled``).
        self.unsettled: dict[str, asyncio.Task[Any]] = {}

    def _offer(self, owner: str, project: str | None) -> list[HttpMcpServer]:
        return self.coordination.offer(owner, project)

    def _asking(self, binding: Binding) -> str | None:
        return self.prompting.get(binding)

    def cwd_of(self, record: TaskRecord) -> Path:
        """Where ``record``'s session works: its project's directory, else ``cwd``."""
        if record.project is None:
            return self.cwd
        return project_dir(self.projects_root, record.project)

    async def run(
        self, record: TaskRecord, abort: asyncio.Event, on_progress: Progress
    ) -> BackendOutcome:
        """Prompt the owner's ACP session with ``record``'s envelope; the
        agent's answer, or why there is none. ``abort``: cancel the prompt."""
        try:
            cwd = self.cwd_of(record)
            conn = await self.process.ensure()
            if takes_http_mcp(self.process.capabilities):
                await self.coordination.start()
            opened = await self.sessions.open(
                record.owner,
                conn,
                self.process.capabilities,
                self.process.generation,
                str(cwd),
                record.project,
            )
        except (AgentUnavailable, UnusableSession, ProjectError, OSError) as exc:
            return BackendOutcome(None, screened(str(exc), MAX_FAILURE_CHARS))
        except (ConnectionError, RequestError, pydantic.ValidationError) as exc:
            return BackendOutcome(None, await self._lost(exc, "opening its session"))
        session_id = opened.session_id
        if not await self._settled(session_id, record, abort):
            return BackendOutcome(None, None)  # cancelled before it reached the agent
        run = PromptRun(record.owner, record.id, on_progress)
        self.client.runs[session_id] = run
        if cwd != self.cwd:
            self.client.sandboxes[session_id] = AgentFiles(cwd, self.fs)
        binding = Binding(record.owner, record.project)
        self.prompting[binding] = record.id
        try:
            await on_progress({"phrase": STARTING}, "delegated")
            await self.sessions.told(record.owner, opened.untold, record.project)
            text = envelope(record, opened.earlier, opened.untold)
            prompt = asyncio.create_task(
                conn.prompt(session_id=session_id, prompt=[text_block(text)])
            )
            aborted = asyncio.create_task(abort.wait())
            try:
                await asyncio.wait(
                    {prompt, aborted},
                    timeout=self.prompt_timeout_s,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                aborted.cancel()
            if not prompt.done():
                return await self._stop_prompt(conn, session_id, record, prompt, abort)
            return await self._outcome(record, run, prompt, abort, on_progress)
        finally:
            self.client.runs.pop(session_id, None)
            self.client.sandboxes.pop(session_id, None)
            if self.prompting.get(binding) == record.id:
                del self.prompting[binding]
            await run.close()
            self.permissions.cancel_task(record.id)

    async def ask_status(self, record: TaskRecord) -> dict[str, str] | None:
        """The agent's own word on ``record``, running here ({progress,
        interim} or {unavailable}); None if no prompt of it runs here."""
        session_id = next(
            (s for s, run in self.client.runs.items() if run.task_id == record.id), None
        )
        conn = self.process.conn
        if session_id is None or conn is None:
            return None
        try:
            cwd = self.cwd_of(record)
        except ProjectError:  # its directory is gone since it started: the record alone
            return None
        status: AgentStatus = await ask(
            conn,
            self.process.capabilities,
            self.client,
            session_id,
            str(cwd),
            record,
            self.status_timeout_s,
        )
        return status.data()

    async def _stop_prompt(
        self,
        conn: ClientSideConnection,
        session_id: str,
        record: TaskRecord,
        prompt: asyncio.Task[Any],
        abort: asyncio.Event,
    ) -> BackendOutcome:
        """Cancelled or out of time: ``session/cancel``, then wait (bounded)
        for the agent's ``cancelled``."""
        self.permissions.cancel_task(record.id)
        with contextlib.suppress(ConnectionError, RequestError):
            await conn.cancel(session_id=session_id)
        await asyncio.wait({prompt}, timeout=self.cancel_wait_s)
        if not prompt.done():
            # The task is stopped for the user now; the agent's prompt may
            # still run (an agent that looks for a cancel only between steps,
            # and forgets it when the session's next prompt begins): the
            # session waits for its end before it takes another.
            log.warning("task %s: the ACP agent did not confirm the cancel (yet)", record.id)
            self.unsettled[session_id] = prompt
            prompt.add_done_callback(functools.partial(self._confirmed_late, session_id, record.id))
        elif not prompt.cancelled() and prompt.exception() is None:
            log.info("task %s: the ACP prompt stopped (%s)", record.id, prompt.result().stop_reason)
        # Stopped before it finished: the agent is told not to take it up again.
        await self.sessions.cancelled(record)
        if abort.is_set():
            return BackendOutcome(None, None)
        return BackendOutcome(
            None, f"the ACP agent did not answer within {self.prompt_timeout_s:g} seconds"
        )

    async def _outcome(
        self,
        record: TaskRecord,
        run: PromptRun,
        prompt: asyncio.Task[Any],
        abort: asyncio.Event,
        on_progress: Progress,
    ) -> BackendOutcome:
        error = prompt.exception()
        if error is not None:
            return BackendOutcome(None, await self._lost(error, "working on the task"))
        self.process.answered()
        reason = prompt.result().stop_reason
        if reason == "cancelled":
            if abort.is_set():
                await self.sessions.cancelled(record)
                return BackendOutcome(None, None)
            return BackendOutcome(None, "the ACP agent cancelled it")
        if reason == "refusal":
            return BackendOutcome(None, "the ACP agent refused the task")
        spoken, inline = split_answer(redact(run.text()))
        if not spoken:
            return BackendOutcome(None, f"the ACP agent stopped without an answer ({reason})")
        if reason != "end_turn":  # max_tokens, max_turn_requests: cut short
            spoken += f" (The agent stopped early: {reason}.)"
        await run.close()  # no coalesced progress after the answer's
        await on_progress({"phrase": ORGANIZING}, "finalizing")
        return BackendOutcome(
            clip(spoken, self.max_result_chars),
            None,
            clip(inline, MAX_INLINE_CHARS) if inline else None,
        )

    async def _lost(self, error: BaseException, doing: str) -> str:
        if isinstance(error, ConnectionError):
            self.process.lost()
            if self.process.failure is not None:
                return self.process.failure
            code = await self.process.exit_code()
            exited = f"exited with code {code}" if code is not None else "closed its connection"
            return f"the ACP agent {exited} while {doing}"
        if isinstance(error, RequestError):
            # The agent's own words, shown on the card: its keys stay out.
            return screened(f"the ACP agent refused ({error})", MAX_FAILURE_CHARS)
        if isinstance(error, pydantic.ValidationError):  # its answer, not our failure
            why = f"the ACP agent {out_of_protocol(error)}"
            log.warning("%s while %s", why, doing)
            return screened(why, MAX_FAILURE_CHARS)
        log.error("the ACP backend failed", exc_info=error)
        return f"the ACP backend failed ({type(error).__name__})"

    async def _settled(self, session_id: str, record: TaskRecord, abort: asyncio.Event) -> bool:
        """Wait (at most the prompt timeout) for a cancelled prompt of the
        session the agent has not ended; False if ``record`` is cancelled
        meanwhile. Past the timeout that prompt is given up (not waited for
        again) and the session goes on."""
        pending = self.unsettled.get(session_id)
        if pending is None:
            return True
        log.info("task %s waits for the agent to end the session's cancelled prompt", record.id)
        aborted = asyncio.create_task(abort.wait())
        try:
            await asyncio.wait(
                {pending, aborted},
                timeout=self.prompt_timeout_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            aborted.cancel()
        if abort.is_set():
            return False
        if not pending.done():
            log.warning("the ACP agent never ended a cancelled prompt of a session; given up")
            pending.cancel()
        return True

    def _confirmed_late(self, session_id: str, task_id: str, prompt: asyncio.Task[Any]) -> None:
        if self.unsettled.get(session_id) is prompt:
            del self.unsettled[session_id]
        if prompt.cancelled():
            return
        error = prompt.exception()
        ended = f"failed ({type(error).__name__})" if error else prompt.result().stop_reason
        log.info("task %s: the ACP prompt stopped late (%s)", task_id, ended)

    async def close(self) -> None:
        for prompt in list(self.unsettled.values()):
            prompt.cancel()
        await self.process.close()
        await self.coordination.close()


async def _drain(process: asyncio.subprocess.Process) -> None:
    """What an ended agent left in its pipes, read to their end: a pipe we
    stopped reading (a flood, a line without end) would otherwise keep its
    transport open past the loop. Bounded: the process is gone, and each
    pipe holds ``SLICE_BYTES`` or so."""
    for stream in (process.stdout, process.stderr):
        if stream is None:
            continue
        with contextlib.suppress(asyncio.TimeoutError, OSError, ValueError):
            async with asyncio.timeout(EXIT_WAIT_S):  # a child of it may hold the pipe
                while await stream.read(SLICE_BYTES):
                    pass


def out_of_protocol(error: pydantic.ValidationError) -> str:
    """What was wrong with the agent's answer: the fields, not their values."""
    fields = "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'the answer'}: {e['msg']}" for e in error.errors()[:3]
    )
    return f"answered out of protocol ({fields})"
