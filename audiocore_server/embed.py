"""Running the server inside another Starlette or FastAPI app.

``create_app(settings)`` is an ASGI app like any other, and mounts under a
prefix: every route, socket and the demo page answer below it. One thing the
host must do: Starlette (and FastAPI) run the lifespan of the app they serve
only, never of a mounted one, and ours opens the session store, the task
runners and the telemetry. ``lifespan(voice)`` is a lifespan that runs it::

    voice = create_app(Settings(data_dir=Path("voice-data")))
    app = Starlette(routes=[Mount("/voice", app=voice)], lifespan=lifespan(voice))
    # FastAPI: app = FastAPI(lifespan=lifespan(voice)); app.mount("/voice", voice)

A host with a lifespan of its own enters ours inside it
(``async with lifespan(voice)(app): ... yield``). docs/embedding.md has
the rest.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from starlette.applications import Starlette


def lifespan(*apps: Starlette) -> Callable[[object], AbstractAsyncContextManager[None]]:
    """A host app's lifespan that runs each of ``apps``' own: started in
    order before the host serves, closed in reverse after."""

    @contextlib.asynccontextmanager
    async def run(host: object) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for app in apps:
                state = await stack.enter_async_context(app.router.lifespan_context(app))
                if state is not None:
                    # A lifespan's state goes to its own app's requests; a
                    # mounted app gets the host's, so ours keeps none there.
                    raise RuntimeError(f"expected a lifespan without state, got {state!r}")
            yield

    return run
