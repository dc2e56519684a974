"""Fixtures for the demo page in a real browser against the real server.

* ``server_url``: ``python -m server`` (offline model, temporary SQLite
  directory) on 127.0.0.1 and a free port, in a subprocess.
* ``browser``: Debian's Chromium (``/usr/bin/chromium``) driven by Playwright,
  headless, with a fake microphone that plays ``speech.wav`` in a loop
  (espeak-ng speech followed by silence, so every loop is one user turn).
  Playwright never downloads a browser here.
* ``open_page``: a fresh browser context and page (fresh localStorage).

Everything skips, with the reason, when a tool is missing (and fails
instead under AUDIOCORE_REQUIRE_BROWSER=1, as in CI).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Iterator

import pytest
from web_helpers import (
    CHROMIUM,
    LEAD_IN_S,
    ROOT,
    TAIL_S,
    ServerFailed,
    launch,
    make_speech,
    missing,
    run_server,
)


@pytest.fixture(scope="session")
def speech_wav(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return make_speech(
        tmp_path_factory.mktemp("speech"), lead_in=LEAD_IN_S, tail=TAIL_S, name="speech"
    )


@pytest.fixture(scope="session")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real server, offline model, on 127.0.0.1; yields http://host:port/."""
    try:
        with run_server(tmp_path_factory.mktemp("server-data")) as url:
            yield url
    except ServerFailed as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def desk_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server on a user's agents folder (tests/server/confirm_agents: the
    app "desk", whose tools ask for ADK's confirmation every way ADK has),
    offline model, ``ring_bell`` named by the deployment."""
    agents = ROOT / "tests" / "server" / "confirm_agents"
    extra = ["--agents-dir", str(agents), "--tools-requiring-approval", "ring_bell"]
    try:
        with run_server(tmp_path_factory.mktemp("desk-data"), extra_args=extra) as url:
            yield url
    except ServerFailed as exc:
        pytest.fail(str(exc))


# Per module, not per session: Playwright's sync API keeps an event loop
# running in the main thread while it is open, and a test of another
# directory collected after a browser test (asyncio.run) would fail on it.
@pytest.fixture(scope="module")
def playwright_instance() -> Iterator[object]:
    try:
        from playwright import sync_api
    except ImportError:
        missing("playwright is not installed (pip install playwright)")
    if not os.access(CHROMIUM, os.X_OK):
        missing(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="module")
def browser(playwright_instance: object, speech_wav: pathlib.Path) -> Iterator[object]:
    browser = launch(playwright_instance, speech_wav)
    yield browser
    browser.close()


@pytest.fixture
def open_page(browser: object, server_url: str) -> Iterator[Callable[..., object]]:
    """open_page(query="", viewport=..., **context_options) -> a loaded page in
    a fresh context (context_options go to new_context, e.g. geolocation)."""
    contexts = []

    def opener(
        query: str = "",
        *,
        viewport: dict | None = None,
        init_script: str | None = None,
        **context_options: object,
    ):
        context = browser.new_context(  # type: ignore[attr-defined]
            viewport=viewport or {"width": 820, "height": 900}, **context_options
        )
        contexts.append(context)
        if init_script:
            context.add_init_script(init_script)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.page_errors = errors  # checked by the tests
        page.goto(server_url + query)
        page.wait_for_function("() => window.__demo !== undefined")
        return page

    yield opener
    for context in contexts:
        context.close()
