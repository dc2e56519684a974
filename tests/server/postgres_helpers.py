"""A fresh PostgreSQL database per test, on the server named by
``AUDIOCORE_TEST_POSTGRES_URL`` (``.ci/run`` starts one).

Without the variable the PostgreSQL tests skip; with
``AUDIOCORE_REQUIRE_POSTGRES=1`` (CI) a missing variable or an unreachable
server fails them instead, so a broken setup never passes as skips.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

URL_VARIABLE = "AUDIOCORE_TEST_POSTGRES_URL"
REQUIRE_VARIABLE = "AUDIOCORE_REQUIRE_POSTGRES"


def _required() -> bool:
    return os.environ.get(REQUIRE_VARIABLE, "") not in ("", "0")


def _unavailable(reason: str) -> None:
    if _required():
        pytest.fail(f"{reason} ({REQUIRE_VARIABLE}=1)", pytrace=False)
    pytest.skip(reason)


def with_database(url: str, name: str) -> str:
    """``url`` naming database ``name`` instead."""
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


async def _admin(url: str, statement: str) -> None:
    import asyncpg

    from server.pg_leases import asyncpg_dsn

    conn = await asyncpg.connect(asyncpg_dsn(url), timeout=5)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """The URL (``postgresql+asyncpg://``) of a database created for this
    test alone, dropped after it."""
    url = os.environ.get(URL_VARIABLE)
    if not url:
        _unavailable(f"{URL_VARIABLE} is not set")
        raise AssertionError("unreachable")
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        _unavailable("asyncpg is not installed (pip install -e '.[db]')")
    name = "audiocore_test_" + secrets.token_hex(6)
    try:
        asyncio.run(_admin(url, f'CREATE DATABASE "{name}"'))
    except (OSError, asyncio.TimeoutError) as exc:
        _unavailable(f"PostgreSQL at {URL_VARIABLE} is unreachable: {exc}")
    try:
        yield with_database(url, name)
    finally:
        asyncio.run(_admin(url, f'DROP DATABASE "{name}" WITH (FORCE)'))


async def refuse_connections(url: str) -> None:
    """Make the database of ``url`` unreachable, as a dead server would be:
    nobody may connect to it any more, and every connection is dropped."""
    name = urlsplit(url).path.lstrip("/")
    await _admin(with_database(url, "postgres"), f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    await _admin(
        with_database(url, "postgres"),
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
    )


async def allow_connections(url: str) -> None:
    """Undo ``refuse_connections``: the database of ``url`` is back."""
    name = urlsplit(url).path.lstrip("/")
    await _admin(with_database(url, "postgres"), f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
