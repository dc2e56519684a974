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

from collections.abc import Awaitable, Callable, Mapping

from google.adk.agents import BaseAgent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..gate.addressing import NotAddressable, check_target
from ..settings import Settings
from ..storage.session_access import SessionAccess
from ..storage.users import API_SESSION_ID
from ..wire import query_params
from ..wire.http_body import HttpError, read_body
from .session_ops import Reply, checked_id
from .session_worker import StoreWorker

Handler = Callable[[Request], Awaitable[Response]]


def _answer(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, media_type="application/json")


def rest_routes(
    settings: Settings,
    sessions: SessionAccess,
    store: StoreWorker,
    apps: Mapping[str, BaseAgent],
) -> list[Route]:
    """The routes. Here: the path's checks, the body's bytes (bounded and
    timed), and whether the session is live in this process; everything
    else — the body's JSON, the store, the answer's JSON — in ``store``'s
    process (``session_worker.py``, ``session_ops.py``). ``apps``: each
    app's root agent, by the app's name."""
    body_limit = settings.max_http_body_bytes
    body_timeout = settings.body_timeout_s
    max_sessions = settings.max_api_sessions_per_user

    def route(path: str, methods: list[str]) -> Callable[[Handler], Route]:
        def wrap(handler: Handler) -> Route:
            async def guarded(request: Request) -> Response:
                try:
                    return await handler(request)
                except HttpError as exc:
                    return JSONResponse(
                        {"detail": exc.detail}, status_code=exc.status, headers=exc.headers
                    )
                except query_params.QueryError as exc:
                    return JSONResponse({"detail": str(exc)}, status_code=400)

            return Route(path, guarded, methods=methods)

        return wrap

    def target(request: Request) -> tuple[str, str]:
        app = request.path_params["app_name"]
        user = request.path_params["user_id"]
        try:
            check_target(app, user, apps)
        except NotAddressable as exc:
            raise HttpError(404, str(exc)) from None
        return app, user

    def not_live(session_id: str) -> None:
        if sessions.claims.holds(session_id):
            raise HttpError(409, "Session is live: end its connection first")

    @route("/apps/{app_name}/users/{user_id}/sessions", ["POST"])
    async def create_session(request: Request) -> Response:
        app, user = target(request)
        body = await read_body(request, body_limit, body_timeout)
        return _answer(await store.call("create", max_sessions, app, user, None, body))

    @route("/apps/{app_name}/users/{user_id}/sessions/{session_id}", ["POST"])
    async def create_session_with_id(request: Request) -> Response:
        app, user = target(request)
        session_id = checked_id(request.path_params["session_id"])
        body = await read_body(request, body_limit, body_timeout)
        return _answer(await store.call("create", max_sessions, app, user, session_id, body))

    @route("/apps/{app_name}/users/{user_id}/sessions/{session_id}", ["GET"])
    async def get_session(request: Request) -> Response:
        app, user = target(request)
        return _answer(await store.call("get", app, user, request.path_params["session_id"]))

    @route("/apps/{app_name}/users/{user_id}/sessions", ["GET"])
    async def list_sessions(request: Request) -> Response:
        app, user = target(request)
        return _answer(await store.call("list", app, user))

    @route("/apps/{app_name}/users/{user_id}/sessions/{session_id}", ["DELETE"])
    async def delete_session(request: Request) -> Response:
        app, user = target(request)
        session_id = request.path_params["session_id"]
        if API_SESSION_ID.fullmatch(session_id):
            not_live(session_id)
            await store.call("delete", app, user, session_id)
        return JSONResponse(None)

    @route("/apps/{app_name}/users/{user_id}/sessions/{session_id}", ["PATCH"])
    async def patch_session(request: Request) -> Response:
        app, user = target(request)
        session_id = request.path_params["session_id"]
        body = await read_body(request, body_limit, body_timeout)
        not_live(session_id)
        return _answer(await store.call("patch", app, user, session_id, body))

    @route("/list-apps", ["GET"])
    async def list_apps(request: Request) -> Response:
        names = sorted(apps)
        if query_params.flag(request.query_params, "detailed"):
            return JSONResponse(
                {
                    "apps": [
                        {
                            "name": name,
                            "rootAgentName": apps[name].name,
                            "description": apps[name].description,
                            "language": "python",
                            "isComputerUse": False,
                            "agents": None,
                        }
                        for name in names
                    ]
                }
            )
        return JSONResponse(names)

    return [
        create_session,
        create_session_with_id,
        get_session,
        list_sessions,
        delete_session,
        patch_session,
        list_apps,
    ]
