"""The demo page's tools in real Chromium against the real server (offline model):
the approval dialog (keyboard and mouse), the background music that
``change_bgm`` switches at once (no approval, as in the seed project) and
that ducks under the agent's voice, and ``get_location`` through the
browser's Geolocation API.

Push-to-talk mode throughout, so the fake microphone starts no turn by itself;
the offline model calls the tools on typed cues ("pay 5 EUR to Alice", "play
jazz", "where am I").
"""

from __future__ import annotations

import statistics

from web_helpers import check_no_page_errors, connect, demo, entries, wait_for

PTT = "?mode=push-to-talk"
# The dominant band of each synthesised track (web/music.js TRACK_BANDS).
BANDS = {"lofi": (35, 75), "ambient": (120, 300), "jazz": (400, 1200)}
PARIS = {"latitude": 48.8584, "longitude": 2.2945, "accuracy": 10}


def ask(page, text: str) -> dict:
    """Type a turn whose tool needs approval; returns the dialog's request."""
    page.fill("#text", text)
    page.press("#text", "Enter")
    wait_for(page, "__demo.approval !== null")
    return demo(page, "__demo.approval")


def tool_state(page, index: int = -1) -> str:
    return page.locator("#log .entry.tool").nth(index).get_attribute("data-state")


def wait_tool(page, state: str, count: int = 1) -> None:
    selector = f"#log .entry.tool[data-state={state}]"
    wait_for(page, f"document.querySelectorAll({selector!r}).length >= {count}")


def answer(page, fragment: str) -> str:
    """The agent's entry that contains ``fragment``, once it arrives."""
    wait_for(
        page,
        f"[...document.querySelectorAll('#log .entry.agent')].some("
        f"(e) => e.textContent.includes({fragment!r}))",
    )
    return next(text for text in entries(page, "agent") if fragment in text)


def chunk_count(page, kind: str) -> int:
    return demo(page, f"__demo.received.chunks[{kind!r}] ?? 0")


# ------------------------------------------------------------------ approval dialog


def test_approve_with_the_keyboard(open_page):
    page = open_page(PTT)
    connect(page)
    request = ask(page, "pay 5 EUR to Alice")
    assert request["toolName"] == "process_payment"
    dialog = page.get_by_role("dialog", name="Allow process_payment?")
    assert dialog.is_visible()
    assert dialog.get_attribute("aria-modal") == "true"
    args = page.inner_text("#approval-args")
    assert '"recipient": "Alice"' in args and '"amount": 5' in args and '"currency": "EUR"' in args
    assert demo(page, "document.activeElement.id") == "approval-approve"  # focus moved in
    assert tool_state(page) == "approval"
    assert "waiting for approval" in entries(page, "tool")[-1]

    page.keyboard.press("Enter")
    wait_tool(page, "done")
    assert not dialog.is_visible()
    assert demo(page, "document.activeElement.id") == "text"  # and back where it was
    text = answer(page, "process_payment returned")
    assert '"success": true' in text and '"recipient": "Alice"' in text and "txn_" in text
    assert demo(page, "__demo.decisions") == [{"toolName": "process_payment", "approved": True}]
    assert chunk_count(page, "tool-output-available") == 1
    check_no_page_errors(page)


def test_deny_with_escape_and_with_the_button(open_page):
    page = open_page(PTT)
    connect(page)
    ask(page, "pay 7 USD to Bob")
    page.keyboard.press("Escape")
    wait_tool(page, "denied")
    assert not page.locator("#approval").is_visible()
    text = answer(page, '"status": "denied"')
    assert "process_payment returned" in text
    # Escape in the dialog denies; it does not interrupt the agent (which
    # would cancel the call instead).
    assert chunk_count(page, "data-interrupted") == 0

    ask(page, "pay 8 EUR to Carol")
    page.click("#approval-deny")
    wait_tool(page, "denied", count=2)
    assert demo(page, "__demo.decisions") == [
        {"toolName": "process_payment", "approved": False},
        {"toolName": "process_payment", "approved": False},
    ]
    # The server never ran the tool: no output, only the two denials. (The
    # page marks the entry denied when the user decides; the server's chunk
    # follows.)
    wait_for(page, "(__demo.received.chunks['tool-output-denied'] ?? 0) >= 2")
    assert chunk_count(page, "tool-output-denied") == 2
    assert chunk_count(page, "tool-output-available") == 0
    check_no_page_errors(page)


