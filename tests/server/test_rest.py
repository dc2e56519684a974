"""ADK's session REST routes (audiocore_server/http/session_rest.py): the same paths, bodies and
status codes as ``adk api_server`` (google-adk 2.13.0), on the real session
store; CORS and the API key."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from dataclasses import replace
from typing import Any

import pytest
from starlette.testclient import TestClient

from audiocore_server import Settings, create_app
from audiocore_server.http import session_worker as store_worker
from audiocore_server.storage.session_access import build_session_service

BASE = "/apps/audiocore/users/u1/sessions"


def test_create_get_list_patch_delete(client: TestClient) -> None:
    created = client.post(BASE, json={"sessionId": "s1", "state": {"k": "v", "n": 1}})
    assert created.status_code == 200
    session = created.json()
    assert session["id"] == "s1" and session["appName"] == "audiocore" and session["userId"] == "u1"
    assert session["state"] == {"k": "v", "n": 1} and session["events"] == []
    assert isinstance(session["lastUpdateTime"], float)

    got = client.get(f"{BASE}/s1")
    assert got.status_code == 200 and got.json()["state"] == {"k": "v", "n": 1}

    patched = client.patch(f"{BASE}/s1", json={"stateDelta": {"k": "v2"}})
    assert patched.status_code == 200
    body = patched.json()
    assert body["state"] == {"k": "v2", "n": 1}
    (event,) = body["events"]
    assert event["author"] == "user" and event["actions"]["stateDelta"] == {"k": "v2"}
    assert event["invocationId"].startswith("p-")

    client.post(BASE, json={"session_id": "s2"})
    listed = client.get(BASE)
    assert listed.status_code == 200
    assert [s["id"] for s in listed.json()] == ["s1", "s2"]
    assert all(s["events"] == [] for s in listed.json())

    deleted = client.delete(f"{BASE}/s1")
    assert deleted.status_code == 200 and deleted.content == b"null"
    assert client.get(f"{BASE}/s1").status_code == 404
    again = client.delete(f"{BASE}/s1")  # ADK answers the same for a missing session
    assert again.status_code == 200 and again.json() is None


@pytest.mark.parametrize("body", [None, "null", "{}"])
def test_create_without_an_id_makes_one(client: TestClient, body: str | None) -> None:
    response = client.post(BASE, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert len(response.json()["id"]) >= 20


def test_duplicate_is_409_with_adks_detail(client: TestClient) -> None:
    assert client.post(BASE, json={"sessionId": "dup"}).status_code == 200
    again = client.post(BASE, json={"sessionId": "dup"})
    assert again.status_code == 409 and again.json() == {"detail": "Session already exists: dup"}


def test_older_create_takes_the_body_as_the_state(client: TestClient) -> None:
    response = client.post(f"{BASE}/legacy", json={"a": 1})
    assert response.status_code == 200 and response.json()["state"] == {"a": 1}
    nested = client.post(f"{BASE}/legacy2", json={"state": {"a": 1}})
    assert nested.json()["state"] == {"state": {"a": 1}}  # as ADK's server does
    assert client.post(f"{BASE}/legacy").status_code == 409


def test_create_with_events_restores_them(client: TestClient) -> None:
    event = {
        "author": "user",
        "invocationId": "i1",
        "content": {"role": "user", "parts": [{"text": "hello"}]},
    }
    response = client.post(BASE, json={"sessionId": "ev1", "events": [event]})
    assert response.status_code == 200
    (restored,) = response.json()["events"]
    assert restored["content"]["parts"] == [{"text": "hello"}]
    assert client.get(f"{BASE}/ev1").json()["events"][0]["content"]["parts"] == [{"text": "hello"}]


@pytest.mark.parametrize(
    ("event", "detail"),
    [
        ({"author": "user", "longRunningToolIds": ["x"]}, "cannot include long-running tool IDs."),
        ({"author": "user", "actions": {"stateDelta": {"a": 1}}}, "cannot include event actions."),
        (
            {
                "author": "model",
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "adk_request_confirmation", "args": {}}}],
                },
            },
            "cannot include ADK protocol function calls.",
        ),
    ],
)
def test_initial_events_are_checked_as_adk_does(
    client: TestClient, event: dict[str, Any], detail: str
) -> None:
    response = client.post(BASE, json={"events": [event]})
    assert response.status_code == 400
    assert response.json() == {"detail": f"Session initialization event 0 {detail}"}


def test_not_found_and_refused_targets(client: TestClient) -> None:
    assert client.get(f"{BASE}/nope").json() == {"detail": "Session not found"}
    assert client.get(f"{BASE}/nope").status_code == 404
    assert client.patch(f"{BASE}/nope", json={"stateDelta": {}}).status_code == 404
    other_app = client.post("/apps/other/users/u1/sessions", json={})
    assert other_app.status_code == 404 and "App not found" in other_app.json()["detail"]
    # The web page's and the HTTP chat's users: their session ids are capabilities.
    for user in ("web", "chat"):
        assert client.get(f"/apps/audiocore/users/{user}/sessions").status_code == 404
    bad_id = client.post(BASE, json={"sessionId": "../../etc"})
    assert bad_id.status_code == 400 and "Invalid session id" in bad_id.json()["detail"]
    assert client.get(f"{BASE}/a%20b").status_code == 404


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ("{not json", 400),
        ("[1, 2]", 422),
        ('{"sessionId": 5}', 422),
        ('{"state": []}', 422),
        ('{"events": {}}', 422),
        ('{"events": [{"author": 5}]}', 422),
        ("[" * 100_000 + "]" * 100_000, 400),
    ],
)
def test_malformed_bodies(client: TestClient, body: str, status: int) -> None:
    response = client.post(BASE, content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert isinstance(response.json()["detail"], str)


def test_oversized_body_is_413(settings: Settings) -> None:
    small = replace(settings, max_http_body_bytes=1000)
    with TestClient(create_app(small)) as client:
        response = client.post(BASE, content=json.dumps({"state": {"x": "y" * 2000}}))
        assert response.status_code == 413
        streamed = client.post(BASE, content=iter([b"{", b" " * 2000, b"}"]))
        assert streamed.status_code == 413


def test_list_apps(client: TestClient) -> None:
    assert client.get("/list-apps").json() == ["audiocore"]
    detailed = client.get("/list-apps?detailed=true").json()
    assert detailed["apps"][0]["name"] == "audiocore"
    assert detailed["apps"][0]["rootAgentName"] == "voice_agent"


def test_a_live_session_cannot_be_deleted_under_its_run(client: TestClient) -> None:
    client.post(BASE, json={"sessionId": "busy"})
    with client.websocket_connect("/run_live?user_id=u1&session_id=busy") as ws:
        # An answer means the run holds the session.
        ws.send_text(json.dumps({"content": {"role": "user", "parts": [{"text": "hi"}]}}))
        while not ws.receive_json().get("turnComplete"):
            pass
        response = client.delete(f"{BASE}/busy")
        assert response.status_code == 409
    assert client.delete(f"{BASE}/busy").status_code == 200


def test_cors_preflight_from_an_allowed_and_a_refused_origin(settings: Settings) -> None:
    listed = replace(settings, allowed_origins=("https://app.example",))
    with TestClient(create_app(listed)) as client:
        for origin in ("https://app.example", "http://localhost:3000"):
            preflight = client.options(
                BASE,
                headers={
                    "origin": origin,
                    "access-control-request-method": "POST",
                    "access-control-request-headers": "content-type",
                },
            )
            assert preflight.status_code == 200
            assert preflight.headers["access-control-allow-origin"] == origin
            simple = client.get("/list-apps", headers={"origin": origin})
            assert simple.headers["access-control-allow-origin"] == origin
        refused = client.options(
            BASE,
            headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
        )
        assert refused.status_code == 403 and refused.text == "Forbidden: origin not allowed"
        post = client.post(BASE, json={}, headers={"origin": "https://evil.example"})
        assert post.status_code == 403


def test_api_key_when_configured(settings: Settings) -> None:
    keyed = replace(settings, api_key="s3cret")
    with TestClient(create_app(keyed)) as client:
        assert client.get("/list-apps").status_code == 401
        assert client.get("/list-apps", headers={"x-api-key": "wrong"}).status_code == 401
        assert client.get("/list-apps", headers={"x-api-key": "s3cret"}).status_code == 200
        bearer = client.get("/list-apps", headers={"authorization": "Bearer s3cret"})
        assert bearer.status_code == 200
        assert client.get("/healthz").status_code == 200  # not part of the API
        assert client.get("/").status_code == 200  # the page


def test_the_store_work_runs_in_a_process_of_its_own(settings: Settings) -> None:
    """The REST's store work runs in the store worker's process, whose
    objects and collections never stop this process's loop; it sees what
    the live path stored, and the live path sees what it stored."""
    with TestClient(create_app(settings)) as client:
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        worker_pid = client.portal.call(runtime.store_worker.pid)
        assert worker_pid != os.getpid()
        base = f"/apps/{settings.app_name}/users/alice/sessions"
        assert client.post(base, json={"sessionId": "s1", "state": {"k": 1}}).status_code == 200
        stored = client.portal.call(
            lambda: runtime.sessions.service.get_session(
                app_name=settings.app_name, user_id="alice", session_id="s1"
            )
        )
        assert stored is not None and stored.state == {"k": 1}


def test_a_dead_store_worker_is_a_503_and_then_replaced(settings: Settings) -> None:
    """The worker killed under the server: the next request gets 503 (never
    a hang or a 500), and the one after it a new worker."""
    with TestClient(create_app(settings)) as client:
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        base = f"/apps/{settings.app_name}/users/alice/sessions"
        assert client.post(base, json={"sessionId": "s1"}).status_code == 200
        first = client.portal.call(runtime.store_worker.pid)
        os.kill(first, signal.SIGKILL)
        failed = client.get(f"{base}/s1")
        assert failed.status_code == 503
        assert failed.json() == {"detail": "the session store's worker stopped; try again"}
        again = client.get(f"{base}/s1")
        assert again.status_code == 200 and again.json()["id"] == "s1"
        assert client.portal.call(runtime.store_worker.pid) != first


def test_past_max_waiting_the_rest_is_busy(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TestClient(create_app(settings)) as client:
        monkeypatch.setattr(store_worker, "MAX_WAITING", 0)
        busy = client.get(f"/apps/{settings.app_name}/users/alice/sessions")
        assert busy.status_code == 503
        assert busy.json() == {"detail": "the session store is busy (0 requests waiting)"}
        monkeypatch.setattr(store_worker, "MAX_WAITING", 64)
        assert client.get(f"/apps/{settings.app_name}/users/alice/sessions").json() == []


class Periods:
    """``expire_periodically``'s wait, driven by the test: each wait is
    announced, and ends when the test lets it."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self._waits: asyncio.Queue[asyncio.Event] = asyncio.Queue()

    async def wait(self, seconds: float) -> None:
        self.asked.append(seconds)
        end = asyncio.Event()
        await self._waits.put(end)
        await end.wait()

    async def next(self, loop_task: asyncio.Task[None]) -> asyncio.Event:
        """The loop's next wait (once what came before it is done); the
        loop's own failure if it ends instead."""
        waiting = asyncio.ensure_future(self._waits.get())
        await asyncio.wait({waiting, loop_task}, return_when=asyncio.FIRST_COMPLETED)
        if not waiting.done():
            waiting.cancel()
            loop_task.result()  # raises what ended it
            raise AssertionError("expire_periodically returned")
        return waiting.result()


