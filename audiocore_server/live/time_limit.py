"""A live socket's time under its credentials: stopped (1008) once its
token's ``liveMinutes``, or its owner's daily quota, are over."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

from starlette.types import Scope

from ..gate.credentials import principal_of
from ..wire import protocol
from .shutdown import Shutdown


@contextlib.contextmanager
def live_time_limit(scope: Scope, stop: Callable[[Shutdown], None]) -> Iterator[None]:
    """While a live socket runs: stopped (1008) once its token's
    ``liveMinutes`` are over."""
    principal = principal_of(scope)
    seconds = principal.live_seconds if principal is not None else None
    if seconds is None:
        yield
        return
    over = Shutdown(
        protocol.CLOSE_POLICY_VIOLATION,
        "live time limit reached",
        error="this token's live time is over; connect again with a new one",
    )
    timer = asyncio.get_running_loop().call_later(seconds, stop, over)
    try:
        yield
    finally:
        timer.cancel()
