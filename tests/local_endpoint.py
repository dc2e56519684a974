"""What the local provider endpoints (``tests.gemini_live``,
``tests.openai_realtime``) share and nothing else: their own event loop in a
thread, the connection records tests wait on, and the ``python -m`` runner.
Each endpoint keeps its own wire, answers and switches.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Generic, Protocol, Self, TypeVar


class _Record(Protocol):
    index: int  # its place in ``records``


R = TypeVar("R", bound=_Record)  # a connection record
T = TypeVar("T")
E = TypeVar("E")


class ThreadedEndpoint(Generic[R]):
    """An endpoint on its own event loop in a thread, so a test's clients, the
    server under test and the endpoint never share a loop. Subclasses give
    ``_listen`` (binds, sets ``self.port``), ``_shutdown`` and ``_describe``
    (a record in a failed wait's message); they add records with ``update``."""

    thread_name = "local-endpoint"

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._records: list[R] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            loop = self._loop = asyncio.new_event_loop()
            loop.run_until_complete(self._listen())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=run, name=self.thread_name, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self.thread_name} did not start")

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = self._thread = None

    async def _listen(self) -> None:
        raise NotImplementedError

    async def _shutdown(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ records
    @property
    def records(self) -> list[R]:
        with self._lock:
            return list(self._records)

    def wait_for(self, predicate: Callable[[list[R]], T], timeout: float = 20) -> T:
        """Block until ``predicate(records)`` is truthy (checked on every change); returns it."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not (found := predicate(self._records)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = [self._describe(r) for r in self._records]
                    raise AssertionError(f"endpoint: condition not met within {timeout}s: {seen}")
                self._lock.wait(remaining)
            return found

    async def wait_for_async(self, predicate: Callable[[list[R]], T], timeout: float = 20) -> T:
        return await asyncio.to_thread(self.wait_for, predicate, timeout)

    def update(self, change: Callable[[], None]) -> None:
        """Change the records under the lock and wake every waiter."""
        with self._lock:
            change()
            self._lock.notify_all()

    def add_record(self, record: R) -> None:
        """Append a new connection's record and number it."""

        def add() -> None:
            record.index = len(self._records)
            self._records.append(record)

        self.update(add)

    def _describe(self, record: R) -> object:
        return record


# ---------------------------------------------------------------- python -m
def endpoint_parser(prog: str, doc: str | None, defaults: Any) -> argparse.ArgumentParser:
    """The options both endpoints' ``__main__`` take; ``defaults`` is the
    endpoint's ``EndpointConfig()`` (its ``speed`` and ``burst_ms``)."""
    parser = argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=0, help="default: any free port")
    parser.add_argument("--cert-dir", type=Path, help="where to write the self-signed cert")
    parser.add_argument("--api-key", action="append", help="accepted key (repeatable)")
    parser.add_argument(
        "--speed", type=float, default=defaults.speed, help="answers at this multiple of real time"
    )
    parser.add_argument(
        "--burst-ms", type=int, default=defaults.burst_ms, help="answers in bursts of this much"
    )
    return parser


def cert_dir(args: argparse.Namespace, prefix: str) -> Path:
    return args.cert_dir or Path(tempfile.mkdtemp(prefix=prefix))


def serve_until_signalled(
    endpoint: AbstractContextManager[E], info: Callable[[E], dict[str, str]]
) -> None:
    """Enter the endpoint, print ``info`` (and the pid) as one JSON line, and
    serve until SIGINT or SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with endpoint as entered:
        print(json.dumps({**info(entered), "pid": os.getpid()}), flush=True)
        stop.wait()
    print("stopped", file=sys.stderr)
