"""The REST of an owner's long-term memory: list, search, forget, and the
user's own section of the profile.

Two ways to name the owner, as the live surfaces do:

* ``/apps/{app}/users/{user}/memory…``: an ADK user's (``/run_live``, the
  session REST), under the same checks as the session REST (a token must
  name its owner as the user; the server's own users are not reachable);
* ``/memory…`` with the client's key in ``X-User-Key``: a ``/ws`` or
  ``/live`` client's (``userKey``); a token stands for its owner's key, and
  another key is refused (403).

Routes (each under both prefixes):

* ``GET …/memory[?query=…&limit=…&kind=fact|turn|all]``: ``{"profile",
  "memories"}`` — the newest records, or those matching ``query``;
* ``DELETE …/memory/{id}``: ``{"forgotten": [id]}``; 404 for an id the
  owner does not have;
* ``DELETE …/memory``: everything of the owner, ``{"forgotten": n}``;
* ``PUT …/memory/profile`` ``{"user": "…"}``: the user's section (the agent
  never writes it), ``{"profile"}``.

The work is a few indexed SQLite statements on the memory store's own
thread (``sqlite_thread.py``), and answers of at most ``MAX_RESULTS`` short
records, so it stays in this process: the loop only awaits the thread, and
the JSON it builds is small (unlike a stored session's, which the session
REST parses in ``session_worker.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..gate.addressing import NotAddressable, check_target
from ..gate.credentials import principal_of
from ..gate.owners import NotOwner, api_user_owner, bind_user_key, key_owner
from ..memory.store import (
    MAX_PROFILE_CHARS,
    MAX_RESULTS,
    Kind,
    MemoryInputError,
    MemoryStore,
    checked_ids,
)
from ..settings import Settings
from ..wire import query_params
from ..wire.http_body import HttpError, read_json_body
from ..wire.protocol import USER_KEY

USER_KEY_HEADER = "x-user-key"
_KINDS: dict[str, Kind | None] = {"fact": "fact", "turn": "turn", "all": None}

Handler = Callable[[Request, str], Awaitable[Response]]


def memory_routes(
    settings: Settings, store: MemoryStore, app_names: Collection[str]
) -> list[Route]:
    body_limit = MAX_PROFILE_CHARS * 4 + 1024  # UTF-8 at its widest, and the JSON around it

    def owner_by_user(request: Request) -> str:
        user = request.path_params["user_id"]
        try:
            check_target(request.path_params["app_name"], user, app_names)
        except NotAddressable as exc:
            raise HttpError(404, str(exc)) from None
        owner = api_user_owner(user)
        assert owner is not None  # check_target refused the reserved users
        return owner

    def owner_by_key(request: Request) -> str:
        given = request.headers.get(USER_KEY_HEADER)
        principal = principal_of(request.scope)
        if (principal is None or principal.owner is None) and (
            given is None or not USER_KEY.fullmatch(given)
        ):
            raise HttpError(
                400, f"{USER_KEY_HEADER}: expected the client's userKey (20-100 of A-Z a-z 0-9 _ -)"
            )
        try:
            key = bind_user_key(request.scope, given)
        except NotOwner:
            raise HttpError(403, f"{USER_KEY_HEADER}: not the token's owner") from None
        assert key is not None  # a key was given, or the token's owner stands for it
        return key_owner(key)

    def both(path: str, methods: list[str], handler: Handler) -> list[Route]:
        def with_owner(owner_of: Callable[[Request], str]) -> Callable[..., Any]:
            async def guarded(request: Request) -> Response:
                try:
                    return await handler(request, owner_of(request))
                except HttpError as exc:
                    return JSONResponse({"detail": exc.detail}, status_code=exc.status)
                except (MemoryInputError, query_params.QueryError) as exc:
                    return JSONResponse({"detail": str(exc)}, status_code=400)

            return guarded

        return [
            Route(
                f"/apps/{{app_name}}/users/{{user_id}}{path}",
                with_owner(owner_by_user),
                methods=methods,
            ),
            Route(path, with_owner(owner_by_key), methods=methods),
        ]

    async def listing(request: Request, owner: str) -> Response:
        params = request.query_params
        kind = query_params.choice(params, "kind", _KINDS, "fact")
        limit = query_params.integer(params, "limit", default=20, low=1, high=MAX_RESULTS)
        query = query_params.one(params, "query")
        found = (
            await store.search(owner, query, limit, kind=kind)
            if query is not None
            else await store.latest(owner, limit, kind=kind)
        )
        profile = await store.profile(owner)
        return JSONResponse(
            {"profile": profile.as_json(), "memories": [r.as_json() for r in found]}
        )

    async def forget_one(request: Request, owner: str) -> Response:
        memory_id = request.path_params["memory_id"]
        (checked,) = checked_ids([memory_id])
        try:
            forgotten = await store.forget(owner, [checked])
        except MemoryInputError:
            raise HttpError(404, f"Memory not found: {memory_id!r}") from None
        return JSONResponse({"forgotten": forgotten})

    async def forget_all(request: Request, owner: str) -> Response:
        return JSONResponse({"forgotten": await store.forget_owner(owner)})

    async def set_user_section(request: Request, owner: str) -> Response:
        body = await read_json_body(request, body_limit, settings.body_timeout_s)
        if not isinstance(body, dict) or set(body) != {"user"}:
            raise HttpError(400, 'expected {"user": "<the user\'s section of the profile>"}')
        profile = await store.edit_profile(owner, user_section=body["user"])
        return JSONResponse({"profile": profile.as_json()})

    return [
        *both("/memory", ["GET"], listing),
        *both("/memory", ["DELETE"], forget_all),
        *both("/memory/profile", ["PUT"], set_user_section),
        *both("/memory/{memory_id}", ["DELETE"], forget_one),
    ]
