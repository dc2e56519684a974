"""Reading a request's JSON body within bounds: shared by the HTTP surfaces."""

from __future__ import annotations

import logging
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request

from . import fields, large_json, protocol, strict_json

log = logging.getLogger(__name__)


class HttpError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail

    @property
    def headers(self) -> dict[str, str]:
        """What the response must carry: after a 408 the body may still be
        on its way, so the connection is closed at once (uvicorn would
        otherwise hold it for its keep-alive timeout)."""
        return {"connection": "close"} if self.status == 408 else {}


async def read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The request body's bytes; 413 past ``limit`` bytes, 408 if it has not
    all come within ``timeout_s`` (a body that is declared and never sent
    would hold the request, and its socket, for ever)."""
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > limit:
        raise HttpError(413, f"request body of {size} bytes exceeds the limit of {limit}")
    body = bytearray()
    try:
        with anyio.fail_after(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise HttpError(413, f"request body exceeds the limit of {limit} bytes")
    except TimeoutError:
        raise HttpError(408, f"request body: not received in full within {timeout_s:g} s") from None
    except ClientDisconnect:
        # Nobody is left to answer; one line, not a traceback.
        client = request.client.host if request.client else "?"
        log.info("%s %s: the client went away during its body", client, request.url.path)
        raise HttpError(400, "request body: the client went away") from None
    return bytes(body)


async def read_json_body(request: Request, limit: int, timeout_s: float) -> Any:
    """The request body as JSON (``None`` if empty): ``read_body``, then
    ``parse_json``, in a thread past ``large_json.SMALL`` (in pieces: one C
    call over 8 MB of small objects would hold the GIL, and the live
    conversations' loop, for half a second)."""
    body = await read_body(request, limit, timeout_s)
    # As for a socket's frame (protocol.load_json): thousands of containers
    # would be thousands of objects for the collector to walk, in this process.
    containers = body.count(b"{") + body.count(b"[")
    if containers > protocol.MAX_JSON_CONTAINERS:
        raise HttpError(
            413,
            f"request body: about {containers} JSON objects and arrays exceeds the limit of "
            f"{protocol.MAX_JSON_CONTAINERS}",
        )
    if len(body) <= large_json.SMALL:
        return parse_json(body)
    return await anyio.to_thread.run_sync(parse_json, body)


def parse_json(body: bytes) -> Any:
    """A body as JSON (``None`` if empty); 400 if it is not JSON (``NaN``
    and ``Infinity`` are not), is nested too deep or holds lone surrogates."""
    if not body.strip():
        return None
    try:
        data = large_json.loads(body, protocol.MAX_JSON_DEPTH)
    except strict_json.NonFiniteNumber as exc:
        raise HttpError(400, f"request body: {exc}") from None
    except (ValueError, RecursionError):  # UnicodeDecodeError, TooDeep included
        raise HttpError(400, "request body: expected JSON") from None
    try:
        protocol.check_json_tree(data)
    except fields.InputError as exc:
        raise HttpError(400, f"request body: {exc}") from None
    return data
