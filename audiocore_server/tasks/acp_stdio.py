"""The ACP agent's stdout and stderr, read so that no agent can stall the
event loop or take the server's memory.

* ``LineReader``: a stream's lines, read in slices of ``SLICE_BYTES`` (the
  pipe's buffer is as small: a flooding agent waits on its own writes),
  yielding to the loop after every slice and every ``yield_every`` lines —
  a burst already buffered is not read in one turn of the loop. A line
  longer than its bound is never held whole: cut (stderr), or dropped and
  counted (stdout); one that runs on past ``give_up_bytes`` raises
  ``LineTooLong``.
* ``AgentStdout``: the ``acp`` package's message transport over the
  agent's stdin/stdout, on a ``LineReader``: the package's own keeps
  appending to a line past its limit (a 400 MiB line without a newline
  grew the server by 800 MB). A dropped line is logged; a line that does
  not end ends the agent (``failure`` says why, for its task's error).
  Messages of more than ``THREAD_PARSE_BYTES`` are parsed in a thread.
* ``StderrLog``: the agent's stderr lines into our log, redacted and cut,
  at most ``STDERR_BURST`` at once and ``STDERR_LINES_PER_S`` after: the
  rest counted and said in one line.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from .redact import screened

SLICE_BYTES = 64 * 1024  # one read of a pipe, at most
YIELD_EVERY_MESSAGES = 4  # of stdout: each makes a task whose work runs in the next turn
YIELD_EVERY_LINES = 256  # of stderr: each one a few microseconds unless logged
# One message of its stdout (a diff, a file) at most; past it the line is
# dropped, and one that runs on past 4 times that ends the agent.
MAX_LINE_BYTES = 8 * 1024 * 1024
GIVE_UP_BYTES = 4 * MAX_LINE_BYTES
# Messages of its stdout handled a second, after a burst as large: a chatty
# agent sends a few hundred (a chunk per token); a flooding one is held to
# this, about a fifth of a core here (each is validated by the package),
# and waits on its own writes meanwhile.
MESSAGES_PER_S = 2000.0
PACED_BATCH = 50.0
THREAD_PARSE_BYTES = 64 * 1024  # a message longer than this is parsed off the loop
MAX_STDERR_LINE = 500  # characters of one stderr line in our log
STDERR_BURST = 50.0  # stderr lines logged at once…
STDERR_LINES_PER_S = 20.0  # …and a second, after

log = logging.getLogger(
    "audiocore_server.tasks.acp_backend"
)  # the agent's lines where they always were


class Allowance:
    """So many a second, and at most ``burst`` saved up (a token bucket)."""

    def __init__(self, per_s: float, burst: float) -> None:
        self.per_s, self.burst = per_s, burst
        self._tokens = burst
        self._at = time.monotonic()
        self._empty_until = 0.0  # none to take before this

    def take(self) -> bool:
        """One, if there is one now."""
        now = time.monotonic()
        if now < self._empty_until:  # the common case in a flood: decided at once
            return False
        self._refill(now)
        if self._tokens < 1.0:
            self._empty_until = now + (1.0 - self._tokens) / self.per_s
            return False
        self._tokens -= 1.0
        return True

    def wait_for(self, count: float) -> float:
        """Seconds until ``count`` are there."""
        self._refill(time.monotonic())
        return max(0.0, (count - self._tokens) / self.per_s)

    def _refill(self, now: float) -> None:
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.per_s)
        self._at = now


class LineTooLong(Exception):
    """A line ran on past the reader's ``give_up_bytes``."""


