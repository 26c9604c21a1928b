"""Session fixtures: the suite's own PostgreSQL and Redis, started when a test first asks."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.services import PostgresServer, RedisServer, run_postgres, run_redis

#: A bot process started by a test gets these only from the test, never from the shell.
SERVICE_VARIABLES = frozenset({"SWITCHBOARD_DATABASE_URL", "SWITCHBOARD_REDIS_URL"})
#: Nor the credentials, TLS files or signing key of a Redis in the shell.
SERVICE_PREFIXES = ("SWITCHBOARD_INTENT_CACHE__",)


@pytest.fixture(scope="session", autouse=True)
def _no_outside_services() -> Iterator[None]:
    """Drop service URLs exported in the shell (bot processes inherit the environment)."""
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.upper() in SERVICE_VARIABLES or key.upper().startswith(SERVICE_PREFIXES):
                mp.delenv(key)
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