def test_idle_api_sessions_expire_every_period_and_a_failure_does_not_stop_it(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """The loop expires the API users' idle sessions at every period; a
    worker that died under one expiry is a warning in the log, and the next
    period's expiry runs in a new worker."""
    settings = replace(settings, api_session_ttl_s=60.0)
    caplog.set_level(logging.INFO, logger=store_worker.__name__)
    service = build_session_service(settings)
    app = settings.app_name

    def later() -> float:  # every session made here is idle past the TTL by then
        return time.time() + 2 * settings.api_session_ttl_s

    async def stored() -> list[str]:
        found = await service.list_sessions(app_name=app, user_id="alice")
        return sorted(s.id for s in found.sessions)

    async def scenario() -> None:
        store = store_worker.StoreWorker(settings)
        periods = Periods()
        expiring = asyncio.create_task(store.expire_periodically(wait=periods.wait, clock=later))
        try:
            await service.create_session(app_name=app, user_id="alice", session_id="a")
            (await periods.next(expiring)).set()
            finished_first = await periods.next(expiring)
            assert await stored() == []
            assert "deleted 1 API sessions idle for 60 s" in caplog.text

            os.kill(await store.pid(), signal.SIGKILL)
            await service.create_session(app_name=app, user_id="alice", session_id="b")
            finished_first.set()
            finished_failed = await periods.next(expiring)
            failures = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert [r.getMessage() for r in failures] == ["expiring idle API sessions failed"]
            assert failures[0].exc_info is not None  # with its traceback
            assert await stored() == ["b"]

            finished_failed.set()
            await periods.next(expiring)
            assert await stored() == []
            assert periods.asked == [60.0] * 4
        finally:
            expiring.cancel()
            await asyncio.gather(expiring, return_exceptions=True)
            await store.close()
            await service.close()

    asyncio.run(scenario())
