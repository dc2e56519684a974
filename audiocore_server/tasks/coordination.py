"""The ACP agent's coordination tools, over MCP: its owner's tasks and sessions.

Every ACP session the server opens is offered one MCP server (streamable
HTTP, the ``mcp`` package's ``MCPServer``), ``audiocore``, served by this
process on the loopback (``127.0.0.1``, a port of the system's choosing)
with these tools:

* ``list_tasks`` — the owner's sessions on the agent (by project) and tasks;
* ``start_task`` — queue a new task (optionally in a project), as the voice
  agent's ``start_task`` does;
* ``send_message`` — a message to the session a task ran in: a new task in
  that task's project;
* ``task_status`` / ``cancel_task`` — one of the owner's tasks;
* ``delegate`` — hand work to another session and wait for it: the task
  runs at once (not behind the owner's queue: the asking task lends it its
  turn), under a correlation id, and its outcome is the tool's answer, so
  it comes back into the task that asked.

Owner-scoped by construction: a session is offered the server with a bearer
token of its own (``Authorization`` header, 32 random bytes), made for one
owner and one session (owner and project), known to this process only and
never logged nor stored; a tool reads the owner from the token and nothing
else, so no argument can name another owner, and another owner's task id is
"no such task". A request without a known token is refused. A restarted
server makes new tokens: the agent gets them when its sessions are resumed.
The agent must advertise ``mcpCapabilities.http`` (an agent that takes only
stdio MCP servers is offered none, as the log line of its start says).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import secrets
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

import uvicorn
from acp.schema import HttpHeader, HttpMcpServer
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from .projects import ProjectError
from .records import TaskRecord, clip

MCP_NAME = "audiocore"
MAX_LISTED = 50  # tasks listed, the latest
MAX_SHOWN_CHARS = 2000  # a result or objective in a tool's answer

log = logging.getLogger(__name__)


class Coordinator(Protocol):
    """What the tools need of the task manager (``manager.py``)."""

    async def tasks(self, owner: str) -> list[TaskRecord]: ...

    async def submit(
        self,
        owner: str,
        objective: str,
        context: dict[str, Any] | None = None,
        project: str | None = None,
    ) -> TaskRecord: ...

    async def status(self, owner: str, task_id: str | None = None) -> TaskRecord | None: ...

    async def cancel(self, owner: str, task_id: str | None = None) -> TaskRecord | None: ...

    async def delegate(
        self, owner: str, parent_id: str, objective: str, project: str | None
    ) -> TaskRecord: ...


@dataclasses.dataclass(frozen=True)
class Binding:
    """Whose session a token was made for."""

    owner: str
    project: str | None


def describe(record: TaskRecord) -> dict[str, Any]:
    """A task as a tool tells it."""
    found: dict[str, Any] = {
        "taskId": record.id,
        "state": record.state,
        "objective": clip(record.objective, MAX_SHOWN_CHARS),
        "project": record.project,
    }
    if record.parent:
        found["delegatedBy"] = record.parent
        found["correlationId"] = record.correlation
    if record.progress:
        found["progress"] = record.progress
    if record.result:
        found["result"] = clip(record.result, MAX_SHOWN_CHARS)
    if record.inline:
        found["inline"] = clip(record.inline, MAX_SHOWN_CHARS)
    if record.error:
        found["error"] = record.error
    return found


class CoordinationServer:
    def __init__(
        self,
        sessions: Callable[[str], Awaitable[list[dict[str, str | None]]]],
        asking: Callable[[Binding], str | None],
    ) -> None:
        """``sessions(owner)``: the owner's sessions on the agent;
        ``asking(binding)``: the task prompting in that session now."""
        self.coordinator: Coordinator | None = None  # the manager, once built
        self._sessions = sessions
        self._asking = asking
        self._tokens: dict[str, Binding] = {}  # the token's digest -> its binding
        self._issued: dict[Binding, str] = {}  # binding -> its token
        self._server: Any = None
        self._serving: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.url: str | None = None

    def offer(self, owner: str, project: str | None) -> list[HttpMcpServer]:
        """The MCP servers a session of ``owner`` (in ``project``) is given."""
        if self.url is None:
            return []
        binding = Binding(owner, project)
        token = self._issued.get(binding)
        if token is None:
            token = self._issued[binding] = secrets.token_urlsafe(32)
            self._tokens[_digest(token)] = binding
        header = HttpHeader(name="Authorization", value=f"Bearer {token}")
        return [HttpMcpServer(type="http", name=MCP_NAME, url=self.url, headers=[header])]

    def binding(self, headers: Any) -> Binding:
        """The binding of the request's bearer token; ``ToolError`` if none."""
        value = (headers or {}).get("authorization", "")
        scheme, _, token = value.partition(" ")
        found = self._tokens.get(_digest(token)) if scheme.lower() == "bearer" else None
        if found is None:
            raise ToolError("unauthorized: this MCP server takes only the token it gave you")
        return found

    async def start(self) -> None:
        """Serve the tools (once; later calls return at once)."""
        async with self._lock:
            if self._serving is not None:
                return
            app = self._app().streamable_http_app(stateless_http=True, json_response=True)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))
            sock.listen(128)  # an agent connecting before uvicorn serves waits, not refused
            port = sock.getsockname()[1]
            # No log level, no log config, access log left on: uvicorn sets
            # any of those on its global loggers, the server's own among them.
            # (An access line names the path, never the token: a header.)
            config = uvicorn.Config(app, lifespan="on", log_config=None, log_level=None)
            self._server = _Embedded(config)
            self._serving = asyncio.create_task(self._server.serve(sockets=[sock]))
            self.url = f"http://127.0.0.1:{port}/mcp"
            log.info("coordination tools served over MCP at %s", self.url)

    async def close(self) -> None:
        if self._server is not None and self._serving is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._serving, 5)
        self._serving = self._server = self.url = None

    def _app(self) -> MCPServer[Any]:
        root = logging.getLogger()
        # MCPServer calls ``logging.basicConfig``: a handler in place makes
        # that a no-op, so the server's logging stays as it was set up.
        placeholder = logging.NullHandler()
        root.addHandler(placeholder)
        try:
            server: MCPServer[Any] = MCPServer(MCP_NAME, log_level="WARNING")
        finally:
            root.removeHandler(placeholder)

        def manager() -> Coordinator:
            if self.coordinator is None:
                raise ToolError("the task manager is not ready")
            return self.coordinator

        async def mine(owner: str, task_id: object) -> TaskRecord:
            if not isinstance(task_id, str) or not task_id:
                raise ToolError("task_id: expected a task id from list_tasks")
            record = await manager().status(owner, task_id)
            if record is None:
                raise ToolError(f"task_id: no task {clip(task_id, 80)!r} of yours")
            return record

        async def submitted(owner: str, objective: str, project: str | None) -> dict[str, Any]:
            try:
                record = await manager().submit(owner, objective, None, project)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise ToolError(str(exc)) from None
            return describe(record)

        @server.tool()
        async def list_tasks(ctx: Context) -> dict[str, Any]:
            """Your sessions on this agent (one per project) and your tasks, latest last."""
            owner = self.binding(ctx.headers).owner
            tasks = (await manager().tasks(owner))[-MAX_LISTED:]
            return {
                "sessions": await self._sessions(owner),
                "tasks": [describe(r) for r in tasks],
            }

        @server.tool()
        async def start_task(
            objective: str, ctx: Context, project: str | None = None
        ) -> dict[str, Any]:
            """Queue a new background task (in a project's session if named);
            returns at once with its id."""
            return await submitted(self.binding(ctx.headers).owner, objective, project)

        @server.tool()
        async def send_message(task_id: str, message: str, ctx: Context) -> dict[str, Any]:
            """Send a message to the session a task ran in: a new task there."""
            owner = self.binding(ctx.headers).owner
            record = await mine(owner, task_id)
            return await submitted(owner, message, record.project)

        @server.tool()
        async def task_status(task_id: str, ctx: Context) -> dict[str, Any]:
            """The state, progress and result of one of your tasks."""
            return describe(await mine(self.binding(ctx.headers).owner, task_id))

        @server.tool()
        async def cancel_task(task_id: str, ctx: Context) -> dict[str, Any]:
            """Cancel one of your tasks; returns once it is cancelled."""
            owner = self.binding(ctx.headers).owner
            record = await mine(owner, task_id)
            cancelled = await manager().cancel(owner, record.id)
            return describe(cancelled or record)

        @server.tool()
        async def delegate(
            objective: str, ctx: Context, project: str | None = None
        ) -> dict[str, Any]:
            """Hand work to another session (a project's, or the main one) and
            wait for its outcome, returned under a correlation id."""
            binding = self.binding(ctx.headers)
            parent = self._asking(binding)
            if parent is None:
                raise ToolError("no task of yours is running in this session to delegate from")
            try:
                record = await manager().delegate(binding.owner, parent, objective, project)
            except (TypeError, ValueError, RuntimeError, ProjectError) as exc:
                raise ToolError(str(exc)) from None
            return describe(record)

        return server


class _Embedded(uvicorn.Server):
    """A uvicorn server inside the running one: the process's signals stay
    its host's (``Server.serve`` would take SIGINT and SIGTERM for itself)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _digest(token: str) -> str:
    # Tokens are looked up by digest: the dict's comparisons see no token.
    return hashlib.sha256(token.encode()).hexdigest()
