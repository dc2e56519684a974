"""Which backend does the tasks' work: the seam between the manager and them.

``build_backend`` returns the ADK backend (``backend.py``, an agent inside
this server: the default) or the ACP backend (``acp_backend.py``, an
external agent process), as ``settings.task_backend`` says; the manager
sees only ``TaskBackend``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from google.adk.models.base_llm import BaseLlm
from google.adk.sessions import BaseSessionService

from ..settings import Settings
from .acp_permissions import PermissionDesk
from .adk_backend import Backend, BackendOutcome, Progress, TaskFiles
from .ledger import TaskStore
from .records import TaskRecord

if TYPE_CHECKING:  # the ``mcp`` package is imported with the ACP backend only
    from .coordination import Coordinator


class TaskBackend(Protocol):
    """What the manager needs of a backend (``backend.py``, ``acp_backend.py``)."""

    files: TaskFiles

    async def run(
        self, record: TaskRecord, abort: asyncio.Event, on_progress: Progress
    ) -> BackendOutcome: ...

    async def ask_status(self, record: TaskRecord) -> dict[str, str] | None:
        """The backend's own word on a running task (None: only our record)."""
        ...

    async def close(self) -> None: ...


def build_backend(
    settings: Settings,
    session_service: BaseSessionService,
    store: TaskStore,
    permissions: PermissionDesk,
    model: BaseLlm,
    coordinator: Coordinator | None = None,
) -> TaskBackend:
    """The backend ``settings.task_backend`` names: ADK (in this server, on
    ``model``) or ACP (offered the coordination tools on ``coordinator``)."""
    if settings.task_backend == "acp":
        from .acp_backend import AcpBackend

        return AcpBackend(settings, store, permissions, coordinator)
    return Backend(settings, session_service, model)
