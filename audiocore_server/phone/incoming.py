"""``POST /phone/incoming``: the webhook Twilio calls when a call comes in,
answered with the TwiML that opens the call's media stream.

The request must carry Twilio's signature of its URL and form parameters
(``gate/twilio_signature.py``; 403 otherwise). The answer connects the
call to ``/phone/stream`` on the host Twilio called (``wss`` from
``https``), and passes the webhook URL's query parameters through as
``<Parameter>``s — the stream's ``customParameters``: ``app``, ``user``,
``token`` (``stream.py``). A ``<Stream>`` URL takes no query string, so
this is the way a number's configuration reaches its stream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import parse_qsl
from xml.sax.saxutils import quoteattr

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ..gate import twilio_signature
from ..gate.credentials import client_address
from ..settings import Settings

log = logging.getLogger(__name__)

STREAM_PATH = "/phone/stream"
MAX_FORM_BYTES = 64 * 1024  # Twilio's call parameters are a few hundred bytes
MAX_PARAMETERS = 16
MAX_PARAMETER_CHARS = 1024


def twiml(stream_url: str, parameters: list[tuple[str, str]]) -> str:
    """The TwiML that connects the call to a bidirectional stream."""
    children = "".join(
        f"<Parameter name={quoteattr(name)} value={quoteattr(value)}/>"
        for name, value in parameters
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Response><Connect><Stream url={quoteattr(stream_url)}>{children}"
        "</Stream></Connect></Response>"
    )


def incoming_route(settings: Settings, on_refused: Callable[[str], None]) -> Route:
    auth_token = settings.twilio_auth_token
    assert auth_token is not None, "the phone routes are off without an auth token"

    async def incoming(request: Request) -> Response:
        declared = request.headers.get("content-length", "0")
        if not declared.isdigit() or int(declared) > MAX_FORM_BYTES:
            return PlainTextResponse(f"expected a form of at most {MAX_FORM_BYTES} bytes", 413)
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return PlainTextResponse(f"expected a form of at most {MAX_FORM_BYTES} bytes", 413)
        try:
            form = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            return PlainTextResponse("expected a UTF-8 form", 400)
        if not twilio_signature.verified(
            request.scope, auth_token, settings.phone_public_url, form
        ):
            on_refused("twilio_signature")
            log.warning(
                "refused phone call from %s: Twilio signature missing or wrong",
                client_address(request.scope),
            )
            return PlainTextResponse("Forbidden: Twilio signature missing or wrong", 403)
        parameters = list(request.query_params.multi_items())
        if len(parameters) > MAX_PARAMETERS or any(
            len(name) > MAX_PARAMETER_CHARS or len(value) > MAX_PARAMETER_CHARS
            for name, value in parameters
        ):
            return PlainTextResponse(
                f"expected at most {MAX_PARAMETERS} query parameters "
                f"of at most {MAX_PARAMETER_CHARS} characters",
                400,
            )
        url = twilio_signature.phone_url(request.scope, settings.phone_public_url, STREAM_PATH)
        return Response(twiml(url, parameters), media_type="application/xml")

    return Route("/phone/incoming", incoming, methods=["POST"])
