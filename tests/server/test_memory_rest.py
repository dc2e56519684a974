"""The memory REST on real uvicorn: an owner's memory listed, searched and
forgotten by path (an ADK user) or by the client's key, under the API's
credentials; nobody reaches another owner's."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator

import httpx
import pytest
import websockets
from server_helpers import Collector, uvicorn_thread

from audiocore_server import Settings, create_app

KEY = "test-api-key-0123456789"
SECRET = "token-secret-new-0123456789abcdefghij"
API = {"x-api-key": KEY}
USER_KEY = "alice-key-0123456789abcdef"


@pytest.fixture
def base(settings: Settings) -> Iterator[str]:
    keyed = dataclasses.replace(settings, api_key=KEY, token_secrets=(SECRET,))
    with uvicorn_thread(create_app(keyed), log_level="warning") as (host, port):
        yield f"http://{host}:{port}"


def mint(http: httpx.Client, owner: str) -> dict[str, str]:
    response = http.post("/tokens", json={"owner": owner}, headers=API)
    assert response.status_code == 200, response.text
    return {"authorization": f"Bearer {response.json()['token']}"}


def remember_over_ws(base: str, user_key: str, fact: str, token: str) -> str:
    """``fact`` remembered on ``/ws`` by the client of ``user_key`` with its token."""

    async def scenario() -> str:
        url = base.replace("http://", "ws://") + f"/ws?token={token}"
        c = Collector(await websockets.connect(url, max_size=None))
        await c.ws.send(
            json.dumps({"type": "start", "userKey": user_key, "turnDetection": "manual"})
        )
        await c.wait_for("data-session")
        await c.ws.send(json.dumps({"type": "text", "text": f"remember that {fact}"}))
        await c.wait_for("finish")
        (output,) = [m for _, m in c.messages if m["type"] == "tool-output-available"]
        await c.close()
        return str(output["output"]["remembered"]["id"])

    return asyncio.run(scenario())


def test_an_api_users_memory_by_path(base: str) -> None:
    with httpx.Client(base_url=base) as http:
        alice, bob = mint(http, "alice"), mint(http, "bob")
        path = "/apps/audiocore/users/alice/memory"
        assert http.get(path).status_code == 401
        assert http.get(path, headers=bob).status_code == 401  # not bob's user
        empty = http.get(path, headers=alice)
        assert empty.status_code == 200
        assert empty.json()["memories"] == [] and empty.json()["profile"]["user"] == ""
        profile = http.put(f"{path}/profile", json={"user": "Name: Alice"}, headers=alice)
        assert profile.json()["profile"]["user"] == "Name: Alice"
        assert http.get("/apps/audiocore/users/web/memory", headers=API).status_code == 404
        assert http.get("/apps/other/users/alice/memory", headers=API).status_code == 404
        assert http.get("/apps/audiocore/users/bob/memory", headers=bob).json()["profile"] == {
            "user": "",
            "managed": "",
            "document": "<!-- audiocore:memory:managed -->\n\n<!-- audiocore:memory:end -->",
        }


def test_a_key_owners_memory_lists_searches_and_forgets(base: str) -> None:
    with httpx.Client(base_url=base) as http:
        token = mint(http, USER_KEY)["authorization"].split()[1]
        first = remember_over_ws(base, USER_KEY, "my bike is red", token)
        second = remember_over_ws(base, USER_KEY, "my car is blue", token)
        mine = {"authorization": f"Bearer {token}"}
        listed = http.get("/memory", headers=mine).json()["memories"]
        assert [m["id"] for m in listed] == [second, first]  # the newest first
        searched = http.get("/memory", params={"query": "bike"}, headers=mine).json()
        assert [m["id"] for m in searched["memories"]] == [first]
        # The stored turns are there too, apart.
        turns = http.get("/memory", params={"query": "bike", "kind": "turn"}, headers=mine)
        assert "remember that my bike is red" in [m["text"] for m in turns.json()["memories"]]
        # The API key names any key; a token only its own.
        by_key = http.get("/memory", headers={**API, "x-user-key": USER_KEY}).json()
        assert [m["id"] for m in by_key["memories"]] == [second, first]
        other = mint(http, "mallory")
        refused = http.get("/memory", headers={**other, "x-user-key": USER_KEY})
        assert refused.status_code == 403
        assert http.get("/memory", headers=other).json()["memories"] == []
        assert http.delete(f"/memory/{first}", headers=other).status_code == 404
        assert http.get("/memory", headers=API).status_code == 400  # no key named
        short = http.get("/memory", headers={**API, "x-user-key": "short"})
        assert short.status_code == 400 and "userKey" in short.json()["detail"]
        # Forget one, then everything.
        gone = http.delete(f"/memory/{first}", headers=mine)
        assert gone.status_code == 200 and gone.json() == {"forgotten": [first]}
        assert http.delete(f"/memory/{first}", headers=mine).status_code == 404
        assert http.delete("/memory/not-an-id", headers=mine).status_code == 400
        remaining = http.get("/memory", params={"kind": "all"}, headers=mine).json()["memories"]
        assert second in [m["id"] for m in remaining]
        everything = http.delete("/memory", headers=mine).json()["forgotten"]
        assert everything == len(remaining)
        assert http.get("/memory", params={"kind": "all"}, headers=mine).json()["memories"] == []


@pytest.mark.parametrize(
    ("params", "detail"),
    [
        ({"limit": "0"}, "limit: expected a whole number from 1 to 100 in ASCII digits, got '0'"),
        ({"limit": "x"}, "limit: expected a whole number from 1 to 100 in ASCII digits, got 'x'"),
        ({"kind": "secret"}, 'kind: expected one of "fact", "turn", "all", got \'secret\''),
        ({"query": "q" * 1001}, "query: at most 1000 characters, got 1001"),
    ],
)
def test_bad_queries_get_a_clear_error(base: str, params: dict[str, str], detail: str) -> None:
    with httpx.Client(base_url=base) as http:
        response = http.get("/apps/audiocore/users/alice/memory", params=params, headers=API)
        assert response.status_code == 400 and response.json() == {"detail": detail}


def test_hostile_search_text_is_words(base: str) -> None:
    with httpx.Client(base_url=base) as http:
        path = "/apps/audiocore/users/alice/memory"
        for query in ('"', "NEAR(a b)", "x* OR *", "'; DROP TABLE memories; --", "\x00"):
            response = http.get(path, params={"query": query}, headers=API)
            assert response.status_code == 200 and response.json()["memories"] == []


def test_the_profile_body_is_checked(base: str) -> None:
    with httpx.Client(base_url=base) as http:
        path = "/apps/audiocore/users/alice/memory/profile"
        for body, status in (
            ({"user": "ok", "managed": "x"}, 400),
            ({"user": 5}, 400),
            ({"user": "<!-- audiocore:memory:managed -->"}, 400),
            ({"user": "x" * 8001}, 400),
            ([], 400),
        ):
            assert http.put(path, json=body, headers=API).status_code == status, body
        too_big = http.put(path, content=b" " * 40_000, headers=API)
        assert too_big.status_code == 413
