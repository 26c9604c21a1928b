"""Session fixtures: the suite's own PostgreSQL and Redis, started when a test first asks;
passwords hashed at argon2's lowest cost in the test process; and the ``e2e`` marker on
every test that runs a whole bot node."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.services import PostgresServer, RedisServer, run_postgres, run_redis

#: A bot process started by a test gets these only from the test, never from the shell.
SERVICE_VARIABLES = frozenset({"SWITCHBOARD_DATABASE_URL", "SWITCHBOARD_REDIS_URL"})
#: Nor the credentials, TLS files or signing key of a Redis in the shell.
SERVICE_PREFIXES = ("SWITCHBOARD_INTENT_CACHE__",)

TESTS = Path(__file__).resolve().parent
#: Tests outside ``tests/e2e`` that start a whole bot node (``switchboard run``) and call it,
#: over SIP or WebRTC: with ``tests/e2e`` they are the ``e2e`` group (``-m e2e``).
E2E_ELSEWHERE = frozenset(
    {
        "admin/test_console_call.py",
        "admin/test_console_try.py",
        "admin/test_node.py",
        "admin/test_webrtc.py",
        "calllog/test_call_row.py",
        "testkit/test_v2v_wire.py::test_one_call_one_cache_turn_on_the_wire",
    }
)


def _module(item: pytest.Item) -> str:
    """The test's module, relative to ``tests/`` (``admin/test_node.py``)."""
    path = item.path.resolve()
    return path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else str(path)


def _is_e2e(item: pytest.Item) -> bool:
    where = _module(item)
    return (
        where.startswith("e2e/")
        or where in E2E_ELSEWHERE
        or f"{where}::{item.name}" in E2E_ELSEWHERE
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the whole-node tests ``e2e`` (``-m e2e`` runs them, ``-m "not e2e"`` the rest)."""
    for item in items:
        if _is_e2e(item):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session", autouse=True)
def _no_outside_services() -> Iterator[None]:
    """Drop service URLs exported in the shell (bot processes inherit the environment)."""
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.upper() in SERVICE_VARIABLES or key.upper().startswith(SERVICE_PREFIXES):
                mp.delenv(key)
        yield


#: argon2id at its lowest cost (one pass over 8 KiB): what the test process hashes and
#: verifies passwords with.
CHEAP_ARGON2 = {"time_cost": 1, "memory_cost": 8, "parallelism": 1}


@pytest.fixture(scope="session", autouse=True)
def _cheap_password_hashes() -> Iterator[None]:
    """Passwords hashed and checked at argon2id's lowest cost in the test process.

    At the product's cost (3 passes over 64 MiB, 4 lanes) each hash and each login's check
    takes 0.1-0.7 s of CPU on 2 shared cores, and the admin, console and API fuzz tests make
    hundreds: they test who gets in, not the hash's cost. The processes the tests start (the
    CLI, nodes) hash at the product's cost, and ``tests/admin/test_cli.py`` checks that
    what the CLI stores carries it. The unknown user's stand-in hash is made at the same low
    cost, so that a wrong name still costs one check, as a wrong password does.
    """
    from argon2 import PasswordHasher  # noqa: PLC0415

    from admin import security  # noqa: PLC0415

    cheap = PasswordHasher(**CHEAP_ARGON2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(security, "_hasher", cheap)
        mp.setattr(security, "_DUMMY_HASH", cheap.hash("not anybody's password"))
        yield


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The suite's PostgreSQL (superuser ``postgres``, trust), on a free loopback port."""
    with run_postgres() as server:
        yield server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The suite's Redis, on a free loopback port. Tests that kill Redis start their own."""
    with run_redis() as server:
        yield server
