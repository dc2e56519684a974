"""The demo page reconnects by itself (web/sdk/reconnect.js), in real Chromium
against the real server (offline model, SQLite in a data directory kept
across restarts).

* The server restarts mid-answer: the page says "Reconnecting…", resumes the
  same session on the new process, cuts the answer that was playing, sends
  nothing twice, and the microphone and the player work on the new socket.
* The network drops while an approval is pending (a TCP relay between the
  page and the server is cut): the server asks again on the resumed
  session, the user approves once, the tool runs once.

Push-to-talk mode: the fake microphone starts no turn by itself.
* A browser tool's result made while the page reconnects goes on the next
  socket, when the server asks again for it; the tool runs once.
"""

from __future__ import annotations

import contextlib
import pathlib
import socket
import threading
from collections.abc import Iterator

import pytest
from web_helpers import (
    ServerFailed,
    check_no_page_errors,
    connect,
    demo,
    entries,
    free_port,
    run_server,
    wait_for,
)

PTT = "?mode=push-to-talk"
# A guard against a hang, not a speed requirement: a restart, and a backoff
# of several attempts meanwhile (web/sdk/reconnect.js: at most 15 s a wait).
RECONNECT_TIMEOUT_S = 90


@contextlib.contextmanager
def server_at(data_dir: pathlib.Path, port: int) -> Iterator[str]:
    try:
        with run_server(data_dir, port=port) as url:
            yield url
    except ServerFailed as exc:
        pytest.fail(str(exc))


@pytest.fixture
def new_page(browser):
    contexts = []

    def opener(url: str, *, init_script: str | None = None, **context_options: object):
        context = browser.new_context(viewport={"width": 820, "height": 900}, **context_options)
        contexts.append(context)
        if init_script:
            context.add_init_script(init_script)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.page_errors = errors
        page.goto(url)
        page.wait_for_function("() => window.__demo !== undefined")
        return page

    yield opener
    for context in contexts:
        context.close()


def type_turn(page, text: str) -> None:
    page.fill("#text", text)
    page.press("#text", "Enter")


def finishes(page) -> int:
    return demo(page, "__demo.received.chunks.finish ?? 0")


def talk(page, frames: int) -> None:
    """Hold push-to-talk until ``frames`` more 20 ms frames went out, then release."""
    sent = demo(page, "__demo.capture.sent")
    page.dispatch_event("#ptt", "pointerdown", {"pointerId": 1})
    wait_for(page, f"__demo.capture.sent >= {sent + frames}", 30)
    page.dispatch_event("#ptt", "pointerup", {"pointerId": 1})


def test_reconnects_after_the_server_restarts_mid_answer(new_page, tmp_path):
    data_dir, port = tmp_path / "data", free_port()
    data_dir.mkdir()
    with server_at(data_dir, port) as url:
        page = new_page(url + PTT)
        first = connect(page)
        type_turn(page, "remember the first message")
        wait_for(page, "__demo.received.chunks.finish >= 1")
        # A spoken turn of about 6 s: its echo is still playing when the
        # server goes (the echo is as long as the turn, paced at real time).
        talk(page, 300)
        started = demo(page, "__demo.events.started")
        wait_for(page, f"__demo.events.started > {started}", 30)
        assert finishes(page) == 1
    # The server stopped (SIGTERM: close 1012, "service restart").
    wait_for(page, "__demo.state === 'reconnecting'")
    assert "Reconnecting…" in page.inner_text("#state")
    assert page.is_disabled("#text")  # nothing typed now is queued for later
    # The answer in flight was cut where it was, and marked so.
    cut = page.locator("#log .entry.agent").last
    assert cut.get_attribute("data-interrupted") == "true"
    assert "I heard" in cut.inner_text()
    # Its playback was flushed: the worklet confirms the silence.
    wait_for(page, "__demo.flushes.some((f) => f.reason === 'connection-lost')")

    with server_at(data_dir, port):
        wait_for(page, "__demo.state === 'connected'", RECONNECT_TIMEOUT_S)
        resumed = demo(page, "__demo.session")
        assert resumed["sessionId"] == first["sessionId"] and resumed["resumed"] is True
        # The server's history holds the typed turn once: nothing was sent again.
        texts = [item["text"] for item in resumed["history"] if item["role"] == "user"]
        assert texts.count("remember the first message") == 1, resumed["history"]
        assert demo(page, "__demo.reconnects") == 1
        assert "Reconnected: the session resumed." in entries(page, "notice")[-1]
        ended = demo(page, "__demo.events.ended")

        # A typed turn on the new process: the model sees the earlier turns.
        type_turn(page, "and after the restart")
        wait_for(page, "__demo.received.chunks.finish >= 2", 30)
        answer = entries(page, "agent")[-1]
        assert answer.startswith("You said: and after the restart (")
        wait_for(page, f"__demo.events.ended > {ended}", 30)  # the player plays on

        # The microphone goes on into the new socket: a spoken turn is answered.
        talk(page, 50)
        wait_for(page, "__demo.received.chunks.finish >= 3", 30)
        assert "I heard" in entries(page, "agent")[-1]

    # The transcript shows every turn once.
    users = entries(page, "user")
    assert users.count("remember the first message") == 1, users
    assert users.count("and after the restart") == 1, users
    check_no_page_errors(page)


