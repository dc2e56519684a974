"""Every HTTP route's query parameters, parsed strictly (``query_params.py``):
on real uvicorn, every route the app has, with hostile values of every
parameter any route takes — Unicode digits ``int()`` refuses or takes, huge
numbers, signs, floats, empty, repeated, percent-encodings that are not
UTF-8, very long — is answered, never with a 5xx; and the values a route
takes are refused with a 4xx saying what was expected."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator

import httpx
import pytest
from server_helpers import uvicorn_thread
from starlette.routing import Route

from audiocore_server import Settings, create_app
from audiocore_server.wire.query_params import QueryError, choice, flag, integer, one

KEY = "test-api-key-0123456789"
HEADERS = {"x-api-key": KEY, "x-user-key": "alice-key-0123456789abcdef"}
PATH_VALUES = {
    "app_name": "audiocore",
    "user_id": "alice",
    "session_id": "s1",
    "memory_id": "mem_0123456789ab",
    "chat_id": "c1",
}
# Every parameter some route reads, and one none does.
NAMES = ["limit", "kind", "query", "detailed", "other"]
# Raw query-string values (percent-encoded where a URL needs it).
VALUES = [
    "%C2%B2",  # "²": str.isdigit() says yes, int() says no
    "%D9%A3",  # "٣", Arabic-Indic three: int() takes it
    "%EF%BC%91%EF%BC%92",  # "１２", fullwidth
    "%F0%9D%9F%99",  # "𝟙", mathematical
    "1_0",
    "+5",
    "%201",
    "-1",
    "0",
    "1.5",
    "1e3",
    "NaN",
    "",
    "9" * 30,
    "9" * 4000,
    "%FF",
    "%C3%28",
    "%ED%A0%80",  # an encoded lone surrogate
    "%00",
    "true",
    "TRUE",
    "maybe",
    "all",
    "x" * 6000,
]


@pytest.fixture
def base(settings: Settings) -> Iterator[str]:
    keyed = dataclasses.replace(settings, api_key=KEY)
    with uvicorn_thread(create_app(keyed), log_level="critical") as (host, port):
        yield f"http://{host}:{port}"


def http_routes(settings: Settings) -> list[tuple[str, str]]:
    """(method, path) of every HTTP route of the app, its path parameters filled."""
    found = []
    for route in create_app(settings).routes:
        if isinstance(route, Route):
            path = route.path.format(**PATH_VALUES)
            found += [(m, path) for m in sorted(route.methods or ()) if m != "HEAD"]
    return found


def test_the_strict_parser_s_rules() -> None:
    q = {"n": ["42"], "two": ["1", "2"], "k": ["turn"], "f": ["On"], "bad": ["²"]}
    assert integer(q, "n", default=1, low=1, high=100) == 42
    assert integer(q, "absent", default=7, low=1, high=100) == 7
    assert choice(q, "k", {"fact": 1, "turn": 2}, "fact") == 2
    assert flag(q, "f") is True and flag(q, "absent") is None
    assert one(q, "absent") is None
    refusals = {
        lambda: integer(q, "bad", default=1, low=1, high=100): (
            "bad: expected a whole number from 1 to 100 in ASCII digits, got '²'"
        ),
        lambda: integer({"n": ["٣"]}, "n", default=1, low=1, high=100): "got '٣'",
        lambda: integer({"n": ["101"]}, "n", default=1, low=1, high=100): "got '101'",
        lambda: integer({"n": ["9" * 5000]}, "n", default=1, low=1, high=100): "'…",
        lambda: one(q, "two"): "two: given 2 times, expected once",
        lambda: one(q, "absent", required=True): "absent: required",
        lambda: choice(q, "bad", {"fact": 1}, "fact"): 'bad: expected one of "fact", got',
        lambda: flag(q, "bad"): "bad: expected true or false, got '²'",
    }
    for call, why in refusals.items():
        with pytest.raises(QueryError) as refused:
            call()
        assert why in str(refused.value)
        assert len(str(refused.value)) < 200  # a huge value is not echoed whole


def test_the_memory_rest_limit_in_other_digits_is_a_400_not_a_500(base: str) -> None:
    with httpx.Client(base_url=base, headers=HEADERS) as http:
        for path in ("/memory", "/apps/audiocore/users/alice/memory"):
            ok = http.get(path, params={"limit": "5", "kind": "all"})
            assert ok.status_code == 200, ok.text
            for raw in ("%C2%B2", "%D9%A3", "%EF%BC%95", "1_0", "+5", "0", "101", "9" * 400):
                refused = http.get(httpx.URL(path, query=f"limit={raw}".encode()))
                assert refused.status_code == 400, (path, raw, refused.text)
                assert refused.json()["detail"].startswith(
                    "limit: expected a whole number from 1 to 100 in ASCII digits, got "
                )
            twice = http.get(httpx.URL(path, query=b"limit=1&limit=2"))
            assert (twice.status_code, twice.json()) == (
                400,
                {"detail": "limit: given 2 times, expected once"},
            )
            kind = http.get(httpx.URL(path, query=b"kind=FACT"))
            assert kind.status_code == 400 and kind.json()["detail"].startswith(
                'kind: expected one of "fact", "turn", "all", got '
            )
        detailed = http.get("/list-apps", params={"detailed": "maybe"})
        assert (detailed.status_code, detailed.json()) == (
            400,
            {"detail": "detailed: expected true or false, got 'maybe'"},
        )
        assert http.get("/list-apps", params={"detailed": "TRUE"}).json()["apps"]


def test_no_route_answers_hostile_parameters_with_a_5xx(base: str, settings: Settings) -> None:
    routes = http_routes(dataclasses.replace(settings, api_key=KEY))
    assert len(routes) >= 12  # every surface's routes are here
    failures = []
    with httpx.Client(base_url=base, headers=HEADERS, timeout=30) as http:
        for (method, path), name in itertools.product(routes, NAMES):
            queries = [f"{name}={value}" for value in VALUES]
            queries += [f"{name}=1&{name}=2", f"{name}", f"{name}=&{name}="]
            for query in queries:
                url = httpx.URL(path, query=query.encode())
                response = http.request(method, url, content=b"{}")
                if response.status_code >= 500:
                    failures.append((method, path, query[:40], response.status_code))
    assert failures == [], failures[:10]
