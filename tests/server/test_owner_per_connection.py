"""One owner per connection, from what the connection proved.

A session remembers whose it was (``task_owner`` in its state, for its
tools). A client that resumes it by id must get the owner its own
credentials give — its ``userKey``, its token's owner, or none — never the
stored one: not the stored owner's long-term memory (recalled, listed, or
shown to the model at connect), not its tasks (cards, status), on ``/ws``
and ``/live``, with no credentials, the API key, or a token.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from memory_helpers import answer, memory_output
from server_helpers import receive_until, start
from starlette.testclient import TestClient

from audiocore_server import Settings, create_app
from audiocore_server.memory.tool import NO_MEMORY

ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef012"
API_KEY = "api-key-for-owner-tests-0123456789"
FACT = "my locker code is 4711"
LONG = "wait 120 seconds"  # never done while the test runs: no outcome turn interleaves


def ask(ws: Any, text: str) -> list[dict[str, Any]]:
    ws.send_text(json.dumps({"type": "text", "text": text}))
    return receive_until(ws, "finish")


def tool_output(turn: list[dict[str, Any]], name: str) -> Any:
    call = next(m for m in turn if m["type"] == "tool-input-available")
    assert call["toolName"] == name, call
    return next(m for m in turn if m["type"] == "tool-output-available")["output"]


@dataclasses.dataclass
class Credential:
    """How a client connects: query and headers, and what it says in ``start``."""

    name: str
    query: str = ""
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    user_key: str | None = None

    def connect(self, client: TestClient, path: str) -> Any:
        return client.websocket_connect(f"{path}{self.query}", headers=self.headers)

    def start_fields(self) -> dict[str, Any]:
        return {"userKey": self.user_key} if self.user_key is not None else {}


def _mint(client: TestClient, owner: str) -> str:
    response = client.post("/tokens", json={"owner": owner}, headers={"x-api-key": API_KEY})
    assert response.status_code == 200, response.text
    token: str = response.json()["token"]
    return token


@pytest.fixture(params=["no credentials", "the API key", "a token"])
def served(request: pytest.FixtureRequest, settings: Settings) -> Iterator[tuple[TestClient, str]]:
    keyed = request.param != "no credentials"
    app = create_app(dataclasses.replace(settings, api_key=API_KEY) if keyed else settings)
    with TestClient(app) as client:
        yield client, request.param


def _alice_and_a_stranger(client: TestClient, form: str) -> tuple[Credential, list[Credential]]:
    """Alice's credential, and the clients that resume her session: each
    proves someone else, or no one."""
    api = {"x-api-key": API_KEY}
    if form == "no credentials":
        return Credential("alice", user_key=ALICE), [
            Credential("no key"),
            Credential("bob", user_key=BOB),
        ]
    if form == "the API key":
        return Credential("alice", headers=api, user_key=ALICE), [
            Credential("no key", headers=api),
            Credential("bob", headers=api, user_key=BOB),
        ]
    return Credential("alice", query=f"?token={_mint(client, ALICE)}"), [
        Credential("no key", headers=api),
        Credential("bob", query=f"?token={_mint(client, BOB)}"),
    ]


def test_a_resumed_session_lends_nobody_its_stored_owner(served: tuple[TestClient, str]) -> None:
    client, form = served
    alice, strangers = _alice_and_a_stranger(client, form)
    with alice.connect(client, "/ws") as ws:
        session_id = start(ws, turnDetection="manual", **alice.start_fields())["data"]["sessionId"]
        _, out = memory_output(ask(ws, f"remember that {FACT}"))
        fact = out["remembered"]["id"]
        task = tool_output(ask(ws, f"start a task to {LONG}"), "start_task")["taskId"]
        # Alice herself, back: her memory, her task.
        _, out = memory_output(ask(ws, "what do you remember about my locker"))
        assert [m["id"] for m in out["memories"]] == [fact]

    for stranger in strangers:
        fields = {"sessionId": session_id, "turnDetection": "manual", **stranger.start_fields()}
        with stranger.connect(client, "/ws") as ws:
            welcome = start(ws, **fields)
            assert welcome["data"]["resumed"], (form, stranger.name)
            # What the welcome told (task cards) arrives before the first answer.
            recalled = ask(ws, "what do you remember about my locker")
            _, out = memory_output(recalled)
            told = answer(ask(ws, "what were you told about me"))
            status = tool_output(ask(ws, f"what's the status of task {task}"), "get_task_status")
        cards = [m for m in recalled if m["type"] == "data-task"]
        where = f"{form}, resumed by {stranger.name}"
        if stranger.user_key is None and not stranger.query:
            assert out == {"error": NO_MEMORY, "memory": False}, where
            assert told == NO_MEMORY, where
        else:
            assert out["memories"] == [], where
            assert FACT not in told, where
        assert "error" in status and status.get("taskId") != task, where
        assert not [c for c in cards if c["id"] == task], where


def test_the_seed_dialect_resuming_a_session_gets_no_stored_owner(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        with client.websocket_connect("/ws") as ws:
            session_id = start(ws, turnDetection="manual", userKey=ALICE)["data"]["sessionId"]
            memory_output(ask(ws, f"remember that {FACT}"))
        with client.websocket_connect("/live") as ws:
            ws.send_text(
                json.dumps({"type": "start", "sessionId": session_id, "turnDetection": "manual"})
            )
            ws.send_text(
                json.dumps(
                    {
                        "type": "message",
                        "id": "chat",
                        "messages": [
                            {
                                "id": "u1",
                                "role": "user",
                                "parts": [{"type": "text", "text": "what do you know about me"}],
                            }
                        ],
                        "trigger": "submit-message",
                    }
                )
            )
            chunks = []
            while not chunks or chunks[-1].get("type") != "finish":
                frame = ws.receive_text()
                if frame.startswith("data: ") and "[DONE]" not in frame:
                    chunks.append(json.loads(frame[len("data: ") :]))
        _, out = memory_output(chunks)
        assert out == {"error": NO_MEMORY, "memory": False}
