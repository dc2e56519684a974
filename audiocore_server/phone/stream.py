"""The opening of a call's media stream, before it holds a live place:
Twilio's ``connected`` and ``start``, and who the call speaks for.

``start.customParameters`` (the TwiML's ``<Parameter>``s, passed through
from the incoming call's URL by ``incoming.py``) choose the app (``app``)
and the user (``user``); with an API key configured the call carries
``token`` (a token the key minted, or the key itself) checked as every
surface's credentials are (``gate/credentials.py``): a token binds its
owner, whom ``user`` must name if given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..gate.addressing import api_user_allowed
from ..gate.credentials import Credentials, Principal, Refused
from ..storage.users import PHONE_USER_ID
from ..wire import call_messages, fields, protocol

APP_PARAM = "app"
USER_PARAM = "user"
TOKEN_PARAM = "token"


@dataclasses.dataclass(frozen=True)
class Call:
    start: call_messages.StreamStart
    user_id: str
    app: str | None
    principal: Principal | None  # None: the server takes no credentials

    @property
    def user_key(self) -> str | None:
        """Whose memory and tasks the call uses: a token's owner (as on
        ``/ws``), else the session's own."""
        return self.principal.owner if self.principal is not None else None


async def read_start(
    ws: WebSocket,
    timeout_s: float,
    decode: Callable[[str | bytes], call_messages.CallMessage],
) -> call_messages.StreamStart:
    """``connected`` (optional), then ``start``, within ``timeout_s``;
    ``ProtocolError`` (close 1008) otherwise, ``WebSocketDisconnect``."""
    with anyio.move_on_after(timeout_s):
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            raw = message.get("text")
            try:
                msg = decode(raw if raw is not None else message.get("bytes") or b"")
            except fields.InputError as exc:
                raise protocol.ProtocolError(protocol.CLOSE_POLICY_VIOLATION, str(exc)) from None
            if isinstance(msg, call_messages.StreamStart):
                return msg
            if not isinstance(msg, call_messages.Connected):
                raise protocol.ProtocolError(
                    protocol.CLOSE_POLICY_VIOLATION,
                    f"expected connected and start first, got {type(msg).__name__}",
                )
    raise protocol.ProtocolError(
        protocol.CLOSE_POLICY_VIOLATION, f"no start message within {timeout_s:g} s"
    )


def caller(start: call_messages.StreamStart, credentials: Credentials | None) -> Call:
    """Who the call speaks for; ``Refused`` (no or wrong credentials, a
    user the token does not own, a user no client may name)."""
    params = start.custom_parameters
    user = params.get(USER_PARAM)
    principal = None
    if credentials is not None:
        principal = credentials.check_given(params.get(TOKEN_PARAM), "phone", user)
        if user is None and principal.owner is not None:
            user = principal.owner
    if user is not None and not api_user_allowed(user):
        raise Refused("bad_user", f"user: expected a user id of ADK's shape, got {user[:64]!r}")
    return Call(start, user or PHONE_USER_ID, params.get(APP_PARAM), principal)
