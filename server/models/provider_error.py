"""A model service's failure, in words fit for the client."""

from __future__ import annotations


class ProviderError(Exception):
    """The model service refused or ended the live session. The message is
    the service's own reason (a refused key, a closed session) and never
    holds the key or our internals: the client is shown it as it is."""