# ------------------------------------------------------------------ music


SAMPLE = """async (ms) => {
  const out = [];
  for (const end = performance.now() + ms; performance.now() < end; ) {
    out.push(__demo.musicAnalysis());
    await new Promise((r) => setTimeout(r, 50));
  }
  return out;
}"""


def play(page, track: str) -> None:
    """Ask for ``track``; returns once the browser ran the tool, which it
    does at once: change_bgm needs no approval (as in the seed project)."""
    runs = len(demo(page, "__demo.toolRuns"))
    cue = "stop the music" if track == "off" else f"play {track}"
    page.fill("#text", cue)
    page.press("#text", "Enter")
    wait_for(page, f"__demo.music.track === {track!r} && __demo.toolRuns.length > {runs}")
    run = demo(page, "__demo.toolRuns")[runs]
    assert run["toolName"] == "change_bgm" and run["input"] == {"track": track}
    assert demo(page, "__demo.approval") is None
    assert not [d for d in demo(page, "__demo.decisions") if d["toolName"] == "change_bgm"]


def assert_dominant_band(page, track: str) -> None:
    """The analyser on the music bus hears the track's own band, most of the time."""
    lo, hi = BANDS[track]
    wait_for(page, f"((hz) => hz >= {lo} && hz <= {hi})(__demo.musicAnalysis().dominantHz)")
    readings = page.evaluate(SAMPLE, 2000)
    peaks = [r["dominantHz"] for r in readings]
    share = sum(lo <= hz <= hi for hz in peaks) / len(peaks)
    assert share >= 0.7, (track, peaks)


def test_change_bgm_switches_the_music_the_analyser_hears(open_page):
    page = open_page(PTT)
    connect(page)
    assert demo(page, "__demo.musicAnalysis().levelDb") == float("-inf")  # silent until asked
    play(page, "jazz")
    assert_dominant_band(page, "jazz")
    play(page, "ambient")
    assert_dominant_band(page, "ambient")
    play(page, "lofi")
    assert_dominant_band(page, "lofi")
    runs = demo(page, "__demo.toolRuns")
    assert [r["output"] for r in runs] == [
        {"track": t, "playing": True} for t in ("jazz", "ambient", "lofi")
    ]
    assert len(page.locator("#log .entry.tool[data-state=done]").all()) == 3
    play(page, "off")
    wait_for(page, "__demo.musicAnalysis().levelDb < -80")  # the fade-out ends in silence
    check_no_page_errors(page)


def test_music_ducks_while_the_agent_speaks(open_page):
    page = open_page(PTT)
    connect(page)
    play(page, "lofi")
    assert_dominant_band(page, "lofi")
    wait_for(page, "!__demo.music.ducked && __demo.playback.state === 'idle'")
    before = statistics.median(r["levelDb"] for r in page.evaluate(SAMPLE, 1500))
    # A push-to-talk turn of about a second: the model echoes it, so the
    # agent's audio plays for as long.
    demo(page, "document.activeElement.blur()")  # Space in the text box types a space
    page.keyboard.down("Space")
    wait_for(page, "__demo.capture.sent >= 50")
    page.keyboard.up("Space")
    wait_for(page, "__demo.music.ducked === true", 20)
    ducked = page.evaluate(
        """async () => {
          const out = [];
          while (__demo.music.ducked) {
            const r = __demo.musicAnalysis();
            if (r.duckGain < 0.25) out.push(r.levelDb);  // past the duck's ramp
            await new Promise((r) => setTimeout(r, 50));
          }
          return out;
        }"""
    )
    assert len(ducked) >= 3, ducked
    assert statistics.median(ducked) <= before - 8, (before, ducked)
    # The agent is done: the music comes back to its level.
    assert demo(page, "__demo.events.ended") >= 1
    wait_for(page, "__demo.musicAnalysis().duckGain > 0.95")
    check_no_page_errors(page)


