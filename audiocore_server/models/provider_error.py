"""A model service's failure, in words fit for the client: the service's own
refusal (``ProviderError``), or a Google service's close or an unreachable
one (``describe_model_failure``)."""

from __future__ import annotations

import socket
import ssl

from google.genai import errors
from websockets.exceptions import InvalidHandshake


class ProviderError(Exception):
    """The model service refused or ended the live session. The message is
    the service's own reason (a refused key, a closed session) and never
    holds the key or our internals: the client is shown it as it is."""


def describe_model_failure(error: BaseException) -> str | None:
    """What to tell the client when the live run failed talking to Google
    (None: not such a failure). A Live API close carries the service's own
    reason for developers ("API key not valid. …"), never our internals."""
    if isinstance(error, errors.APIError) and isinstance(error.code, int) and error.code < 5000:
        reason = error.details if isinstance(error.details, str) else ""
        return f"the model service closed the live session: {error.code} {reason}".strip()
    if isinstance(
        error, (ConnectionError, socket.gaierror, ssl.SSLError, TimeoutError, InvalidHandshake)
    ):
        return f"the model service could not be reached ({type(error).__name__})"
    return None
