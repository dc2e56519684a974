"""Why a live connection ends, and how the client is told.

Any part of a connection raises ``Shutdown`` to end it: the close code, the
reason, and the ``error`` chunk the client is sent first. ``internal_error``
is the one for failures of our own or the model's: it is logged under a
fresh reference, and the client gets the reference, never the exception's
text.
"""

from __future__ import annotations

import logging
import sys

from ..agent.runners import Agents, AppRunners, UnknownApp
from ..models.provider_error import ProviderError, describe_model_failure
from ..wire import chunks, protocol

log = logging.getLogger(__name__)


class Shutdown(Exception):
    """Why a connection ends. ``code`` None: the client is already gone."""

    def __init__(
        self,
        code: int | None = protocol.CLOSE_NORMAL,
        reason: str = "",
        error: str = "",
        *,
        unsendable: bool = False,
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.error = error  # sent as an `error` chunk before closing
        # The socket's buffers are full: a close frame would wait behind
        # them for as long as the client does not read (for ever).
        self.unsendable = unsendable


def internal_error(session_id: str | None, error: BaseException | None = None) -> Shutdown:
    """Log the exception (``error``, or the one being handled) under a fresh
    reference; the client gets the reference, never the exception's text."""
    ref = chunks.new_id("err")
    error = error or sys.exc_info()[1]
    assert error is not None
    log.error(
        "connection failed (session %s, ref %s)",
        session_id,
        ref,
        exc_info=(type(error), error, error.__traceback__),
    )
    # The class only: an exception's text may hold anything. A model
    # service's refusal says what to fix (a bad key, an unknown model).
    what = (
        str(error)
        if isinstance(error, ProviderError)
        else describe_model_failure(error) or f"the live session failed: {type(error).__name__}"
    )
    return Shutdown(
        protocol.CLOSE_INTERNAL_ERROR,
        "internal error",
        error=f"{what} (server log reference {ref})",
    )


# Made anew each time, never shared: a raised exception keeps its traceback,
# and with it the frames of the connection that raised it.


def session_taken() -> Shutdown:
    return Shutdown(
        protocol.CLOSE_POLICY_VIOLATION,
        "session resumed by another connection",
        error="this session was resumed by another connection",
    )


def session_not_found() -> Shutdown:
    # ADK's /run_live closes so for a session the client did not create first.
    return Shutdown(protocol.CLOSE_PROTOCOL_ERROR, "Session not found")


def session_busy() -> Shutdown:
    return Shutdown(
        protocol.CLOSE_TRY_AGAIN_LATER,
        "session is busy",
        error="this session is still running elsewhere; try again later",
    )


def client_gone() -> Shutdown:
    return Shutdown(code=None)


def app_to_serve(agents: Agents, name: str | None) -> AppRunners:
    """The app a client selected (``name``; None: the only one), or the
    ``Shutdown`` that ends its connection: an app the server does not serve
    (the error names those it does; the close reason is ADK's /run_live's
    own), or one the live model cannot run."""
    try:
        app = agents.select(name)
    except UnknownApp as exc:
        raise Shutdown(protocol.CLOSE_POLICY_VIOLATION, "App not found", error=str(exc)) from None
    if app.live_refusal is not None:
        raise Shutdown(
            protocol.CLOSE_INTERNAL_ERROR, "model cannot run the agent", app.live_refusal
        )
    return app
