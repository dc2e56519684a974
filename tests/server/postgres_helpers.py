"""A fresh PostgreSQL database per test: on the server named by
``AUDIOCORE_TEST_POSTGRES_URL`` when it is set, else on a throwaway cluster
that the run starts itself from PostgreSQL's installed server binaries
(Debian package ``postgresql``) and deletes at its end.

Without either the PostgreSQL tests skip, saying which package is missing;
with ``AUDIOCORE_REQUIRE_POSTGRES=1`` they fail instead, so a broken setup
never passes as skips.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import pwd
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

URL_VARIABLE = "AUDIOCORE_TEST_POSTGRES_URL"
REQUIRE_VARIABLE = "AUDIOCORE_REQUIRE_POSTGRES"
# initdb and postgres refuse to run as root: as root (CI), the cluster runs
# as the system user the Debian package creates.
SYSTEM_USER = "postgres"


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

    from audiocore_server.storage.pg_leases import asyncpg_dsn

    conn = await asyncpg.connect(asyncpg_dsn(url), timeout=5)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def installed_pg_ctl() -> str | None:
    """pg_ctl of the newest PostgreSQL installed: Debian keeps the server's
    binaries off PATH, in /usr/lib/postgresql/<major>/bin."""
    debian = glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")
    if debian:
        return max(debian, key=lambda path: [int(n) for n in re.findall(r"\d+", path)])
    return shutil.which("pg_ctl")


def _throwaway_cluster(pg_ctl: str) -> Iterator[str]:
    """A cluster of its own in a temporary directory, started with
    pytest-postgresql's executor (which initialises, starts, waits for and
    stops it) on 127.0.0.1 at a free port, durability off (test data);
    yields a superuser's URL, password-checked over TCP as hosts connect."""
    import port_for
    from pytest_postgresql.executors import PostgreSQLExecutor

    directory = Path(tempfile.mkdtemp(prefix="audiocore-postgres-"))
    try:
        if os.geteuid() == 0:
            # The executor runs pg_ctl (initdb, start, stop) by its path, so
            # a wrapper runs each as the system user, in a directory it owns.
            user = pwd.getpwnam(SYSTEM_USER)
            os.chown(directory, user.pw_uid, user.pw_gid)
            wrapper = directory / "pg_ctl"
            wrapper.write_text(f'#!/bin/sh\nexec runuser -u {SYSTEM_USER} -- "{pg_ctl}" "$@"\n')
            wrapper.chmod(0o755)
            pg_ctl = str(wrapper)
        executor = PostgreSQLExecutor(
            executable=pg_ctl,
            host="127.0.0.1",
            port=port_for.select_random(),
            datadir=str(directory / "data"),
            unixsocketdir=str(directory),
            logfile=str(directory / "log"),
            startparams="-w",
            dbname="postgres",
            user="audiocore",
            # No password at initdb: its password file would be root's, which
            # the system user cannot read. One is set once the server is up.
            password=None,
            postgres_options=(
                "-c listen_addresses=127.0.0.1 -c synchronous_commit=off -c full_page_writes=off"
            ),
        )
        with executor:
            password = secrets.token_hex(16)
            url = f"postgresql+asyncpg://audiocore:{password}@127.0.0.1:{executor.port}/postgres"
            asyncio.run(_admin(url, f"ALTER ROLE audiocore PASSWORD '{password}'"))
            # Trust only on the cluster's own socket directory (its owner's);
            # TCP asks for the password (scram-sha-256).
            (directory / "data" / "pg_hba.conf").write_text(
                "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
            )
            asyncio.run(_admin(url, "SELECT pg_reload_conf()"))
            yield url
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def server_url(unavailable: Callable[[str], object]) -> Iterator[str]:
    """The URL of a PostgreSQL server on which databases may be created:
    ``AUDIOCORE_TEST_POSTGRES_URL``, else a throwaway cluster, stopped as
    the block ends. ``unavailable(reason)`` (it raises) when neither can be
    had."""
    url = os.environ.get(URL_VARIABLE)
    if url:
        yield url
        return
    pg_ctl = installed_pg_ctl()
    if pg_ctl is None:
        unavailable(
            "PostgreSQL's server is not installed (Debian package postgresql) "
            f"and {URL_VARIABLE} is not set"
        )
        raise AssertionError("unreachable")
    try:
        import pytest_postgresql  # noqa: F401
    except ImportError:
        unavailable("pytest-postgresql is not installed (pip install --group test)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            unavailable(f"running as root, and there is no {SYSTEM_USER} user to run PostgreSQL")
    yield from _throwaway_cluster(pg_ctl)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """``server_url`` for the session; skipped (or failed) without one."""
    with server_url(_unavailable) as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """The URL (``postgresql+asyncpg://``) of a database created for this
    test alone, dropped after it."""
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        _unavailable("asyncpg is not installed (pip install --group db)")
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(new_database(postgres_server, "audiocore_test_"))
        except (OSError, asyncio.TimeoutError) as exc:
            where = urlsplit(postgres_server)
            _unavailable(f"PostgreSQL at {where.hostname}:{where.port} is unreachable: {exc}")
        yield url


@contextlib.contextmanager
def new_database(server_url: str, prefix: str) -> Iterator[str]:
    """The URL of a new database (``prefix`` and a random tail) on the
    server at ``server_url``, dropped when the block ends."""
    name = prefix + secrets.token_hex(6)
    asyncio.run(_admin(server_url, f'CREATE DATABASE "{name}"'))
    try:
        yield with_database(server_url, name)
    finally:
        asyncio.run(_admin(server_url, f'DROP DATABASE "{name}" WITH (FORCE)'))


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
