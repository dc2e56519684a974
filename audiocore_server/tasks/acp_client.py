"""The client side of ACP: what the agent may ask of us while it works.

``AcpClient`` is the object the agent's connection calls back:

* ``session_update`` — the agent's progress on a prompt: its message chunks
  (collected as the answer), thoughts, plan entries and tool calls become
  the task's progress, a phrase of a fixed vocabulary on the card and the
  raw words in the log only, coalesced (``acp_progress.py``). Updates of a
  session with no prompt under way (the history a ``session/load``
  replays) are ignored.
* ``request_permission`` — handed to the permission desk
  (``acp_permissions.py``), which asks the user by voice.
* ``read_text_file`` / ``write_text_file`` — served inside one directory
  only, and only when enabled (``AgentFiles``). Terminals are never offered,
  so their methods are not implemented and the agent gets "method not found".
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import itertools
import logging
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    WriteTextFileResponse,
)

from .acp_permissions import Option, PermissionDesk
from .acp_progress import PromptRun
from .records import clip

MAX_READ_BYTES = 1024 * 1024  # a file the agent reads through us
MAX_WRITE_CHARS = 1024 * 1024  # what it writes through us
MAX_ANSWER_CHARS = 64_000  # the answer collected from its message chunks
MAX_CONTROL_CHARS = 4_000  # a control prompt's answer (``acp_status.py``)
MAX_PATH_BYTES = 4096  # PATH_MAX: a longer path is refused as the system would
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
_READ = os.O_RDONLY | _CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC

log = logging.getLogger(__name__)


class AgentFiles:
    """The agent's file requests, inside ``root`` only.

    Without a gap between check and use: a path is walked one component at
    a time from a descriptor of ``root``, each directory opened relative to
    the last with ``O_NOFOLLOW | O_DIRECTORY`` and the file itself with
    ``O_NOFOLLOW``, so a symbolic link anywhere on the way — there when
    checked, or swapped in a moment later — is refused, never followed. A
    write goes to a new file of its own (``O_CREAT | O_EXCL``) in the final
    directory, renamed over the name within that same directory: it replaces
    a link put there, it never writes through one.
    """

    def __init__(self, root: Path, enabled: bool) -> None:
        self.root = root
        self.enabled = enabled

    def _parts(self, path: str) -> list[str]:
        """``path``'s components below the root (none: the root itself);
        ``RequestError`` for a path that is not one, or names a place outside."""
        if not self.enabled:
            raise RequestError.method_not_found("fs (not enabled on this server)")
        if not isinstance(path, str) or not path or "\x00" in path:
            raise RequestError.invalid_params({"path": "expected a file path"})
        given = Path(path)
        if ".." in given.parts:
            raise RequestError.invalid_params({"path": f"{path!r}: '..' is not allowed"})
        with _refused(path):
            if len(os.fsencode(path)) >= MAX_PATH_BYTES:
                raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG))
        if given.is_absolute():
            # Compared as names: the root is resolved once, when configured.
            if not given.is_relative_to(self.root):
                raise RequestError.invalid_params(
                    {"path": f"{path!r} is outside the working directory {self.root}"}
                )
            given = given.relative_to(self.root)
        return [part for part in given.parts if part != "."]

    @contextlib.contextmanager
    def _directory(self, path: str, parts: list[str]) -> Iterator[int]:
        """A descriptor of the directory ``parts`` names, walked from the root
        without following a symbolic link."""
        with _refused(path):
            fd = os.open(self.root, _DIRECTORY)
            try:
                for part in parts:
                    try:
                        below = os.open(part, _DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                    except OSError as exc:
                        if exc.errno == errno.ENOENT:
                            raise RequestError.invalid_params(
                                {"path": f"{clip(repr(path), 200)}: no such directory"}
                            ) from None
                        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                            raise RequestError.invalid_params(
                                {
                                    "path": f"{clip(repr(path), 200)}: {part!r} is not a "
                                    "directory of the working directory (a symbolic link is "
                                    "not followed)"
                                }
                            ) from None
                        raise
                    os.close(fd)
                    fd = below
                yield fd
            finally:
                os.close(fd)

    def read(self, path: str, line: int | None, limit: int | None) -> str:
        parts = self._parts(path)
        if not parts:
            raise RequestError.invalid_params({"path": f"{path!r}: Is a directory"})
        with self._directory(path, parts[:-1]) as directory, _refused(path):
            try:
                # O_NONBLOCK: a FIFO put there opens at once (and is refused
                # below) rather than hold the thread until a writer comes.
                fd = os.open(parts[-1], _READ | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    raise RequestError.resource_not_found(str(path)) from None
                if exc.errno == errno.ELOOP:
                    raise RequestError.invalid_params(
                        {"path": f"{path!r} is a symbolic link (not followed)"}
                    ) from None
                raise
            with os.fdopen(fd, "rb") as file:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise RequestError.invalid_params({"path": f"{path!r} is not a regular file"})
                # Read up to one byte past the bound: a file that grows after
                # a stat could not pass it.
                data = file.read(MAX_READ_BYTES + 1)
        if len(data) > MAX_READ_BYTES:
            raise RequestError.invalid_params(
                {"path": f"{path!r} has more than {MAX_READ_BYTES} bytes"}
            )
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise RequestError.invalid_params({"path": f"{path!r} is not UTF-8 text"}) from None
        if line is None and limit is None:
            return text
        # Lines end at "\n" only, as the agent counts them (``splitlines``
        # would also end one at a form feed or U+2028).
        lines = io.StringIO(text, newline="\n")
        start = max(0, (line or 1) - 1)
        end = None if limit is None else start + max(0, limit)
        return "".join(itertools.islice(lines, start, end))

    def write(self, path: str, content: str) -> None:
        if not isinstance(content, str) or len(content) > MAX_WRITE_CHARS:
            raise RequestError.invalid_params(
                {"content": f"expected text of at most {MAX_WRITE_CHARS} characters"}
            )
        try:
            data = content.encode()
        except UnicodeEncodeError:  # a lone surrogate: JSON can carry one
            raise RequestError.invalid_params({"content": "expected UTF-8 text"}) from None
        parts = self._parts(path)
        if not parts:
            raise RequestError.invalid_params({"path": f"{path!r}: Is a directory"})
        with self._directory(path, parts[:-1]) as directory, _refused(path):
            os.fsencode(parts[-1])  # not a file name: refused before anything is made
            temporary = f".{secrets.token_hex(8)}.audiocore-write"
            fd = os.open(temporary, _CREATE, 0o666, dir_fd=directory)
            try:
                with contextlib.suppress(FileNotFoundError):  # a file replaced keeps its mode
                    now = os.stat(parts[-1], dir_fd=directory, follow_symlinks=False)
                    if stat.S_ISREG(now.st_mode):
                        os.fchmod(fd, stat.S_IMODE(now.st_mode))
                with os.fdopen(fd, "wb") as file:
                    file.write(data)
                os.rename(temporary, parts[-1], src_dir_fd=directory, dst_dir_fd=directory)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=directory)
                raise


@contextlib.contextmanager
def _refused(path: str) -> Iterator[None]:
    """The system's refusal of the agent's path (too long, a directory, not
    a file name) as the agent's bad request, not our internal error."""
    try:
        yield
    except OSError as exc:
        raise RequestError.invalid_params(
            {"path": f"{clip(repr(path), 200)}: {exc.strerror or exc}"}
        ) from None
    except UnicodeEncodeError:
        raise RequestError.invalid_params(
            {"path": f"{clip(repr(path), 200)} is not a file name"}
        ) from None


