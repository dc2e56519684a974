"""ADK's session REST routes, for clients written for ``adk api_server``.

Paths, bodies and status codes are ADK's (google-adk 2.13.0,
``google/adk/cli/api_server.py``, ``ApiServer._register_production_endpoints``):

* ``POST /apps/{app}/users/{user}/sessions`` ``{"sessionId"?, "state"?,
  "events"?}``: 200 and the session; 409 ``Session already exists: <id>``.
* ``POST /apps/{app}/users/{user}/sessions/{id}``, the body being the state
  itself: 200; 409.
* ``GET …/sessions/{id}``: 200 and the session with its events; 404
  ``Session not found``. ``GET …/sessions``: an array of sessions, no events.
* ``PATCH …/sessions/{id}`` ``{"stateDelta": {…}}``: 200; 404.
* ``DELETE …/sessions/{id}``: 200 ``null``, also for no such session.
* ``GET /list-apps[?detailed=true]``: ``["<app>"]`` or ``{"apps": [...]}``.

A session is ADK's ``Session`` JSON: camelCase, ``None`` left out. Errors
are ``{"detail": "<text>"}``. Where ADK's server is loose, this one says
no: an unknown app is 404 (ADK creates it); session and user ids are
checked (ADK takes any string); the users the server's own clients use
(``web``, ``chat``) are not reachable here, because their session ids are
the capability that guards them; a session that is live in this process
cannot be deleted or patched under its run (409).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pydantic
from google.adk.agents import BaseAgent
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions import BaseSessionService, Session
from google.adk.utils._function_call_names import CLIENT_FUNCTION_CALL_NAMES
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import large_json, strict_json
from .adk_json import event_json
from .client_state import ForbiddenState, check_client_state
from .http_body import HttpError, read_json_body
from .session_access import SessionAccess, StoreLoop
from .settings import Settings
from .users import API_SESSION_ID, API_USER_ID, RESERVED_USERS

Handler = Callable[[Request], Awaitable[Response]]


def _fail(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


def session_json(session: Session, *, with_events: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = session.model_dump(
        exclude_none=True, by_alias=True, mode="json", exclude={"events"}
    )
    data["events"] = [event_json(e) for e in session.events] if with_events else []
    return data


def session_response(session: Session) -> Response:
    """The session with its events, written an event at a time (a stored
    session may hold thousands: see ``large_json``)."""
    head = session_json(session, with_events=False)
    del head["events"]
    events = large_json.dumps_list(event_json(e) for e in session.events)
    body = strict_json.dumps(head)[:-1] + ("," if head else "") + f'"events":{events}}}'
    return Response(body.encode(), media_type="application/json")


def rest_routes(
    settings: Settings, sessions: SessionAccess, store: StoreLoop, agent: BaseAgent
) -> list[Route]:
    """The routes. Every call on the session store, and the JSON of what it
    returns, runs on ``store``'s loop: a large session is read, checked and
    written there, never on the loop the live conversations share."""
    body_limit = settings.max_http_body_bytes
    body_timeout = settings.body_timeout_s

    def route(path: str, methods: list[str]) -> Callable[[Handler], Route]:
        def wrap(handler: Handler) -> Route:
            async def guarded(request: Request) -> Response:
                try:
                    return await handler(request)
                except HttpError as exc:
                    return JSONResponse(
                        {"detail": exc.detail}, status_code=exc.status, headers=exc.headers
                    )

            return Route(path, guarded, methods=methods)

        return wrap

    def target(request: Request) -> tuple[str, str]:
        app = request.path_params["app_name"]
        user = request.path_params["user_id"]
        if app != settings.app_name:
            raise HttpError(404, f"App not found: {app!r}")
        if user in RESERVED_USERS or not API_USER_ID.fullmatch(user):
            raise HttpError(404, f"User not found: {user!r}")
        return app, user

    def checked_id(session_id: str) -> str:
        if not API_SESSION_ID.fullmatch(session_id):
            raise HttpError(
                400,
                f"Invalid session id {session_id!r}: expected 1 to 128 of A-Z a-z 0-9 . _ : -",
            )
        return session_id

    def create(
        app: str, user: str, session_id: str | None, state: dict[str, Any] | None, raw_events: Any
    ) -> Callable[[BaseSessionService], Awaitable[Response]]:
        """Everything else was checked before this; still, a session whose
        events could not all be stored is deleted, so that a retry can create
        it. A user holds at most ``max_api_sessions_per_user`` sessions (429)."""

        async def work(service: BaseSessionService) -> Response:
            events = _initial_events(raw_events)
            held = await service.list_sessions(app_name=app, user_id=user)
            if len(held.sessions) >= settings.max_api_sessions_per_user:
                return _fail(
                    429,
                    f"User {user!r} has {len(held.sessions)} sessions (at most "
                    f"{settings.max_api_sessions_per_user}); delete some first",
                )
            try:
                session = await service.create_session(
                    app_name=app, user_id=user, state=state, session_id=session_id
                )
            except AlreadyExistsError:
                return _fail(409, f"Session already exists: {session_id}")
            try:
                for event in events:
                    await service.append_event(session, event)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await service.delete_session(app_name=app, user_id=user, session_id=session.id)
                raise
            return session_response(session)

        return work

    @route("/apps/{app_name}/users/{user_id}/sessions", ["POST"])
    async def create_session(request: Request) -> Response:
        app, user = target(request)
        body = await read_json_body(request, body_limit, body_timeout)
        body = {} if body is None else body
        if not isinstance(body, dict):
            raise HttpError(422, "request body: expected an object")
        session_id = body.get("sessionId", body.get("session_id"))
        if session_id is not None and not isinstance(session_id, str):
            raise HttpError(422, "sessionId: expected a string")
        state = body.get("state")
        if state is not None and not isinstance(state, dict):
            raise HttpError(422, "state: expected an object")
        _client_state(state or {}, "state")
        session_id = checked_id(session_id) if session_id else None
        return await store.run(create(app, user, session_id, state, body.get("events")))

    @route("/apps/{app_name}/users/{user_id}/sessions/{session_id}", ["POST"])
    async def create_session_with_id(request: Request) -> Response:
        app, user = target(request)
        state = await read_json_body(request, body_limit, body_timeout)
        if state is not None and not isinstance(state, dict):
            raise HttpError(422, "request body: expected the state as an object")
        _client_state(state or {}, "request body")
        session_id = checked_id(request.path_params["session_id"])
        return await store.run(create(app, user, session_id, state, None))

    async def stored(service: BaseSessionService, app: str, user: str, session_id: str) -> Session:
        session = None
        if API_SESSION_ID.fullmatch(session_id):
            session = await service.get_session(app_name=app, user_id=user, session_id=session_id)
        if session is None or session.id != session_id:
            raise HttpError(404, "Session not found")
        return session

    @route("/apps/{app_name}/users/{user_id}/sessions/{session_id}", ["GET"])
    async def get_session(request: Request) -> Response:
        app, user = target(request)
        session_id = request.path_params["session_id"]

        async def work(service: BaseSessionService) -> Response:
            return session_response(await stored(service, app, user, session_id))

        return await store.run(work)

    @route("/apps/{app_name}/users/{user_id}/sessions", ["GET"])
    async def list_sessions(request: Request) -> Response:
        app, user = target(request)

        async def work(service: BaseSessionService) -> Response:
            found = await service.list_sessions(app_name=app, user_id=user)
            items = (session_json(s, with_events=False) for s in found.sessions)
            return Response(large_json.dumps_list(items).encode(), media_type="application/json")

        return await store.run(work)

    def not_live(session_id: str) -> None:
        if sessions.claims.holds(session_id):
            raise HttpError(409, "Session is live: end its connection first")

    @route("/apps/{app_name}/users/{user_id}/sessions/{session_id}", ["DELETE"])
    async def delete_session(request: Request) -> Response:
        app, user = target(request)
        session_id = request.path_params["session_id"]
        if API_SESSION_ID.fullmatch(session_id):
            not_live(session_id)
            await store.run(
                lambda service: service.delete_session(
                    app_name=app, user_id=user, session_id=session_id
                )
            )
        return JSONResponse(None)

    @route("/apps/{app_name}/users/{user_id}/sessions/{session_id}", ["PATCH"])
    async def patch_session(request: Request) -> Response:
        app, user = target(request)
        body = await read_json_body(request, body_limit, body_timeout)
        delta = body.get("stateDelta", body.get("state_delta")) if isinstance(body, dict) else None
        if not isinstance(delta, dict):
            raise HttpError(422, 'request body: expected {"stateDelta": {...}}')
        _client_state(delta, "stateDelta")
        session_id = request.path_params["session_id"]
        not_live(session_id)

        async def work(service: BaseSessionService) -> Response:
            session = await stored(service, app, user, session_id)
            event = Event(
                invocation_id=f"p-{Event.new_id()}",
                author="user",
                actions=EventActions(state_delta=delta),
            )
            await service.append_event(session, event)
            return session_response(session)

        return await store.run(work)

    @route("/list-apps", ["GET"])
    async def list_apps(request: Request) -> Response:
        name = settings.app_name
        if request.query_params.get("detailed", "").lower() in ("true", "1", "yes", "on"):
            return JSONResponse(
                {
                    "apps": [
                        {
                            "name": name,
                            "rootAgentName": agent.name,
                            "description": agent.description,
                            "language": "python",
                            "isComputerUse": False,
                            "agents": None,
                        }
                    ]
                }
            )
        return JSONResponse([name])

    return [
        create_session,
        create_session_with_id,
        get_session,
        list_sessions,
        delete_session,
        patch_session,
        list_apps,
    ]


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
