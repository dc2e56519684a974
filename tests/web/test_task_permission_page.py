"""The demo page's task card with a task on an ACP agent, and its inline
result on the timeline, in real Chromium
against the real server (offline model, ``--task-backend acp`` running the
tests' ACP agent, ``tests/server/acp_agent.py``, as its own process).

The objective "ask permission to <title>" makes the agent ask permission
for an action of that title: the card shows the task processing, delegated
to the agent, and the question; the agent tells it; the typed answer
reaches the agent, the question leaves the card and the task completes
with the option the agent got.

Push-to-talk mode, so the fake microphone starts no turn by itself. Every
wait is on the page's state or DOM; the timeouts only guard against a hang.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator

import pytest
from test_tasks_page import PTT, card_for, say, states_seen, wait_card
from web_helpers import (
    ROOT,
    ServerFailed,
    check_no_page_errors,
    connect,
    demo,
    run_server,
    wait_for,
)

AGENT = ROOT / "tests" / "server" / "acp_agent.py"
# Markup in the agent's title: the card must show it as text, never parse it.
TITLE = 'delete <b id="from-agent">build</b> & "cache"'
ASK_CUE = f"start a task to ask permission to {TITLE}"


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """This module's server: its background tasks go to the tests' ACP agent."""
    command = shlex.join([sys.executable, str(AGENT)])
    try:
        with run_server(
            tmp_path_factory.mktemp("acp-server-data"),
            extra_args=["--task-backend", "acp", "--acp-command", command],
        ) as url:
            yield url
    except ServerFailed as exc:
        pytest.fail(str(exc))


def text_of(page, selector: str) -> str | None:
    return demo(page, f"document.querySelector({selector!r})?.textContent ?? null")


@pytest.mark.parametrize(
    ("answer", "chosen"), [("yes, always", "allow_always"), ("no", "reject_once")]
)
def test_the_agent_s_permission_question_on_the_card_answered_by_typing(
    open_page, answer: str, chosen: str
):
    page = open_page(PTT)
    connect(page)
    say(page, ASK_CUE)
    objective = ASK_CUE.removeprefix("start a task to ")
    task_id = card_for(page, objective)["id"]
    card = f"#task-{task_id}"

    # The question on the card while the agent waits, the title as it came.
    question = f"The agent asks permission to: {TITLE} — say “yes, always” or “no”"
    shown = f"document.querySelector('{card} .task-permission')?.textContent"
    wait_for(page, f"{shown} === {question!r}", 30)
    assert text_of(page, f"{card} .task-state") == "processing"
    assert text_of(page, f"{card} .task-stage") == "delegated to the agent"
    assert page.locator(f"{card}[data-asking='true']").count() == 1
    assert page.locator("#from-agent").count() == 0  # no element made of the title
    asking = wait_card(page, task_id, "c.permission !== null")
    assert asking["permission"]["title"] == TITLE
    assert asking["status"] == "processing" and asking["stage"] == "delegated"

    # The agent asks it aloud; the typed answer after it is the user's.
    told = f"The agent working on your task {task_id} asks permission to {TITLE}."
    wait_for(
        page,
        "[...document.querySelectorAll('#log .entry.agent')].some("
        f"(e) => e.dataset.final === 'true' && e.textContent.startsWith({told!r}))",
        30,
    )
    say(page, answer)

    # The question leaves the card; the task completes with the agent's option.
    done = wait_card(page, task_id, "c.state === 'completed'")
    assert done["permission"] is None and done["status"] == "completed"
    wait_for(page, f"document.querySelector('{card}').dataset.asking === 'false'")
    assert page.locator(f"{card} .task-permission").count() == 0
    assert page.locator(f"{card} .task-stage").count() == 0
    assert text_of(page, f"{card} .task-state") == "completed"
    assert done["result"] == f"Permission: {chosen}."
    assert text_of(page, f"{card} .task-detail") == done["result"]
    assert states_seen(page, task_id) == ["queued", "running", "completed"]
    assert demo(page, "__demo.serverErrors") == []
    check_no_page_errors(page)


def test_a_task_s_inline_result_on_the_timeline_as_markdown_never_as_html(open_page):
    page = open_page(PTT)
    connect(page)
    say(page, "start a task to answer in markdown")
    task_id = card_for(page, "answer in markdown")["id"]
    wait_card(page, task_id, "c.state === 'completed'")
    entry = "#log .entry.inline[data-final='true']"
    wait_for(page, f"document.querySelector({entry!r}) !== null", 30)
    # Markdown made elements: a heading, a list, code, the http(s) link.
    assert text_of(page, f"{entry} h4") == "Notes"
    assert page.locator(f"{entry} li").count() == 2
    assert text_of(page, f"{entry} code") == "notes.txt"
    link = page.locator(f"{entry} a")
    assert link.count() == 1
    assert link.get_attribute("href") == "https://example.com/notes"
    assert link.get_attribute("rel") == "noopener noreferrer nofollow"
    # The javascript: link and the tag are the text they are.
    second = text_of(page, f"{entry} li:nth-child(2)")
    assert (
        second
        == '[bad](javascript:alert(1)) <img id="from-agent-md" src=x onerror="window.pwned=1">'
    )
    assert page.locator("#from-agent-md").count() == 0
    assert demo(page, "window.pwned ?? null") is None
    # What was said is the speech; the Markdown is shown, not in the agent's words.
    said = demo(
        page, "[...document.querySelectorAll('#log .entry.agent')].map((e) => e.textContent)"
    )
    assert any("The notes are tidy." in s for s in said)
    assert not any("##" in s for s in said)
    check_no_page_errors(page)
