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

from acp import RequestError
from acp.client.connection import ClientSideConnection
from acp.schema import AgentCapabilities

from .ledger import TaskStore
from .records import TaskRecord

MAX_KNOWN_SESSIONS = 10_000  # owners whose session the running process is known to hold
MAX_SESSION_ID_CHARS = 256  # an agent's session id, kept in the owner's ledger

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


def can_resume(capabilities: AgentCapabilities) -> bool:
    sessions = capabilities.session_capabilities
    return sessions is not None and sessions.resume is not None


class OwnerSessions:
    def __init__(self, store: TaskStore, command: list[str], cwd: str) -> None:
        self.store = store
        self.agent = agent_key(command)
        self.cwd = cwd
        # owner -> (process generation, session id): sessions the process
        # knows, the most recently used last (the oldest forgotten past
        # MAX_KNOWN_SESSIONS: their owners' next task opens theirs again).
        self._known: dict[str, tuple[int, str]] = {}

    async def open(
        self,
        owner: str,
        conn: ClientSideConnection,
        capabilities: AgentCapabilities,
        generation: int,
    ) -> Opened:
        """The owner's session in the running process (``generation``)."""
        ledger = await self.store.read(owner)
        untold = ledger.untold_cancels(self.agent)
        known = self._known.pop(owner, None)
        if known is not None and known[0] == generation:
            self._known[owner] = known
            return Opened(known[1], [], untold)
        while len(self._known) >= MAX_KNOWN_SESSIONS:
            del self._known[next(iter(self._known))]
        stored = ledger.acp_session(self.agent)
        if stored and await self._continue(owner, stored, conn, capabilities):
            self._known[owner] = (generation, stored)
            return Opened(stored, [], untold)
        created = await conn.new_session(cwd=self.cwd, mcp_servers=[])
        if not 0 < len(created.session_id) <= MAX_SESSION_ID_CHARS:
            raise UnusableSession(
                f"the ACP agent gave a session id of {len(created.session_id)} characters "
                f"(expected 1 to {MAX_SESSION_ID_CHARS})"
            )
        await self.store.set_acp_session(owner, self.agent, created.session_id)
        self._known[owner] = (generation, created.session_id)
        earlier = [r for r in ledger.ordered() if r.state == "completed" and r.result]
        return Opened(created.session_id, earlier, untold)

    async def _continue(
        self,
        owner: str,
        session_id: str,
        conn: ClientSideConnection,
        capabilities: AgentCapabilities,
    ) -> bool:
        """Whether the agent took ``session_id`` back: resumed, else loaded."""
        if can_resume(capabilities):
            try:
                await conn.resume_session(cwd=self.cwd, session_id=session_id, mcp_servers=[])
            except RequestError as exc:
                log.info("ACP session %s of %r not resumed (%s)", session_id, owner, exc)
            else:
                log.info("ACP session %s of %r resumed", session_id, owner)
                return True
        if capabilities.load_session:
            try:
                await conn.load_session(cwd=self.cwd, session_id=session_id, mcp_servers=[])
            except RequestError as exc:
                log.info("ACP session %s of %r not loaded (%s)", session_id, owner, exc)
            else:
                log.info("ACP session %s of %r loaded", session_id, owner)
                return True
        log.info("ACP session %s of %r not continued: a new one", session_id, owner)
        return False

    async def told(self, owner: str, untold: list[dict[str, str]]) -> None:
        """Mark the cancellations ``untold`` told (before the prompt telling
        them is sent: at most once)."""
        if untold:
            ids = [u["id"] for u in untold]
            await self.store.update(owner, lambda ledger: ledger.mark_told(self.agent, ids))

    async def cancelled(self, record: TaskRecord) -> None:
        """``record`` was cancelled while the agent worked on it: tell it in
        the owner's next prompt."""
        await self.store.update(
            record.owner,
            lambda ledger: ledger.add_untold_cancel(self.agent, record.id, record.objective),
        )
