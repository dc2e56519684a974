"""Which ACP session an owner's task is prompted in, on which agent.

An owner has one session per agent: the session ids are kept in the owner's
ledger under the agent's key (``agent_key``: a digest of its command line),
so switching ``--acp-command`` never hands one agent another's session id,
and switching back continues the first agent's session. In the running
process a session is opened once; after a restart (of the server or of the
agent) it is continued with ``session/resume`` where the agent advertises
it (``sessionCapabilities.resume``: no history replayed), else
``session/load`` (``loadSession``: the history replayed, and ignored), else
a new session is made and its first prompt recalls the owner's last
results.

A task naming a project (``projects.py``) has a session of its own, per
owner, agent and project, kept under the agent's key and the project's name
(``session_key``), opened and taken back with the project's directory as
its ``cwd``. Every session is offered the coordination tools
(``coordination.py``): the MCP servers of ``offer``, bound to the owner and
the session.

The cancellations an agent is told once (``untold``) are kept there too:
a task cancelled while the agent worked on it is told in the owner's next
prompt to that agent, and marked told in the ledger before that prompt is
sent — at most once, across restarts too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import shlex
from collections.abc import Callable

from acp import RequestError
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AcpMcpServer,
    AgentCapabilities,
    HttpMcpServer,
    McpServerStdio,
    SseMcpServer,
)

from .ledger import TaskStore
from .records import TaskRecord

MAX_KNOWN_SESSIONS = 10_000  # owners whose session the running process is known to hold
MAX_SESSION_ID_CHARS = 256  # an agent's session id, kept in the owner's ledger

McpServers = list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio]

log = logging.getLogger(__name__)


class UnusableSession(RuntimeError):
    """The agent gave a session id we cannot keep (the message says why)."""


def agent_key(command: list[str]) -> str:
    """The agent's key in a ledger: its command line, hashed (it may carry a
    secret, and a ledger is no place for one)."""
    return "acp-" + hashlib.sha256(shlex.join(command).encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Opened:
    """A session ready for a prompt: its id, the results to recall in it
    (a new session's), and the cancellations to tell in it."""

    session_id: str
    earlier: list[TaskRecord]
    untold: list[dict[str, str]]


def session_key(agent: str, project: str | None) -> str:
    """Where a session's id is kept in the ledger: the agent's key, and the
    project's name after "@" for a project's session."""
    return agent if project is None else f"{agent}@{project}"


def takes_http_mcp(capabilities: AgentCapabilities) -> bool:
    """Whether the agent takes MCP servers over HTTP (``mcpCapabilities.http``)."""
    mcp = capabilities.mcp_capabilities
    return bool(mcp is not None and mcp.http)


def can_resume(capabilities: AgentCapabilities) -> bool:
    sessions = capabilities.session_capabilities
    return sessions is not None and sessions.resume is not None


class OwnerSessions:
    def __init__(
        self,
        store: TaskStore,
        command: list[str],
        offer: Callable[[str, str | None], list[HttpMcpServer]] = lambda owner, project: [],
    ) -> None:
        """``offer(owner, project)``: the MCP servers a session is given."""
        self.store = store
        self.agent = agent_key(command)
        self.offer = offer
        # (owner, project) -> (process generation, session id): sessions the
        # process knows, the most recently used last (the oldest forgotten
        # past MAX_KNOWN_SESSIONS: their owners' next task opens theirs again).
        self._known: dict[tuple[str, str | None], tuple[int, str]] = {}

    async def open(
        self,
        owner: str,
        conn: ClientSideConnection,
        capabilities: AgentCapabilities,
        generation: int,
        cwd: str,
        project: str | None = None,
    ) -> Opened:
        """The owner's session (of ``project``, in ``cwd``) in the running
        process (``generation``)."""
        key = session_key(self.agent, project)
        ledger = await self.store.read(owner)
        untold = ledger.untold_cancels(key)
        known = self._known.pop((owner, project), None)
        if known is not None and known[0] == generation:
            self._known[(owner, project)] = known
            return Opened(known[1], [], untold)
        while len(self._known) >= MAX_KNOWN_SESSIONS:
            del self._known[next(iter(self._known))]
        stored = ledger.acp_session(key)
        mcp: McpServers = []
        if takes_http_mcp(capabilities):
            mcp.extend(self.offer(owner, project))
        if stored and await self._continue(owner, stored, conn, capabilities, cwd, mcp):
            self._known[(owner, project)] = (generation, stored)
            return Opened(stored, [], untold)
        created = await conn.new_session(cwd=cwd, mcp_servers=mcp)
        if not 0 < len(created.session_id) <= MAX_SESSION_ID_CHARS:
            raise UnusableSession(
                f"the ACP agent gave a session id of {len(created.session_id)} characters "
                f"(expected 1 to {MAX_SESSION_ID_CHARS})"
            )
        await self.store.set_acp_session(owner, key, created.session_id)
        self._known[(owner, project)] = (generation, created.session_id)
        earlier = [
            r
            for r in ledger.ordered()
            if r.state == "completed" and r.result and r.project == project
        ]
        return Opened(created.session_id, earlier, untold)

    async def _continue(
        self,
        owner: str,
        session_id: str,
        conn: ClientSideConnection,
        capabilities: AgentCapabilities,
        cwd: str,
        mcp: McpServers,
    ) -> bool:
        """Whether the agent took ``session_id`` back: resumed, else loaded."""
        if can_resume(capabilities):
            try:
                await conn.resume_session(cwd=cwd, session_id=session_id, mcp_servers=mcp)
            except RequestError as exc:
                log.info("ACP session %s of %r not resumed (%s)", session_id, owner, exc)
            else:
                log.info("ACP session %s of %r resumed", session_id, owner)
                return True
        if capabilities.load_session:
            try:
                await conn.load_session(cwd=cwd, session_id=session_id, mcp_servers=mcp)
            except RequestError as exc:
                log.info("ACP session %s of %r not loaded (%s)", session_id, owner, exc)
            else:
                log.info("ACP session %s of %r loaded", session_id, owner)
                return True
        log.info("ACP session %s of %r not continued: a new one", session_id, owner)
        return False

    async def told(
        self, owner: str, untold: list[dict[str, str]], project: str | None = None
    ) -> None:
        """Mark the cancellations ``untold`` told (before the prompt telling
        them is sent: at most once)."""
        if untold:
            ids = [u["id"] for u in untold]
            key = session_key(self.agent, project)
            await self.store.update(owner, lambda ledger: ledger.mark_told(key, ids))

    async def sessions(self, owner: str) -> list[dict[str, str | None]]:
        """The owner's sessions on this agent: {project (None: the main
        one), sessionId}."""
        ledger = await self.store.read(owner)
        found: list[dict[str, str | None]] = []
        for key in sorted(ledger.acp):
            agent, _, project = key.partition("@")
            session_id = ledger.acp_session(key)
            if agent == self.agent and session_id:
                found.append({"project": project or None, "sessionId": session_id})
        return found

    async def cancelled(self, record: TaskRecord) -> None:
        """``record`` was cancelled while the agent worked on it: tell it in
        the owner's next prompt."""
        await self.store.update(
            record.owner,
            lambda ledger: ledger.add_untold_cancel(
                session_key(self.agent, record.project), record.id, record.objective
            ),
        )
