"""Long-term memory on the HTTP chat (``POST /api/chat``): its owner is the
body's ``userKey``, as on ``/ws``, bound by a token; a fact remembered in
one chat is recalled in another of the same owner, on ``/ws`` too, never for
another owner or for a chat that names none; what a chat is told as it
starts; its turns stored. The real runner, the offline model's text path
and the SQLite memory store."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from memory_helpers import answer, memory_output, store_of
from server_helpers import start
from starlette.testclient import TestClient

from audiocore_server import Settings, create_app
from audiocore_server.memory.tool import NO_MEMORY
from audiocore_server.runtime import Runtime
from audiocore_server.storage.state_keys import OWNER_STATE_KEY
from audiocore_server.storage.users import CHAT_USER_ID

KEY = "alice-key-0123456789abcdef"
OTHER = "bob-key-0123456789abcdef01"
API_KEY = "k" * 32


def chat(
    client: TestClient,
    chat_id: str,
    text: str,
    *,
    headers: dict[str, str] | None = None,
    **body: Any,
) -> list[dict[str, Any]]:
    message = {"id": f"u-{len(text)}", "role": "user", "parts": [{"type": "text", "text": text}]}
    payload = {"id": chat_id, "messages": [message], "trigger": "submit-message", **body}
    response = client.post("/api/chat", json=payload, headers=headers or {})
    assert response.status_code == 200, response.text
    events = response.text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""], response.text[-300:]
    return [json.loads(e.removeprefix("data: ")) for e in events[:-2]]


def chat_state(client: TestClient, chat_id: str) -> dict[str, Any]:
    runtime: Runtime = client.app.state.runtime  # type: ignore[attr-defined]

    async def read() -> dict[str, Any]:
        session = await runtime.sessions.service.get_session(
            app_name=runtime.settings.app_name, user_id=CHAT_USER_ID, session_id=chat_id
        )
        assert session is not None
        return dict(session.state)

    return client.portal.call(read)  # type: ignore[union-attr]


def test_a_fact_remembered_in_one_chat_is_recalled_in_another_of_its_owner(
    settings: Settings,
) -> None:
    with TestClient(create_app(settings)) as client:
        told = chat(client, "chat-one", "remember that my dog is called Rex.", userKey=KEY)
        args, out = memory_output(told)
        assert args == {"action": "remember", "text": "my dog is called Rex"}
        fact = out["remembered"]
        assert answer(told) == f"I will remember that my dog is called Rex ({fact['id']})."

        recalled = chat(client, "chat-two", "what do you remember about my dog?", userKey=KEY)
        args, out = memory_output(recalled)
        assert args == {"action": "recall", "query": "my dog"}
        assert [m["id"] for m in out["memories"]] == [fact["id"]]
        assert answer(recalled) == f"I remember about my dog: my dog is called Rex ({fact['id']})."
        # Told as the chat's model started, as a live conversation is.
        assert "my dog is called Rex" in answer(
            chat(client, "chat-three", "what were you told about me", userKey=KEY)
        )
        # The same owner as /ws's userKey.
        with client.websocket_connect("/ws") as ws:
            start(ws, userKey=KEY, turnDetection="manual")
            ws.send_text(json.dumps({"type": "text", "text": "what do you remember about my dog"}))
            said = ""
            while (message := json.loads(ws.receive_text()))["type"] != "finish":
                said += message.get("delta", "") if message["type"] == "text-delta" else ""
            assert said == f"I remember about my dog: my dog is called Rex ({fact['id']})."

        # Another owner: nothing, and its forget finds nothing of Alice's.
        _, out = memory_output(
            chat(client, "chat-bob", "what do you remember about my dog?", userKey=OTHER)
        )
        assert out["memories"] == [] and out["conversations"] == []
        forgot = chat(client, "chat-bob", "forget my dog", userKey=OTHER)
        assert memory_output(forgot)[1]["forgotten"] == []
        # No owner: no long-term memory, said so.
        _, out = memory_output(chat(client, "chat-none", "what do you remember about my dog?"))
        assert out == {"error": NO_MEMORY, "memory": False}
        assert [r.id for r in client.portal.call(store_of(client).latest, f"key:{KEY}")] == [  # type: ignore[union-attr]
            fact["id"]
        ]


def test_the_chat_id_alone_never_carries_its_owners_memory(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        chat(client, "shared-chat", "remember that the safe code is 4711", userKey=KEY)
        assert chat_state(client, "shared-chat")[OWNER_STATE_KEY] == f"key:{KEY}"
        # The same chat without the key: its owner is gone from the session.
        _, out = memory_output(chat(client, "shared-chat", "what do you remember about the safe"))
        assert out == {"error": NO_MEMORY, "memory": False}
        assert chat_state(client, "shared-chat")[OWNER_STATE_KEY] is None
        # With another key: that owner's memory, not Alice's.
        _, out = memory_output(
            chat(client, "shared-chat", "what do you remember about the safe", userKey=OTHER)
        )
        assert out["memories"] == [] and out["conversations"] == []
        assert chat_state(client, "shared-chat")[OWNER_STATE_KEY] == f"key:{OTHER}"


def test_a_chats_turns_are_stored_unless_switched_off(settings: Settings) -> None:
    for key, store_turns in ((KEY, True), (OTHER, False)):
        tuned = dataclasses.replace(settings, store_to_memory=store_turns)
        with TestClient(create_app(tuned)) as client:
            chat(client, "ferry-chat", "the ferry leaves at noon", userKey=key)
            found = client.portal.call(store_of(client).search, f"key:{key}", "ferry")  # type: ignore[union-attr]
            turns = sorted((r.kind, r.author, r.text) for r in found)
            if not store_turns:
                assert turns == []
                continue
            assert turns == [
                ("turn", "model", "You said: the ferry leaves at noon"),
                ("turn", "user", "the ferry leaves at noon"),
            ]
            # Found by the next chat's recall, apart from the facts.
            _, out = memory_output(
                chat(client, "bus-chat", "what do you remember about the ferry", userKey=key)
            )
            assert out["memories"] == []
            assert "the ferry leaves at noon" in [m["text"] for m in out["conversations"]]


@pytest.mark.parametrize(
    "user_key",
    [
        "short",
        "",
        "x" * 101,
        "has space in it 0123456789",
        "é" * 25,  # letters, but not ASCII
        "0123456789abcdefghij\n",
        12345678901234567890,
        ["alice-key-0123456789abcdef"],
        {"key": "alice-key-0123456789abcdef"},
        True,
    ],
)
def test_a_malformed_user_key_is_400(settings: Settings, user_key: object) -> None:
    with TestClient(create_app(settings)) as client:
        body = {"id": "c1", "messages": [{"role": "user", "parts": []}], "userKey": user_key}
        response = client.post("/api/chat", json=body)
        assert response.status_code == 400
        assert response.text == "userKey: expected 20 to 100 of A-Z a-z 0-9 _ - (a random key)"


def test_a_token_is_its_owners_key_and_no_other(settings: Settings) -> None:
    keyed = dataclasses.replace(settings, api_key=API_KEY)
    with TestClient(create_app(keyed)) as client:
        minted = client.post("/tokens", json={"owner": KEY}, headers={"x-api-key": API_KEY})
        token = {"authorization": f"Bearer {minted.json()['token']}"}
        # Without a userKey the token's owner is the chat's.
        told = chat(client, "t1", "remember that tea is better than coffee", headers=token)
        fact = memory_output(told)[1]["remembered"]
        ids = [r.id for r in client.portal.call(store_of(client).latest, f"key:{KEY}")]  # type: ignore[union-attr]
        assert ids == [fact["id"]]
        # Its own key, named: the same owner.
        _, out = memory_output(
            chat(client, "t2", "what do you remember about tea", headers=token, userKey=KEY)
        )
        assert [m["id"] for m in out["memories"]] == [fact["id"]]
        # Another's key under the token: refused before anything runs.
        body = {"id": "t3", "messages": [{"role": "user", "parts": []}], "userKey": OTHER}
        refused = client.post("/api/chat", json=body, headers=token)
        assert (refused.status_code, refused.text) == (403, "userKey: not the token's owner")
        # The API key speaks for anyone: the key named is the owner.
        holder = {"x-api-key": API_KEY}
        _, out = memory_output(
            chat(client, "t4", "what do you remember about tea", headers=holder, userKey=OTHER)
        )
        assert out["memories"] == []
