"""Reading a request's JSON body within bounds: shared by the HTTP surfaces."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from . import protocol, strict_json


class HttpError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


async def read_json_body(request: Request, limit: int) -> Any:
    """The request body as JSON (``None`` if empty); 413 past ``limit`` bytes,
    400 if it is not JSON (``NaN`` and ``Infinity`` are not)."""
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > limit:
        raise HttpError(413, f"request body of {size} bytes exceeds the limit of {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HttpError(413, f"request body exceeds the limit of {limit} bytes")
    if not body.strip():
        return None
    try:
        data = strict_json.loads(body)
    except strict_json.NonFiniteNumber as exc:
        raise HttpError(400, f"request body: {exc}") from None
    except (ValueError, RecursionError):
        raise HttpError(400, "request body: expected JSON") from None
    try:
        protocol.check_json_tree(data)
    except protocol.InputError as exc:
        raise HttpError(400, f"request body: {exc}") from None
    return data
