"""What a live client asked for before its conversation starts, as every
dialect's opening reports it (``/ws`` and ``/live`` in ``dialects``,
``/run_live`` in ``run_live``) and the connection reads it."""

from __future__ import annotations

import dataclasses

from google.adk.agents.run_config import RunConfig
from starlette.types import Message

from ..storage.users import USER_ID
from ..wire import protocol


@dataclasses.dataclass(frozen=True)
class Opening:
    """What a client asked for before the conversation starts."""

    start: protocol.Start
    first: Message | None = None  # the first message, to handle as such
    user_id: str = USER_ID
    # An unknown session: create a new one (with a notice), or refuse
    # (``SessionNotFound``, for clients that create sessions themselves).
    create_missing: bool = True
    run_config: RunConfig | None = None  # None: the runtime's, for the turn detection
    # The server's echo canceller (``start.echoCancellation: "server"``)
    # mutes the microphone while it learns the room: a loudspeaker beside
    # the microphone. Not a phone line's, whose echo is faint (audio/echo.py).
    mute_while_learning: bool = True
