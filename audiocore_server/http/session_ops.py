"""The session REST's operations on the store, from raw request bodies to
JSON answers: what ``store_worker`` runs in a process of its own.

Each operation takes a session service, the checked path parameters and
the body's bytes, and returns a ``Reply`` (status and JSON bytes): nothing
it builds — the parsed body, thousands of validated events, their JSON —
crosses back, so the live conversations' process never holds the objects
(their garbage collection would stop its loop as surely as the work).
Paths, bodies and statuses are ADK's; see ``session_rest.py``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pydantic
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions import BaseSessionService, Session
from google.adk.utils._function_call_names import CLIENT_FUNCTION_CALL_NAMES

from ..storage.client_state import ForbiddenState, check_client_state
from ..storage.users import API_SESSION_ID, RESERVED_USERS
from ..wire import strict_json
from ..wire.adk_json import event_json
from ..wire.http_body import HttpError, parse_json


@dataclasses.dataclass(frozen=True)
class Reply:
    status: int
    body: bytes  # JSON


def reply(data: Any, status: int = 200) -> Reply:
    return Reply(status, strict_json.dumps(data).encode())


def failure(status: int, detail: str) -> Reply:
    return reply({"detail": detail}, status)


def session_json(session: Session, *, with_events: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = session.model_dump(
        exclude_none=True, by_alias=True, mode="json", exclude={"events"}
    )
    data["events"] = [event_json(e) for e in session.events] if with_events else []
    return data


def checked_id(session_id: str) -> str:
    if not API_SESSION_ID.fullmatch(session_id):
        raise HttpError(
            400,
            f"Invalid session id {session_id!r}: expected 1 to 128 of A-Z a-z 0-9 . _ : -",
        )
    return session_id


async def create(
    service: BaseSessionService,
    max_sessions: int,
    app: str,
    user: str,
    path_session_id: str | None,
    body: bytes,
) -> Reply:
    """``POST …/sessions`` (``path_session_id`` None: the body is
    ``{"sessionId"?, "state"?, "events"?}``) or ``POST …/sessions/{id}``
    (the body is the state). Everything is checked before the session is
    created; still, a session whose events could not all be stored is
    deleted, so that a retry can create it. A user holds at most
    ``max_sessions`` sessions (429)."""
    data = parse_json(body)
    session_id: str | None
    state: Any
    if path_session_id is not None:
        if data is not None and not isinstance(data, dict):
            raise HttpError(422, "request body: expected the state as an object")
        state, session_id, events = data, path_session_id, []
        _client_state(state or {}, "request body")
    else:
        data = {} if data is None else data
        if not isinstance(data, dict):
            raise HttpError(422, "request body: expected an object")
        given = data.get("sessionId", data.get("session_id"))
        if given is not None and not isinstance(given, str):
            raise HttpError(422, "sessionId: expected a string")
        state = data.get("state")
        if state is not None and not isinstance(state, dict):
            raise HttpError(422, "state: expected an object")
        _client_state(state or {}, "state")
        session_id = checked_id(given) if given else None
        events = _initial_events(data.get("events"))
    held = await service.list_sessions(app_name=app, user_id=user)
    if len(held.sessions) >= max_sessions:
        return failure(
            429,
            f"User {user!r} has {len(held.sessions)} sessions (at most "
            f"{max_sessions}); delete some first",
        )
    try:
        session = await service.create_session(
            app_name=app, user_id=user, state=state, session_id=session_id
        )
    except AlreadyExistsError:
        return failure(409, f"Session already exists: {session_id}")
    try:
        for event in events:
            await service.append_event(session, event)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await service.delete_session(app_name=app, user_id=user, session_id=session.id)
        raise
    return reply(session_json(session))


async def _stored(service: BaseSessionService, app: str, user: str, session_id: str) -> Session:
    session = None
    if API_SESSION_ID.fullmatch(session_id):
        session = await service.get_session(app_name=app, user_id=user, session_id=session_id)
    if session is None or session.id != session_id:
        raise HttpError(404, "Session not found")
    return session


async def get(service: BaseSessionService, app: str, user: str, session_id: str) -> Reply:
    return reply(session_json(await _stored(service, app, user, session_id)))


async def list_all(service: BaseSessionService, app: str, user: str) -> Reply:
    found = await service.list_sessions(app_name=app, user_id=user)
    return reply([session_json(s, with_events=False) for s in found.sessions])


async def delete(service: BaseSessionService, app: str, user: str, session_id: str) -> Reply:
    await service.delete_session(app_name=app, user_id=user, session_id=session_id)
    return reply(None)


async def patch(
    service: BaseSessionService, app: str, user: str, session_id: str, body: bytes
) -> Reply:
    """``PATCH …/sessions/{id}`` ``{"stateDelta": {…}}``: one event with
    the delta."""
    data = parse_json(body)
    delta = data.get("stateDelta", data.get("state_delta")) if isinstance(data, dict) else None
    if not isinstance(delta, dict):
        raise HttpError(422, 'request body: expected {"stateDelta": {...}}')
    _client_state(delta, "stateDelta")
    session = await _stored(service, app, user, session_id)
    event = Event(
        invocation_id=f"p-{Event.new_id()}", author="user", actions=EventActions(state_delta=delta)
    )
    await service.append_event(session, event)
    return reply(session_json(session))


async def expire(service: BaseSessionService, app: str, ttl_s: float, now: float) -> Reply:
    """Delete the API users' sessions not updated for ``ttl_s`` seconds (the
    server's own users' sessions have rules of their own); the count."""
    found = await service.list_sessions(app_name=app, user_id=None)
    deleted = 0
    for listed in found.sessions:
        if listed.user_id in RESERVED_USERS or listed.last_update_time > now - ttl_s:
            continue
        await service.delete_session(app_name=app, user_id=listed.user_id, session_id=listed.id)
        deleted += 1
    return reply({"deleted": deleted})


def _client_state(state: dict[str, Any], where: str) -> None:
    try:
        check_client_state(state, where)
    except ForbiddenState as exc:
        raise HttpError(422, str(exc)) from None


# What every session store takes (ADK's database schema: ids are at most 128
# characters, invocation ids 256; a timestamp must be a date).
_MAX_EVENT_ID = 128
_MAX_INVOCATION_ID = 256
_LAST_TIMESTAMP = 253_402_300_799.0  # 9999-12-31T23:59:59Z


def _initial_events(raw: Any) -> list[Event]:
    """Events to start a session with, checked as ADK's server checks them:
    ordinary tool calls may be restored, ADK's own protocol calls not."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise HttpError(422, "events: expected an array")
    events = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        try:
            event = Event.model_validate(item)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = "".join(f".{x}" for x in first["loc"])
            raise HttpError(422, f"events[{i}]{where}: {first['msg']}") from None
        if event.id in seen:
            raise HttpError(
                422, f"events[{i}].id: {event.id!r} is already events[{seen[event.id]}]'s"
            )
        seen[event.id] = i
        if len(event.id) > _MAX_EVENT_ID:
            raise HttpError(422, f"events[{i}].id: expected at most {_MAX_EVENT_ID} characters")
        if len(event.invocation_id) > _MAX_INVOCATION_ID:
            raise HttpError(
                422, f"events[{i}].invocationId: expected at most {_MAX_INVOCATION_ID} characters"
            )
        if not 0 <= event.timestamp <= _LAST_TIMESTAMP:
            raise HttpError(
                422, f"events[{i}].timestamp: expected seconds from 0 to {_LAST_TIMESTAMP:.0f}"
            )
        if event.long_running_tool_ids:
            raise HttpError(
                400, f"Session initialization event {i} cannot include long-running tool IDs."
            )
        if event.actions != EventActions():
            raise HttpError(400, f"Session initialization event {i} cannot include event actions.")
        names = [c.name for c in event.get_function_calls()]
        names += [r.name for r in event.get_function_responses()]
        if any(name in CLIENT_FUNCTION_CALL_NAMES for name in names):
            raise HttpError(
                400, f"Session initialization event {i} cannot include ADK protocol function calls."
            )
        events.append(event)
    return events