class LineReader:
    """``stream``'s lines (with their newline), at most ``max_bytes`` each
    (see the module docstring); ``on_dropped`` is told the length of each
    line dropped."""

    def __init__(
        self,
        stream: asyncio.StreamReader,
        max_bytes: int,
        *,
        cut: bool = False,
        give_up_bytes: int | None = None,
        yield_every: int = YIELD_EVERY_MESSAGES,
        on_dropped: Callable[[int], None] | None = None,
    ) -> None:
        self._stream = stream
        self._max = max_bytes
        self._cut = cut
        self._give_up = give_up_bytes
        self._yield_every = yield_every
        self._partial = bytearray()
        self._skipping: int | None = None  # bytes of an overlong line seen so far
        self._lines: collections.deque[bytes] = collections.deque()
        self._since_yield = 0
        self._eof = False
        self._on_dropped = on_dropped

    async def readline(self) -> bytes:
        """The next line; b"" at the end of the stream."""
        while not self._lines:
            if self._eof:
                return b""
            data = await self._stream.read(SLICE_BYTES)
            if data:
                self._feed(data)
            else:
                self._end()
            # Read from a buffer, ``read`` returns without giving the loop a turn.
            await asyncio.sleep(0)
            self._since_yield = 0
        self._since_yield += 1
        if self._since_yield >= self._yield_every:
            self._since_yield = 0
            await asyncio.sleep(0)
        return self._lines.popleft()

    def _feed(self, data: bytes) -> None:
        *ended, tail = data.split(b"\n")  # split in C: a burst is thousands of lines
        if ended:
            self._piece(ended[0], True)  # ends the line under way
            rest = ended[1:]
            if rest and max(map(len, rest)) < self._max:
                self._lines.extend([line + b"\n" for line in rest])
            else:
                for line in rest:
                    self._piece(line, True)
        if tail:
            self._piece(tail, False)

    def _piece(self, piece: bytes, ends: bool) -> None:
        """Part of a line; ``ends``: its newline came after it."""
        if ends:
            piece += b"\n"
        if self._skipping is not None:
            self._skipping += len(piece)
        else:
            self._partial += piece
            if len(self._partial) > self._max:
                self._skipping = len(self._partial)
                if self._cut:
                    self._lines.append(bytes(self._partial[: self._max]) + b"\n")
                self._partial.clear()
        if ends:
            self._line_ended()
        elif (
            self._skipping is not None
            and self._give_up is not None
            and self._skipping > self._give_up
        ):
            raise LineTooLong(self._skipping)

    def _line_ended(self) -> None:
        if self._skipping is not None:
            if not self._cut and self._on_dropped is not None:
                self._on_dropped(self._skipping)
            self._skipping = None
        else:
            self._lines.append(bytes(self._partial))
            self._partial.clear()

    def _end(self) -> None:
        self._eof = True
        if self._partial or self._skipping is not None:
            self._line_ended()


class AgentStdout:
    """The ``acp`` package's ``Transport`` over the agent's stdio (see the
    module docstring). ``on_failure`` is called once with why, when the
    agent must be ended."""

    def __init__(
        self,
        stdout: asyncio.StreamReader,
        stdin: asyncio.StreamWriter,
        on_failure: Callable[[str], None],
    ) -> None:
        self._lines = LineReader(
            stdout, MAX_LINE_BYTES, give_up_bytes=GIVE_UP_BYTES, on_dropped=self._dropped
        )
        self._stdin = stdin
        self._send_lock = asyncio.Lock()
        self._on_failure = on_failure
        self._pace = Allowance(MESSAGES_PER_S, MESSAGES_PER_S)

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        async with self._send_lock:  # one message after another, whole
            self._stdin.write(data)
            await self._stdin.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await self._lines.readline()
            except LineTooLong as exc:
                self._on_failure(
                    f"the ACP agent sent a line of more than {exc.args[0] // 2**20} MiB "
                    "on its stdout without ending it, and was stopped"
                )
                return None
            if not line:
                return None
            if not line.strip():
                continue
            try:
                message = (
                    await asyncio.to_thread(json.loads, line)
                    if len(line) > THREAD_PARSE_BYTES
                    else json.loads(line)
                )
            except ValueError:
                log.warning("the ACP agent sent a line that is not JSON (%d bytes)", len(line))
                continue
            if isinstance(message, dict):
                await self._paced()
                return message
            log.warning("the ACP agent sent JSON that is not a message (%d bytes)", len(line))

    async def _paced(self) -> None:
        while not self._pace.take():
            # Waits for 50 messages, not one: a timer is late by a millisecond
            # or so, which would halve the rate one message at a time.
            await asyncio.sleep(self._pace.wait_for(PACED_BATCH))

    @staticmethod
    def _dropped(size: int) -> None:
        log.warning(
            "the ACP agent sent a line of %d bytes on its stdout (at most %d): dropped",
            size,
            MAX_LINE_BYTES,
        )

    async def close(self) -> None:
        """Nothing of its own: the process's streams are closed with it."""


class StderrLog:
    """The agent's stderr lines into our log (see the module docstring)."""

    def __init__(self) -> None:
        self._allowance = Allowance(STDERR_LINES_PER_S, STDERR_BURST)
        self.not_logged = 0

    async def follow(self, stream: asyncio.StreamReader) -> None:
        # A line is cut long before it is screened: its first bytes are all
        # the log shows (with room for a key across the cut, hidden whole).
        lines = LineReader(stream, 4 * MAX_STDERR_LINE, cut=True, yield_every=YIELD_EVERY_LINES)
        try:
            while line := await lines.readline():
                if line.strip() and self._allowed():
                    text = line.decode(errors="replace").rstrip()
                    # The agent's own keys stay out of our log as out of its progress.
                    log.info("ACP agent: %s", screened(text, MAX_STDERR_LINE))
        finally:  # at its end, or when the agent is stopped
            self._tell_not_logged()

    def _allowed(self) -> bool:
        if not self._allowance.take():
            self.not_logged += 1
            return False
        self._tell_not_logged()
        return True

    def _tell_not_logged(self) -> None:
        if self.not_logged:
            log.warning(
                "ACP agent: %d lines of its stderr not logged (more than %g a second)",
                self.not_logged,
                STDERR_LINES_PER_S,
            )
            self.not_logged = 0