class AcpClient:
    def __init__(self, files: AgentFiles, permissions: PermissionDesk) -> None:
        self.files = files
        self.permissions = permissions
        self.runs: dict[str, PromptRun] = {}  # session id -> its prompt under way
        # session id -> the directory its files are served from (a project's),
        # while a prompt is under way there; else ``files``.
        self.sandboxes: dict[str, AgentFiles] = {}
        # A control prompt's session (``acp_status.py``) -> its answer so far:
        # collected, never shown, never a run (no permission, no file).
        self.controls: dict[str, list[str]] = {}

    def control_text(self, session_id: str) -> str:
        return "".join(self.controls.get(session_id, []))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        control = self.controls.get(session_id)
        if control is not None:
            if isinstance(update, AgentMessageChunk) and isinstance(
                update.content, TextContentBlock
            ):
                room = MAX_CONTROL_CHARS - sum(map(len, control))
                if room > 0 and update.content.text:  # at most 4000 pieces
                    control.append(update.content.text[:room])
            return
        run = self.runs.get(session_id)
        if run is None:
            return  # a replayed history, or an update after the prompt ended
        if isinstance(update, AgentMessageChunk):
            content = update.content
            if not isinstance(content, TextContentBlock):
                return
            room = MAX_ANSWER_CHARS - run.answer_chars
            if room > 0:
                run.answer.append(content.text[:room])
                run.answer_chars += min(room, len(content.text))
            await run.update("message", None)
        elif isinstance(update, AgentThoughtChunk):
            await run.update("think", "(a thought)")
        elif isinstance(update, AgentPlanUpdate):
            steps = "; ".join(f"{e.content} ({e.status})" for e in update.entries[:10])
            await run.update("plan", steps)
        elif isinstance(update, (ToolCallStart, ToolCallProgress)):
            kind = run.tool_kind(update.tool_call_id, update.kind)
            title = update.title or f"tool call {update.tool_call_id}"
            status = f" ({update.status})" if update.status else ""
            await run.update(kind, f"{title}{status}")
        # Commands, modes, usage…: nothing the user needs.

    async def request_permission(
        self,
        options: list[PermissionOption],
        session_id: str,
        tool_call: ToolCallUpdate,
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        run = self.runs.get(session_id)
        if run is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        chosen = await self.permissions.ask(
            run.owner,
            run.task_id,
            tool_call.title or f"run tool call {tool_call.tool_call_id}",
            [Option(o.option_id, o.kind) for o in options],
        )
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def read_text_file(
        self,
        path: str,
        session_id: str,
        limit: int | None = None,
        line: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self._check_session(session_id)
        files = self.sandboxes.get(session_id, self.files)
        content = await asyncio.to_thread(files.read, path, line, limit)
        log.info("ACP agent read %s", path)
        return ReadTextFileResponse(content=content)

    async def write_text_file(
        self, content: str, path: str, session_id: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self._check_session(session_id)
        files = self.sandboxes.get(session_id, self.files)
        await asyncio.to_thread(files.write, path, content)
        log.info("ACP agent wrote %s (%d characters)", path, len(content))
        return WriteTextFileResponse()

    def _check_session(self, session_id: str) -> None:
        if session_id not in self.runs:
            raise RequestError.invalid_params({"sessionId": "no prompt under way in this session"})
