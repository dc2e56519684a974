"""The backend agent that does the tasks' work, its tools, and its offline model.

One ADK ``LlmAgent`` run with ``Runner.run_async``: each task is a new user
message ("Task <id>: <objective>") in the owner's persistent backend session
(``store.backend_session_id``), so the backend keeps its context from one
task to the next, and a new voice connection of the same owner continues it.

Its tools work on the files of one directory (``<data_dir>/task_files``,
seeded with ``sales.csv`` and ``notes.txt``): they name files, never paths,
and refuse anything that would leave the directory.

With Google credentials the agent runs on a Gemini text model
(``Settings.task_model_name``), offline on the offline task model
(``offline/task_model.py``): the model is given, chosen by
``agent/models.py``.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import io
import json
import logging
import math
import re
import shutil
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

from google.adk.agents import Agent
from google.adk.agents.run_config import RunConfig
from google.adk.models.base_llm import BaseLlm
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService
from google.genai import types

from ..settings import Settings
from .ledger import TASKS_USER, backend_session_id, tasks_app_name
from .records import MAX_PROGRESS_DETAIL, TaskRecord, clip

TASK_FILES_DIR = "task_files"
SAMPLE_FILES = Path(__file__).resolve().parent / "sample_files"
MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_WAIT_S = 600.0
MAX_FAILURE_CHARS = 500
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")

BACKEND_INSTRUCTION = (
    "You are a backend worker. Each user message is a task: do it with your tools "
    "(list_files shows the files you can read), then answer with the result in one or "
    "two plain sentences that can be read aloud. If the task cannot be done with your "
    "tools, call report_failure with a short reason and stop."
)

log = logging.getLogger(__name__)

# (tool, detail, stage): stage is the finer state a card shows (None: none).
# The task's progress on its card ({"tool", "detail"}; an ACP agent's
# {"phrase"}) and its stage.
Progress = Callable[[dict[str, str], str | None], Awaitable[None]]


# ---------------------------------------------------------------- the tools


class TaskFiles:
    """The backend's files and the tools that read them."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def seed(self) -> None:
        """Create the directory, with the sample files that are missing."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for sample in SAMPLE_FILES.iterdir():
            target = self.directory / sample.name
            if sample.is_file() and not target.exists():
                shutil.copyfile(sample, target)

    def resolve(self, name: Any) -> Path:
        """The file ``name`` names in the directory; ``ValueError`` saying why
        not (a path, a traversal, a missing or oversized file)."""
        if not isinstance(name, str) or not _FILE_NAME.fullmatch(name) or ".." in name:
            raise ValueError(
                "file: expected the name of a file in the task files directory, "
                f"such as 'sales.csv', got {name!r}"
            )
        root = self.directory.resolve()
        path = (root / name).resolve()
        if path.parent != root:  # a symbolic link out of the directory
            raise ValueError(f"file: {name!r} is outside the task files directory")
        if not path.is_file():
            raise ValueError(f"file: no file {name!r}; the files are {self._names()}")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ValueError(f"file: {name!r} has {size} bytes, more than {MAX_FILE_BYTES}")
        return path

    def _names(self) -> str:
        names = sorted(p.name for p in self.directory.iterdir() if p.is_file())
        return ", ".join(names[:50]) or "none"

    def tools(self) -> list[Callable[..., Any]]:
        return [self.list_files, self.sum_column, self.count_words, self.wait, report_failure]

    async def list_files(self) -> dict[str, Any]:
        """Lists the files the other tools can read, with their sizes in bytes."""
        files = sorted(
            (p for p in self.directory.iterdir() if p.is_file() and not p.name.startswith(".")),
            key=lambda p: p.name,
        )
        return {"files": [{"name": p.name, "bytes": p.stat().st_size} for p in files[:200]]}

    async def sum_column(self, file: str, column: str) -> dict[str, Any]:
        """Adds up the numbers in one column of a CSV file (with a header row).
        Empty cells are skipped.

        Args:
          file: The CSV file's name, e.g. "sales.csv".
          column: The column's name in the header row, e.g. "amount".
        """
        try:
            path = self.resolve(file)
            return await asyncio.to_thread(_sum_column, path, column)
        except (ValueError, UnicodeDecodeError, csv.Error) as exc:
            return {"error": str(exc)}

    async def count_words(self, file: str) -> dict[str, Any]:
        """Counts the words (runs of non-space characters) and lines of a text file.

        Args:
          file: The file's name, e.g. "notes.txt".
        """
        try:
            text = (await asyncio.to_thread(self.resolve(file).read_bytes)).decode()
        except (ValueError, UnicodeDecodeError) as exc:
            return {"error": str(exc)}
        return {"file": file, "words": len(text.split()), "lines": len(text.splitlines())}

    async def wait(self, seconds: float) -> dict[str, Any]:
        """Waits on a timer, for work that must wait (e.g. "check again in 10 seconds").

        Args:
          seconds: How long to wait, more than 0 and at most 600.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            return {"error": f"seconds: expected a number, got {seconds!r}"}
        if not 0 < seconds <= MAX_WAIT_S:
            return {
                "error": f"seconds: expected more than 0 and at most {MAX_WAIT_S:g}, got {seconds}"
            }
        await asyncio.sleep(seconds)
        return {"waited": seconds}


