"""A running task's status, asked of the ACP agent itself.

``get_task_status`` on a running task asks the agent how far it is: a
control prompt the user never sees, sent to a *fork* of the task's session
(``session/fork``, where the agent advertises it), so the agent answers
with the task's whole context while the task's own prompt goes on, and the
owner's session keeps no trace of the question (one session holds one
prompt at a time, and its updates carry no prompt id: a second prompt in
it could not be told apart from the task's). The fork is closed afterwards
where the agent can (``session/close``).

The answer is the agent's words: redacted (``redact.py``) and bounded, a
``Progress:`` part and an ``Interim:`` part. No fork, no answer within
``acp_status_timeout_s``, an error: the caller falls back to our record,
told why. The fork may not ask permission nor read or write files (it has
no prompt run: refused), and its updates never reach the card.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging

import pydantic
from acp import RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import AgentCapabilities

from .acp_client import AcpClient
from .records import TaskRecord
from .redact import screened

MAX_STATUS_CHARS = 300  # each part of the agent's answer
CLOSE_WAIT_S = 2.0  # closing the fork, at most (the status is already in hand)
INTERIM_MARK = "Interim:"
PROGRESS_MARK = "Progress:"

log = logging.getLogger(__name__)


def status_query(record: TaskRecord) -> str:
    """The control prompt about ``record``."""
    return (
        "[A status question from the voice server, not from the user; the user does not "
        f"see it.] How far along is task {record.id} ({record.objective!r})? Do no further "
        "work in this reply. Answer in at most two short sentences: a line starting with "
        f"'{PROGRESS_MARK}' saying what is done and what is left, then, if you have any, a "
        f"line starting with '{INTERIM_MARK}' with the results so far."
    )


@dataclasses.dataclass(frozen=True)
class AgentStatus:
    """The agent's answer ({progress, interim}), or why there is none."""

    said: dict[str, str] | None
    why_not: str | None = None

    def data(self) -> dict[str, str]:
        if self.said is not None:
            return self.said
        return {"unavailable": f"{self.why_not}; the record above is ours"}


def parse(text: str) -> dict[str, str]:
    """The agent's answer as {progress, interim?}: redacted, bounded."""
    head, mark, interim = text.partition(INTERIM_MARK)
    progress = head.strip().removeprefix(PROGRESS_MARK).strip()
    said = {"progress": screened(progress or "(nothing said)", MAX_STATUS_CHARS)}
    if mark and interim.strip():
        said["interim"] = screened(interim.strip(), MAX_STATUS_CHARS)
    return said


def can_fork(capabilities: AgentCapabilities) -> bool:
    sessions = capabilities.session_capabilities
    return sessions is not None and sessions.fork is not None


def can_close(capabilities: AgentCapabilities) -> bool:
    sessions = capabilities.session_capabilities
    return sessions is not None and sessions.close is not None


async def ask(
    conn: ClientSideConnection,
    capabilities: AgentCapabilities,
    client: AcpClient,
    session_id: str,
    cwd: str,
    record: TaskRecord,
    timeout_s: float,
) -> AgentStatus:
    """Ask the agent, in a fork of ``session_id``, how ``record`` is going."""
    if not can_fork(capabilities):
        return AgentStatus(None, "the agent cannot be asked (it does not offer session/fork)")
    fork: str | None = None
    try:
        async with asyncio.timeout(timeout_s):
            fork = (
                await conn.fork_session(session_id=session_id, cwd=cwd, mcp_servers=[])
            ).session_id
            client.controls[fork] = []
            await conn.prompt(session_id=fork, prompt=[text_block(status_query(record))])
        return AgentStatus(parse(client.control_text(fork)))
    except TimeoutError:
        if fork is not None:
            with contextlib.suppress(ConnectionError, RequestError):
                await conn.cancel(session_id=fork)
        return AgentStatus(None, f"the agent did not answer within {timeout_s:g} s")
    except (ConnectionError, RequestError, pydantic.ValidationError) as exc:
        log.info("task %s: the agent's status not asked (%s)", record.id, type(exc).__name__)
        return AgentStatus(None, "the agent could not be asked")
    finally:
        if fork is not None:
            client.controls.pop(fork, None)
            if can_close(capabilities):
                with contextlib.suppress(
                    TimeoutError, ConnectionError, RequestError, pydantic.ValidationError
                ):
                    await asyncio.wait_for(conn.close_session(session_id=fork), CLOSE_WAIT_S)