# ------------------------------------------------------------------ geolocation


def test_an_adk_tools_confirmation_shows_its_hint_and_runs_once_approved(browser, desk_server_url):
    """A user's agent (the desk app) whose tool asks with
    ``request_confirmation``: the dialog asks in the tool's words, and the
    approval runs it with the payload it offered."""
    context = browser.new_context(viewport={"width": 820, "height": 900})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(desk_server_url + PTT)
        page.wait_for_function("() => window.__demo !== undefined")
        connect(page)
        request = ask(page, 'call book_room {"room": "Blue"}')
        assert request["toolName"] == "book_room" and request["input"] == {"room": "Blue"}
        assert request["hint"] == "Book Blue? Say how many nights."
        assert page.locator("#approval-what").inner_text() == request["hint"]
        page.keyboard.press("Enter")
        wait_tool(page, "done")
        text = answer(page, "book_room returned")
        assert '"booked": "Blue"' in text and '"nights": 1' in text  # the offered payload
        assert chunk_count(page, "data-confirmation") == 1
        assert chunk_count(page, "tool-output-available") == 1
        assert errors == []
    finally:
        context.close()


def test_geolocation_reaches_the_model(open_page):
    page = open_page(PTT, geolocation=PARIS, permissions=["geolocation"])
    connect(page)
    request = ask(page, "where am I")
    assert request == {
        "approvalId": request["approvalId"],
        "toolCallId": request["toolCallId"],
        "toolName": "get_location",
        "input": {},
        "hint": "",  # not an ADK tool's confirmation: the dialog asks in its own words
    }
    page.keyboard.press("Enter")
    wait_tool(page, "done")
    (run,) = demo(page, "__demo.toolRuns")
    assert run["output"] == PARIS
    text = answer(page, "get_location returned")
    assert '"latitude": 48.8584' in text and '"longitude": 2.2945' in text
    check_no_page_errors(page)


def test_geolocation_refused_is_a_tool_error(open_page):
    page = open_page(PTT)  # no permission granted
    connect(page)
    ask(page, "where am I")
    page.click("#approval-approve")
    wait_tool(page, "error", 1)
    (run,) = demo(page, "__demo.toolRuns")
    assert run["errorText"] and "output" not in run
    assert run["errorText"] in entries(page, "tool")[-1]
    text = answer(page, "get_location returned")
    assert '"status": "error"' in text and run["errorText"] in text
    check_no_page_errors(page)


# ------------------------------------------------------------------ time zone


def test_the_time_is_told_in_the_browsers_time_zone(open_page):
    """The page sends its own zone at start (Chromium's, set here to
    Kathmandu, +05:45); get_current_time answers in it. Chromium's ICU names
    it by its older alias, which the tz database keeps as a link."""
    page = open_page(PTT, timezone_id="Asia/Kathmandu")
    connect(page)
    zone = demo(page, "Intl.DateTimeFormat().resolvedOptions().timeZone")
    assert zone in ("Asia/Kathmandu", "Asia/Katmandu")
    page.fill("#text", "what time is it")
    page.press("#text", "Enter")
    text = answer(page, "It is ")
    assert text.endswith(f"({zone}).")
    tool = next(t for t in entries(page, "tool") if t.startswith("get_current_time"))
    assert '"utcOffset":"+05:45"' in tool.replace(" ", ""), tool
    check_no_page_errors(page)