def test_a_server_failure_close_reconnects_and_a_policy_close_does_not(open_page):
    page = open_page(PTT)
    routes = []

    def forward(route):
        routes.append(route)
        route.connect_to_server()

    page.route_web_socket("**/ws", forward)
    first = connect(page)
    routes[0].close(code=1011, reason="test failure")  # the session is kept
    wait_for(page, "__demo.reconnects === 1")
    wait_for(page, "__demo.state === 'connected'", RECONNECT_TIMEOUT_S)
    assert len(routes) == 2
    assert demo(page, "__demo.session.sessionId") == first["sessionId"]
    # The next close says "do not come back": the page stops and says why.
    routes[1].close(code=1008, reason="test policy")
    wait_for(page, "__demo.state === 'error'")
    assert "1008" in page.inner_text("#message")
    assert demo(page, "__demo.reconnects") == 1 and len(routes) == 2
    check_no_page_errors(page)


class Relay:
    """A TCP relay to the server that the test can cut, as a network would."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.lock = threading.Lock()
        self.accepted = 0
        self.refusing = False  # True: connections are closed as they come (a network still down)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.connections += [client, upstream]
                self.accepted += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Every open connection dies without a close frame (the page sees 1006)."""
        with self.lock:
            connections, self.connections = self.connections, []
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()


def test_a_pending_approval_is_asked_again_after_a_reconnect(new_page, tmp_path):
    data_dir, port = tmp_path / "data", free_port()
    data_dir.mkdir()
    with server_at(data_dir, port) as url:
        relay = Relay(port)
        try:
            page = new_page(f"{url}{PTT}&server=ws://127.0.0.1:{relay.port}/ws")
            first = connect(page)
            type_turn(page, "pay 5 EUR to Alice")
            wait_for(page, "__demo.approval !== null")
            asked = demo(page, "__demo.approval")
            assert asked["toolName"] == "process_payment"

            relay.cut()
            wait_for(page, "__demo.reconnects === 1")
            # Until the server asks again, the page does not offer the old question.
            wait_for(page, "__demo.state === 'connected'", RECONNECT_TIMEOUT_S)
            assert relay.accepted == 2
            assert demo(page, "__demo.session.sessionId") == first["sessionId"]
            wait_for(page, "__demo.approval !== null")
            again = demo(page, "__demo.approval")
            assert again == asked  # the same call, the same approval id
            tool = page.locator("#log .entry.tool")
            assert tool.count() == 1  # asked again, not shown twice
            assert tool.first.get_attribute("data-state") == "approval"

            page.click("#approval-approve")
            wait_for(page, "__demo.received.chunks.finish >= 1", 30)
            assert tool.count() == 1
            assert tool.first.get_attribute("data-state") == "done"
            assert "transactionId" in tool.first.inner_text()
            # The tool ran once: one outcome, one decision.
            assert demo(page, "__demo.received.chunks['tool-output-available']") == 1
            assert demo(page, "__demo.decisions") == [
                {"toolName": "process_payment", "approved": True}
            ]
            assert entries(page, "user").count("pay 5 EUR to Alice") == 1
            check_no_page_errors(page)
        finally:
            relay.close()


# Geolocation that answers only when the test says so.
HELD_GEOLOCATION = """
  const geolocation = navigator.geolocation;
  const real = geolocation.getCurrentPosition.bind(geolocation);
  Object.defineProperty(geolocation, "getCurrentPosition", {
    value: (ok, fail, options) => {
      window.__geolocationAsked = true;
      window.__releaseGeolocation = () => real(ok, fail, options);
    },
  });
"""
PARIS = {"latitude": 48.8584, "longitude": 2.2945, "accuracy": 10}


def test_a_browser_tool_result_made_while_reconnecting_reaches_the_server(new_page, tmp_path):
    data_dir, port = tmp_path / "data", free_port()
    data_dir.mkdir()
    with server_at(data_dir, port) as url:
        relay = Relay(port)
        try:
            page = new_page(
                f"{url}{PTT}&server=ws://127.0.0.1:{relay.port}/ws",
                init_script=HELD_GEOLOCATION,
                geolocation=PARIS,
                permissions=["geolocation"],
            )
            connect(page)
            type_turn(page, "where am I")
            wait_for(page, "__demo.approval !== null")
            page.click("#approval-approve")
            wait_for(page, "window.__geolocationAsked === true")  # the tool runs

            relay.refusing = True  # the network stays down until the result is made
            relay.cut()
            wait_for(page, "__demo.state === 'reconnecting'")
            page.evaluate("() => window.__releaseGeolocation()")
            wait_for(page, "__demo.toolRuns.length === 1")
            assert demo(page, "__demo.resources().socket") is None  # no socket to carry it

            relay.refusing = False
            wait_for(page, "__demo.state === 'connected'", RECONNECT_TIMEOUT_S)
            wait_for(page, "__demo.received.chunks.finish >= 1", 30)
            tool = page.locator("#log .entry.tool")
            assert tool.count() == 1
            assert tool.first.get_attribute("data-state") == "done"
            (run,) = demo(page, "__demo.toolRuns")  # it ran once
            assert run["output"] == PARIS
            answer = entries(page, "agent")[-1]
            assert "get_location returned" in answer and '"latitude": 48.8584' in answer
            assert demo(page, "__demo.serverErrors") == []
            check_no_page_errors(page)
        finally:
            relay.close()
