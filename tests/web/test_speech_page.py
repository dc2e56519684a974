"""The page shows "listening" while the server hears the user speak (the
``data-speech`` parts), in real Chromium against the real server (offline
model), with the fake microphone (speech, then silence, in a loop).

Each check reads the state and the page in one evaluation: the status line is
painted in the same task as the chunk is applied, so the two agree there.
"""

from __future__ import annotations

from web_helpers import check_no_page_errors, connect, demo, wait_for

SHOWN = "document.querySelector('#status [data-role=speech]')?.textContent === 'listening'"
HIDDEN = "document.querySelector('#status [data-role=speech]') === null"


def test_hands_free_listening_follows_the_models_voice_detection(open_page):
    page = open_page()
    connect(page)
    assert demo(page, "__demo.listening") is False
    wait_for(page, f"__demo.listening && {SHOWN}", 20)  # the speech began
    wait_for(page, f"!__demo.listening && {HIDDEN}", 20)  # ... and its silence ended it
    speech = demo(page, "__demo.speech")
    assert speech[:2] == [
        {"state": "started", "source": "model"},
        {"state": "stopped", "source": "model"},
    ]
    check_no_page_errors(page)


def test_push_to_talk_listening_while_the_key_is_held(open_page):
    page = open_page("?mode=push-to-talk")
    connect(page)
    wait_for(page, "__demo.capture.frames >= 10")  # the microphone runs, nothing is sent
    assert demo(page, f"__demo.listening || !({HIDDEN})") is False
    page.keyboard.down("Space")
    wait_for(page, f"__demo.listening && {SHOWN}", 10)
    page.keyboard.up("Space")
    wait_for(page, f"!__demo.listening && {HIDDEN}", 10)
    assert demo(page, "__demo.speech") == [
        {"state": "started", "source": "client"},
        {"state": "stopped", "source": "client"},
    ]
    check_no_page_errors(page)
