"""The demo page's background-task cards in real Chromium against the real
server (offline model, offline task backend).

The page keeps a random user key and sends it in ``start``; the server's
``data-task`` chunks update one card per task in place; a card's Cancel
sends ``task_cancel``. A finished task's outcome is spoken by the agent once
the line is free (audiocore_server/live/outcomes.py), and the user's tasks follow the key
into a new session.

Push-to-talk mode throughout, so the fake microphone starts no turn by
itself. Every wait is on the page's state or DOM; the timeouts only guard
against a hang.
"""

from __future__ import annotations

import csv
import re

from web_helpers import ROOT, check_no_page_errors, connect, demo, entries, wait_for

from audiocore_server.offline.model import _CUE_SECONDS

PTT = "?mode=push-to-talk"
SUM_CUE = "start a task to sum the amount column of sales.csv"
WAIT_CUE = "start a task to wait 120 seconds"  # always cancelled by the test
SALES = ROOT / "audiocore_server" / "tasks" / "sample_files" / "sales.csv"
USER_KEY = re.compile(r"[A-Za-z0-9_-]{20,100}")  # audiocore_server/wire/protocol.py USER_KEY


def sales_total() -> tuple[str, int]:
    """The reference: the amount column summed here, as the backend words it."""
    with SALES.open(newline="") as f:
        amounts = [float(row["amount"]) for row in csv.DictReader(f)]
    total = round(sum(amounts), 6)
    return (str(int(total)) if total.is_integer() else repr(total)), len(amounts)


def say(page, text: str) -> None:
    page.fill("#text", text)
    page.press("#text", "Enter")


def card_for(page, objective: str) -> dict:
    """The card of the task with ``objective``, once it exists."""
    wait_for(page, f"__demo.tasks.some((c) => c.objective === {objective!r})")
    return next(c for c in demo(page, "__demo.tasks") if c["objective"] == objective)


def card_state(page, task_id: str) -> str:
    return page.locator(f"#task-{task_id}").get_attribute("data-state")


def wait_card(page, task_id: str, condition: str) -> dict:
    """Until the card's data satisfies ``condition`` (a JS expression on ``c``)."""
    wait_for(page, f"__demo.tasks.some((c) => c.id === {task_id!r} && ({condition}))", 30)
    return next(c for c in demo(page, "__demo.tasks") if c["id"] == task_id)


def states_seen(page, task_id: str) -> list[str]:
    return [e["state"] for e in demo(page, "__demo.taskStates") if e["id"] == task_id]


def test_a_task_card_runs_to_its_result_and_the_agent_tells_it(open_page):
    page = open_page(PTT)
    connect(page)
    key = demo(page, "localStorage.getItem('audiocore.userKey')")
    assert USER_KEY.fullmatch(key), key
    assert page.locator("#tasks").is_hidden()  # no task yet

    say(page, SUM_CUE)
    objective = SUM_CUE.removeprefix("start a task to ")
    card = card_for(page, objective)
    task_id = card["id"]
    assert page.locator("#tasks").is_visible()
    done = wait_card(page, task_id, "c.state === 'completed'")
    total, rows = sales_total()
    expected = f"The sum of the amount column in sales.csv is {total} ({rows} rows)."
    assert done["result"] == expected
    assert states_seen(page, task_id) == ["queued", "running", "completed"]
    element = page.locator(f"#task-{task_id}")
    assert element.locator(".task-objective").inner_text() == objective
    assert element.locator(".task-state").inner_text() == "completed"
    assert element.locator(".task-detail").inner_text() == expected
    assert element.locator("button").count() == 0  # nothing left to cancel

    # The outcome is spoken: the server hands it to the model when the line
    # is free, and marks it delivered once that answer has played.
    told = f"Your background task {task_id} completed: {expected}"
    wait_for(
        page,
        f"[...document.querySelectorAll('#log .entry.agent')].some("
        f"(e) => e.textContent === {told!r})",
        30,
    )
    wait_card(page, task_id, "c.delivery === 'delivered'")
    # Two answers reached the speakers and played out: start_task's cue and
    # the outcome's second of tone.
    wait_for(page, "__demo.events.ended >= 2 && __demo.playback.state === 'idle'")
    rate = demo(page, "__demo.sampleRate")
    assert demo(page, "__demo.received.samples") >= int(rate * (_CUE_SECONDS + 1.0))
    assert demo(page, "__demo.events.started") >= 2
    assert entries(page, "agent").count(told) == 1  # told once
    assert demo(page, "__demo.serverErrors") == []
    check_no_page_errors(page)


def test_cancel_from_the_card_and_the_cards_follow_the_user(open_page):
    page = open_page(PTT)
    first = connect(page)
    say(page, WAIT_CUE)
    objective = WAIT_CUE.removeprefix("start a task to ")
    task_id = card_for(page, objective)["id"]
    # Inside its wait tool: a running task that only a cancel ends.
    wait_card(page, task_id, "c.state === 'running' && c.progress?.tool === 'wait'")
    assert page.locator(f"#task-{task_id} .task-detail").inner_text().startswith("wait ")

    cancel = page.get_by_role("button", name=f"Cancel the task: {objective}")
    cancel.click()
    done = wait_card(page, task_id, "c.state === 'cancelled'")
    assert card_state(page, task_id) == "cancelled"
    assert page.locator(f"#task-{task_id} button").count() == 0
    assert done["delivery"] == "none" and done["result"] is None
    seen = states_seen(page, task_id)
    assert seen[:2] == ["queued", "running"] and seen[-1] == "cancelled", seen
    assert set(seen) <= {"queued", "running", "cancelling", "cancelled"}, seen
    assert demo(page, "__demo.serverErrors") == []

    # The same browser (same localStorage, so the same user key), a new
    # session: the server shows the user's tasks again.
    again = page.context.new_page()
    again.on("pageerror", lambda exc: again.page_errors.append(str(exc)))
    again.page_errors = []
    again.goto(page.url)
    demo(again, "localStorage.removeItem('audiocore.sessionId')")
    again.reload()
    wait_for(again, "window.__demo !== undefined")
    page.close()  # free the first session; the second one is new anyway
    second = connect(again)
    assert second["sessionId"] != first["sessionId"] and not second["resumed"]
    card = wait_card(again, task_id, "c.state === 'cancelled'")
    assert card["objective"] == objective
    assert again.locator(f"#task-{task_id} .task-state").inner_text() == "cancelled"
    check_no_page_errors(again)
