"""Two approvals from one model step on the demo page, in real Chromium
against the real server (offline model): the dialog asks for each in turn,
the browser runs its tool once, and one answer tells both.

Push-to-talk mode, so the fake microphone starts no turn by itself.
"""

from __future__ import annotations

from test_tools_page import PARIS, PTT, answer, wait_tool
from web_helpers import check_no_page_errors, connect, demo, entries, wait_for


def test_two_approvals_one_step_one_answer(open_page):
    page = open_page(PTT, geolocation=PARIS, permissions=["geolocation"])
    connect(page)
    page.fill("#text", "pay 5 EUR to Alice and where am I")
    page.press("#text", "Enter")
    wait_for(page, "__demo.approval?.toolName === 'process_payment'")
    page.keyboard.press("Enter")  # approve the payment ...
    wait_for(page, "__demo.approval?.toolName === 'get_location'")  # ... then the next
    page.keyboard.press("Enter")
    wait_tool(page, "done", count=2)
    text = answer(page, "returned")
    assert "process_payment returned" in text and '"success": true' in text
    assert "get_location returned" in text and "48.8584" in text
    assert [e for e in entries(page, "agent") if "returned" in e] == [text]  # one answer
    assert demo(page, "__demo.decisions") == [
        {"toolName": "process_payment", "approved": True},
        {"toolName": "get_location", "approved": True},
    ]
    assert [run["toolName"] for run in demo(page, "__demo.toolRuns")] == ["get_location"]
    assert demo(page, "__demo.received.chunks['tool-output-available']") == 2
    check_no_page_errors(page)