def report_failure(reason: str) -> dict[str, Any]:
    """Reports that the task cannot be done, and why. Call it instead of
    answering when your tools cannot achieve the task.

    Args:
      reason: A short reason the user can understand.
    """
    return {"reported": clip(str(reason), MAX_FAILURE_CHARS)}


def _sum_column(path: Path, column: str) -> dict[str, Any]:
    reader = csv.DictReader(io.StringIO(path.read_bytes().decode()))
    header = reader.fieldnames or []
    name = (
        column
        if column in header
        else next((h for h in header if h.strip().lower() == str(column).strip().lower()), None)
    )
    if name is None:
        raise ValueError(f"column: no column {column!r} in {path.name}; the columns are {header}")
    values = []
    for line, row in enumerate(reader, start=2):
        cell = (row.get(name) or "").strip()
        if not cell:
            continue
        try:
            value = float(cell)
        except ValueError:
            raise ValueError(f"{path.name} line {line}: {name} is not a number: {cell!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"{path.name} line {line}: {name} is not finite: {cell!r}")
        values.append(value)
    return {"file": path.name, "column": name, "sum": math.fsum(values), "rows": len(values)}


# ---------------------------------------------------------------- the agent and its runs


@dataclasses.dataclass(frozen=True)
class BackendOutcome:
    """How a backend run ended: an answer, or a failure the agent reported.
    ``inline``: the answer's part shown rather than said (Markdown)."""

    result: str | None
    failure: str | None
    inline: str | None = None


class Backend:
    def __init__(
        self, settings: Settings, session_service: BaseSessionService, model: BaseLlm
    ) -> None:
        """``model``: the agent's text model (``agent.models.task_model``)."""
        self.files = TaskFiles(settings.data_dir / TASK_FILES_DIR)
        self.agent = Agent(
            name="task_agent",
            model=model,
            instruction=BACKEND_INSTRUCTION,
            tools=[*self.files.tools()],
        )
        self.runner = Runner(
            app_name=tasks_app_name(settings.app_name),
            agent=self.agent,
            session_service=session_service,
            auto_create_session=True,  # the owner's backend session, on its first task
        )
        self.run_config = RunConfig(max_llm_calls=settings.max_task_steps)
        self.max_result_chars = settings.max_task_result_chars

    async def ask_status(self, record: TaskRecord) -> dict[str, str] | None:
        """Nothing beyond the record: the backend agent runs in this server."""
        return None

    async def run(
        self, record: TaskRecord, abort: asyncio.Event, on_progress: Progress
    ) -> BackendOutcome:
        """Run ``record``'s objective in its owner's backend session.

        ``abort`` stops the run: ADK ends it and seals the session (every call
        it left unanswered gets an error response), so the next task starts
        from a consistent history. ``on_progress({"tool": …, "detail": …}, None)`` is
        awaited for each tool call as it happens.
        """
        message = types.Content(
            role="user", parts=[types.Part(text=f"Task {record.id}: {record.objective}")]
        )
        answer: str | None = None
        failure: str | None = None
        events = self.runner.run_async(
            user_id=TASKS_USER,
            session_id=backend_session_id(record.owner),
            new_message=message,
            run_config=self.run_config,
            abort_signal=abort,
        )
        async with aclosing(events):
            async for event in events:
                for call in event.get_function_calls():
                    args = call.args or {}
                    if call.name == "report_failure":
                        failure = clip(
                            str(args.get("reason") or "no reason given"), MAX_FAILURE_CHARS
                        )
                    detail = json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)
                    await on_progress(
                        {"tool": call.name or "?", "detail": clip(detail, MAX_PROGRESS_DETAIL)},
                        None,
                    )
                if event.error_code and failure is None and not abort.is_set():
                    failure = clip(
                        f"the model reported an error ({event.error_code})", MAX_FAILURE_CHARS
                    )
                if event.is_final_response() and event.content and event.content.parts:
                    text = "".join(p.text or "" for p in event.content.parts if not p.thought)
                    if text.strip():
                        answer = clip(text.strip(), self.max_result_chars)
        if failure is None and answer is None and not abort.is_set():
            failure = "the backend finished without an answer"
        return BackendOutcome(answer, failure)

    async def close(self) -> None:
        await self.runner.close()
