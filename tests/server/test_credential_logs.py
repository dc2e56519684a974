"""No credential in a log line or a metric, however a client spells it.

A real ``python -m server`` (uvicorn's own access and error logs, ours at
debug) with an API key; every form a credential can take on every surface
that reads one — query names and values percent-encoded, the key where a
token goes, headers, subprotocol entries, refused and accepted — and then
every line of the process's output and ``/metrics`` are scanned for the
secrets, whole or percent-encoded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import websockets
from server_helpers import server_process

from audiocore_server.gate import redaction

KEY = "key-for-the-log-test-0123456789"
SECRET = "token-secret-for-the-log-test-0123456789"
DB_PASSWORD = "db-password-for-the-log-test"


def _encoded(text: str) -> str:
    """Every character percent-encoded, as a client may."""
    return "".join(f"%{b:02X}" for b in text.encode())


def _query_forms(secret: str) -> list[str]:
    return [
        f"token={secret}",
        f"tok%65n={secret}",
        f"%74oken={secret}",
        f"%74%6F%6B%65%6E={quote(secret)}",
        f"token={_encoded(secret)}",
        f"a=1&token={secret}&b=2",
        f"token={secret}&token={secret}",
        f"TOKEN={secret}",  # not read as a credential, and still a secret
        f"x={_encoded(secret)}",
        f"token={secret}#frag",
    ]


async def _try_sockets(base: str, forms: list[str], subprotocols: list[str]) -> None:
    ws_base = base.replace("http://", "ws://")
    for path in ("/ws", "/live", "/run_live"):
        for form in forms:
            with contextlib.suppress(Exception):
                async with websockets.connect(f"{ws_base}{path}?{form}", open_timeout=30) as ws:
                    await ws.close()
        for entry in subprotocols:
            with contextlib.suppress(Exception):
                async with websockets.connect(
                    f"{ws_base}{path}", subprotocols=["audiocore", entry], open_timeout=30
                ) as ws:
                    await ws.close()


def test_no_form_of_a_credential_reaches_a_log_line_or_a_metric(tmp_path: Path) -> None:
    log = tmp_path / "audiocore_server.log"
    env = {"AUDIOCORE_API_KEY": KEY, "AUDIOCORE_TOKEN_SECRETS": SECRET}
    serving = server_process(tmp_path / "data", log, "--log-level", "debug", env=env)
    with serving as (base, _), httpx.Client(base_url=base, timeout=30) as http:
        minted = http.post("/tokens", json={"owner": "alice"}, headers={"x-api-key": KEY})
        assert minted.status_code == 200, minted.text
        token = minted.json()["token"]
        secrets = [KEY, token]
        forms = [form for secret in secrets for form in _query_forms(secret)]
        entries = [f"audiocore.token.{token}", f"audiocore.token.{KEY}"]
        asyncio.run(_try_sockets(base, forms, entries))
        for form in forms:
            for path in ("/apps/audiocore/users/alice/sessions", "/memory", "/metrics"):
                http.get(f"{path}?{form}")
        for secret in secrets:
            for headers in (
                {"authorization": f"Bearer {secret}"},
                {"authorization": f"bearer   {secret}"},
                {"x-api-key": secret},
                {"x-api-key": secret + "x"},  # a wrong key that holds the right one
            ):
                http.get("/apps/audiocore/users/alice/sessions", headers=headers)
                http.post("/api/chat", headers=headers, content=b"{")
        metrics = http.get("/metrics", headers={"x-api-key": KEY}).text
    written = log.read_text(errors="replace")
    assert "GET /apps/audiocore/users/alice/sessions?" in written  # the access log was on
    assert "WebSocket /ws?" in written
    for secret in (KEY, token, SECRET, token.split(".")[1]):
        for form in {secret, quote(secret, safe=""), _encoded(secret)}:
            assert form not in written, f"{form[:12]}… in the log"
            assert form not in metrics, f"{form[:12]}… in /metrics"


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ('"GET /ws?tok%65n=SECRETVALUE1 HTTP/1.1" 403', '"GET /ws?tok%65n=*** HTTP/1.1" 403'),
        ("/ws?a=1&%74oken=SECRETVALUE1&b=2", "/ws?a=1&%74oken=***&b=2"),
        ("/ws?token", "/ws?token"),  # a name without a value: nothing to hide
        ("/ws?q=%ZZ&token=v", "/ws?q=%ZZ&token=***"),  # a bad escape does not stop it
        ("Authorization: Bearer abc.def", "Authorization: Bearer ***"),
        ("offered audiocore.token.abc,def", "offered audiocore.token.***,def"),
        ("no credential here: /ws?x=1", "no credential here: /ws?x=1"),
        ("", ""),
    ],
)
def test_scrub_reads_a_query_as_the_server_does(line: str, kept: str) -> None:
    assert redaction.scrub(line) == kept


def test_a_protected_secret_is_hidden_in_any_logger_whole_or_encoded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    redaction.install()
    redaction.protect(DB_PASSWORD)
    caplog.set_level(logging.DEBUG)
    logging.getLogger("audiocore_server.any.module").warning("connecting with %s", DB_PASSWORD)
    logging.getLogger("elsewhere").error("url %s", quote(DB_PASSWORD + "/", safe=""))
    text = caplog.text
    assert DB_PASSWORD not in text and quote(DB_PASSWORD, safe="") not in text
    assert "connecting with ***" in text
