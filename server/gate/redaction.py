"""Credentials out of the server's own logs: uvicorn writes every socket's
path with its query, where a browser's token may ride."""

from __future__ import annotations

import logging
import re

_TOKEN_IN_URL = re.compile(r"([?&]token=)[^&\s\"]+")


class RedactTokens(logging.Filter):
    """uvicorn logs every socket's path with its query: a ``?token=`` there
    is logged as ``token=***``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN_IN_URL.sub(r"\1***", arg) if isinstance(arg, str) else arg
                for arg in record.args
            )
        return True


def redact_tokens_in_server_logs() -> None:
    """Add ``RedactTokens`` to uvicorn's loggers, once."""
    for name in ("uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokens) for f in logger.filters):
            logger.addFilter(RedactTokens())
