"""Hostile ACP agents that flood (``acp_raw_agent.py``, real processes on
the real ACP path): stderr lines by the hundred thousand, progress updates
by the ten thousand, a stdout line past the bound, one without an end. The
flood is survived, what is logged and shown is bounded, an agent that will
not end its line is ended, and memory stays bounded — correctness only:
the loop's lag under each is measured by ``benchmarks/bench_hostile.py``."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shlex
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_tasks import all_final, running, until

from audiocore_server import Settings
from audiocore_server.tasks import TaskManager, TaskRecord
from audiocore_server.tasks.acp_stdio import STDERR_BURST, LineReader, StderrLog

RAW = Path(__file__).resolve().parent / "acp_raw_agent.py"
LOGGER = "audiocore_server.tasks.acp_backend"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        model="offline",
        allowed_hosts=("testserver",),
        task_backend="acp",
        acp_command=shlex.join([sys.executable, str(RAW), "none"]),
        acp_prompt_timeout_s=120.0,
        acp_restart_backoff_s=0.05,
        task_cancel_grace_s=4.0,
    )


def hostile(settings: Settings, *args: str) -> Settings:
    return dataclasses.replace(settings, acp_command=shlex.join([sys.executable, str(RAW), *args]))


async def run_one(manager: TaskManager, objective: str) -> TaskRecord:
    record = await manager.submit("alice", objective)
    # A flood is read at its pace (2000 messages a second): longer than
    # the usual bound on a loaded machine.
    return (await until(manager, "alice", all_final(record.id), timeout=120))[record.id]


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@contextlib.contextmanager
def rss_peak() -> Iterator[list[int]]:
    """The growth of this process's RSS at its peak while inside (sampled
    every 5 ms by a thread: a growth the size of a flood lasts far longer)."""
    base = rss_bytes()
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.005):
            peak[0] = max(peak[0], rss_bytes() - base)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()
        peak[0] = max(peak[0], rss_bytes() - base)


# ---------------------------------------------------------------- stderr


def test_a_stderr_burst_is_read_in_slices_that_let_the_loop_run() -> None:
    """100,000 lines already buffered: the loop gets turns while they are
    read (a ``readline`` on a buffer never gave it one), and the log gets
    at most the burst's lines, then one line counting the rest."""

    async def scenario() -> int:
        stream = asyncio.StreamReader()
        stream.feed_data(b"".join(b"line %d\n" % n for n in range(100_000)))
        stream.feed_eof()
        done = False
        turns = 0

        async def ticker() -> None:
            nonlocal turns
            while not done:
                await asyncio.sleep(0)
                turns += 1

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0)  # the ticker is waiting for its turn
        before = turns
        await StderrLog().follow(stream)
        done = True
        await ticking
        return turns - before

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        turns = asyncio.run(scenario())
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert turns >= 20, turns  # 1.1 MB in 64 KiB slices, and every 256 lines
    lines = [r.getMessage() for r in records]
    shown = [m for m in lines if m.startswith("ACP agent: line ")]
    counted = [int(m.split()[2]) for m in lines if "lines of its stderr not logged" in m]
    assert shown[:3] == ["ACP agent: line 0", "ACP agent: line 1", "ACP agent: line 2"]
    assert STDERR_BURST <= len(shown) < 1000
    assert len(shown) + sum(counted) == 100_000


def test_long_lines_are_cut_or_dropped_never_held_whole() -> None:
    async def lines(data: bytes, **options: object) -> list[bytes]:
        stream = asyncio.StreamReader()
        stream.feed_data(data)
        stream.feed_eof()
        reader = LineReader(stream, 10, **options)  # type: ignore[arg-type]
        found = []
        while line := await reader.readline():
            found.append(line)
        return found

    data = b"short\n" + b"x" * 25 + b"\nnext\nlast without end"
    assert asyncio.run(lines(data, cut=True)) == [
        b"short\n",
        b"xxxxxxxxxx\n",
        b"next\n",
        b"last witho\n",
    ]
    dropped: list[int] = []
    assert asyncio.run(lines(data, on_dropped=dropped.append)) == [b"short\n", b"next\n"]
    assert dropped == [26, 16]
    with pytest.raises(Exception) as gave_up:
        asyncio.run(lines(b"y" * 100_000, give_up_bytes=50_000))
    assert type(gave_up.value).__name__ == "LineTooLong"


def test_an_agent_s_stderr_flood_is_survived_and_logged_bounded(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> TaskRecord:
        async with running(hostile(settings, "stderr-flood", "200000")) as manager:
            return await run_one(manager, "tidy the notes")

    with caplog.at_level(logging.INFO, logger=LOGGER):
        done = asyncio.run(scenario())
    assert (done.state, done.result) == ("completed", "Done."), done
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    shown = [m for m in lines if m.startswith("ACP agent: stderr line ")]
    counted = [int(m.split()[2]) for m in lines if "lines of its stderr not logged" in m]
    assert len(shown) < 2000, len(shown)
    # Every line read was logged or counted (the last few thousand may be
    # left unread in the pipe when the agent is stopped at the end).
    assert 150_000 < len(shown) + sum(counted) <= 200_000


# ---------------------------------------------------------------- progress


def test_an_agent_s_progress_flood_makes_a_few_cards_not_thousands(settings: Settings) -> None:
    async def scenario() -> tuple[TaskRecord, int]:
        async with running(hostile(settings, "progress-flood", "20000")) as manager:
            cards: list[object] = []
            manager.subscribe("alice", cards.append)
            done = await run_one(manager, "tidy the notes")
            return done, len(cards)

    done, cards = asyncio.run(scenario())
    assert (done.state, done.result) == ("completed", "Done."), done
    # At most four a second, and a handful for the task's own steps; the
    # agent's 20,000 updates are read in far less than 100 s.
    assert cards < 400, cards


# ---------------------------------------------------------------- stdout lines


def test_a_stdout_line_past_the_bound_is_dropped_and_the_agent_goes_on(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> TaskRecord:
        async with running(hostile(settings, "long-line", "9")) as manager:
            return await run_one(manager, "tidy the notes")

    with caplog.at_level(logging.INFO, logger=LOGGER), rss_peak() as peak:
        done = asyncio.run(scenario())
    assert (done.state, done.result) == ("completed", "Done."), done
    warned = [r.getMessage() for r in caplog.records if "on its stdout" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("the ACP agent sent a line of 94")
    assert warned[0].endswith("bytes on its stdout (at most 8388608): dropped")
    assert peak[0] < 100 * 2**20, peak[0]


def test_an_endless_stdout_line_ends_the_agent_and_memory_stays_bounded(
    settings: Settings,
) -> None:
    async def scenario() -> TaskRecord:
        async with running(hostile(settings, "endless-line", "400")) as manager:
            return await run_one(manager, "tidy the notes")

    with rss_peak() as peak:
        done = asyncio.run(scenario())
    assert done.state == "failed"
    assert done.error == (
        "the ACP agent sent a line of more than 32 MiB on its stdout without ending it, "
        "and was stopped"
    )
    # 400 MiB were on their way: reading them whole took 800 MB.
    assert peak[0] < 150 * 2**20, peak[0]
