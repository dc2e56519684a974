"""The demo page's memory panel in real Chromium against the real server
(offline model): a fact the user tells the agent is listed, Forget removes
it on the server, and another browser's user (another key) keeps theirs.

Push-to-talk mode, so the fake microphone starts no turn. Every wait is on
the page's state or DOM; the timeouts only guard against a hang."""

from __future__ import annotations

import json
import urllib.request

from web_helpers import check_no_page_errors, connect, demo, wait_for

PTT = "?mode=push-to-talk"


def say(page, text: str) -> None:
    page.fill("#text", text)
    page.press("#text", "Enter")


def remembered(page, text: str) -> dict:
    """The panel's item for ``text``, once the page lists it."""
    wait_for(page, f"__demo.memory().items.some((i) => i.text === {text!r})")
    return next(i for i in demo(page, "__demo.memory().items") if i["text"] == text)


def listed_on_server(server_url: str, key: str) -> list[str]:
    request = urllib.request.Request(
        server_url.rstrip("/") + "/memory", headers={"X-User-Key": key}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return [m["text"] for m in json.load(response)["memories"]]


def test_the_page_lists_what_the_agent_remembers_and_forgets_an_item(open_page, server_url):
    page = open_page(PTT)
    connect(page)
    assert page.locator("#memory").is_hidden()  # nothing remembered yet
    say(page, "remember that my cat is called Tom")
    item = remembered(page, "my cat is called Tom")
    row = page.locator(f"#memory-{item['id']}")
    assert row.locator(".memory-text").inner_text() == "my cat is called Tom"
    assert page.locator("#memory").is_visible()
    key = demo(page, "localStorage.getItem('audiocore.userKey')")

    other = open_page(PTT)  # another browser: another user key
    connect(other)
    say(other, "remember that my bike is green")
    remembered(other, "my bike is green")
    assert [i["text"] for i in demo(other, "__demo.memory().items")] == ["my bike is green"]
    other_key = demo(other, "localStorage.getItem('audiocore.userKey')")

    row.locator(".memory-forget").click()
    wait_for(page, "__demo.memory().items.length === 0")
    assert page.locator("#memory").is_hidden()
    assert listed_on_server(server_url, key) == []
    assert listed_on_server(server_url, other_key) == ["my bike is green"]
    check_no_page_errors(page)
    check_no_page_errors(other)


def test_what_the_agent_forgets_leaves_the_list(open_page):
    page = open_page(PTT)
    connect(page)
    say(page, "remember that the boat is blue")
    remembered(page, "the boat is blue")
    reads = demo(page, "__demo.memory().reads")
    say(page, "forget the boat")
    wait_for(page, f"__demo.memory().reads > {reads} && __demo.memory().items.length === 0")
    assert page.locator("#memory").is_hidden()
    check_no_page_errors(page)
