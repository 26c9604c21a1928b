"""The login limit: whose address counts, and who it stops.

Found by a security test: the limit trusted ``X-Forwarded-For`` from any client on
loopback (each new header value a fresh budget), and five wrong passwords at a known name
locked its real user out for five minutes: anyone who knew a name could keep an admin out.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from admin import accounts
from admin.app import create_app
from admin.db import AdminDb
from admin.models import LoginFailure
from admin.server import AdminServer
from admin.settings import AdminSettings
from tests.admin.conftest import PASSWORD, add_user

LOGIN = "/api/v1/auth/login"


@contextlib.asynccontextmanager
async def _served(engine: AsyncEngine, settings: AdminSettings) -> AsyncIterator[str]:
    server = AdminServer(create_app(engine, settings), "127.0.0.1", 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.stop()


async def _clients(engine: AsyncEngine) -> dict[str, int]:
    async with AdminDb(engine).sessions() as session:
        rows = await session.execute(
            select(LoginFailure.client, func.count()).group_by(LoginFailure.client)
        )
        return {client: n for client, n in rows.all()}


async def test_x_forwarded_for_is_ignored_unless_the_proxy_is_trusted(
    admin_engine: AsyncEngine,
) -> None:
    settings = AdminSettings(login_max_failures=3, login_max_failures_per_client=6)
    async with (
        _served(admin_engine, settings) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        codes = []
        for i in range(8):  # a new name and a new header value each time
            r = await client.post(
                LOGIN,
                json={"name": f"user{i}", "password": "wrong password"},
                headers={"X-Forwarded-For": f"198.51.100.{i}"},
            )
            codes.append(r.status_code)
    assert codes == [401] * 6 + [429] * 2, codes
    assert await _clients(admin_engine) == {"127.0.0.1": 6}


async def test_a_trusted_proxy_names_the_client(admin_engine: AsyncEngine) -> None:
    settings = AdminSettings.model_validate(
        {
            "login_max_failures": 2,
            "login_max_failures_per_client": 50,
            "trusted_proxies": ["127.0.0.0/8"],
        }
    )
    async with (
        _served(admin_engine, settings) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        # What the client wrote itself is to the left of what the proxy appended.
        spoofed = {"X-Forwarded-For": "10.9.9.9, 203.0.113.5"}
        for _ in range(2):
            wrong = {"name": "ada", "password": "wrong password"}
            r = await client.post(LOGIN, json=wrong, headers=spoofed)
            assert r.status_code == 401
        r = await client.post(LOGIN, json={"name": "ada", "password": "wrong"}, headers=spoofed)
        assert r.status_code == 429
        # Another client behind the same proxy is another budget.
        other = {"X-Forwarded-For": "203.0.113.6, 127.0.0.1"}
        r = await client.post(LOGIN, json={"name": "ada", "password": "wrong"}, headers=other)
        assert r.status_code == 401
    assert await _clients(admin_engine) == {"203.0.113.5": 2, "203.0.113.6": 1}


def _from(engine: AsyncEngine, address: str, settings: AdminSettings) -> httpx.AsyncClient:
    app = create_app(engine, settings)
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="https://testserver")


async def test_a_stranger_cannot_lock_a_user_out(admin_engine: AsyncEngine) -> None:
    await add_user(admin_engine, "ada", "admin")
    settings = AdminSettings(
        login_max_failures=3, login_max_failures_per_client=20, login_delay_max_s=1.0
    )
    # Strangers at three addresses fail at ada's name until each is refused.
    for address in ("192.0.2.1", "192.0.2.2", "192.0.2.3"):
        async with _from(admin_engine, address, settings) as stranger:
            codes = [
                (await stranger.post(LOGIN, json={"name": "ada", "password": "guess"})).status_code
                for _ in range(5)
            ]
            assert codes == [401, 401, 401, 429, 429], (address, codes)
            # Even the right password is refused to that address now.
            r = await stranger.post(LOGIN, json={"name": "ada", "password": PASSWORD})
            assert r.status_code == 429
    # Ada, from her own address, gets in (after the name's delay, at most a second here).
    async with _from(admin_engine, "10.0.0.7", settings) as ada:
        r = await ada.post(LOGIN, json={"name": "ada", "password": PASSWORD})
        assert r.status_code == 200, r.text
        assert r.json()["role"] == "admin"


class _PasswordChecks:
    """``verify_password`` counted, each check held until more than ``limit`` are under way
    (then every one goes on at once) or a second has passed: the attempts overlap as much
    as the limit lets them, whatever the machine's speed. (How many go on is not fixed:
    attempts at once may see each other's rows and all be refused; never more than the
    limit go on.)"""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
        self.count = 0
        self._limit = limit
        self._lock = threading.Lock()
        self._go = threading.Event()
        self._verify = accounts.verify_password
        monkeypatch.setattr(accounts, "verify_password", self._check)

    def _check(self, stored: str | None, password: str) -> bool:
        with self._lock:
            self.count += 1
            if self.count > self._limit:
                self._go.set()
        if not self._go.wait(1.0):
            self._go.set()
        return self._verify(stored, password)


async def _failure_rows(engine: AsyncEngine) -> int:
    async with AdminDb(engine).sessions() as session:
        rows = await session.execute(select(func.count()).select_from(LoginFailure))
        return int(rows.scalar_one())


async def test_thirty_wrong_logins_at_once_check_at_most_the_limit(
    admin_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a concurrency test: 30 logins at once from one address at one name had 19
    passwords checked on SQLite and 8 on PostgreSQL, against a limit of 5 (each counted
    the failures before any of them was written)."""
    await add_user(admin_engine, "ada", "admin")
    settings = AdminSettings(
        login_max_failures=5, login_max_failures_per_client=20, login_delay_max_s=0.0
    )
    checks = _PasswordChecks(monkeypatch, limit=5)
    async with _from(admin_engine, "192.0.2.9", settings) as client:
        wrong = {"name": "ada", "password": "wrong password"}
        answers = await asyncio.gather(*(client.post(LOGIN, json=wrong) for _ in range(30)))
    codes = Counter(r.status_code for r in answers)
    assert checks.count <= 5, (checks.count, codes)
    assert codes == {401: checks.count, 429: 30 - checks.count}, codes
    # Each check left its failure; a refused attempt left nothing.
    assert await _failure_rows(admin_engine) == checks.count


async def test_sixty_wrong_logins_at_once_over_sixty_names_check_at_most_the_client_limit(
    admin_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the same test: 60 at once from one address, each at a name of its own, had
    34 passwords checked against the address's limit of 20."""
    settings = AdminSettings(
        login_max_failures=5, login_max_failures_per_client=20, login_delay_max_s=0.0
    )
    checks = _PasswordChecks(monkeypatch, limit=20)
    async with _from(admin_engine, "192.0.2.10", settings) as client:
        answers = await asyncio.gather(
            *(
                client.post(LOGIN, json={"name": f"user{i}", "password": "wrong password"})
                for i in range(60)
            )
        )
    codes = Counter(r.status_code for r in answers)
    assert checks.count <= 20, (checks.count, codes)
    assert codes == {401: checks.count, 429: 60 - checks.count}, codes
    assert await _failure_rows(admin_engine) == checks.count


async def test_after_a_burst_the_limit_counts_as_before(
    admin_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempts one after the other: the limit's number of failures, then 429 with
    ``Retry-After``; the right password from another address still gets in."""
    await add_user(admin_engine, "ada", "admin")
    settings = AdminSettings(
        login_max_failures=3, login_max_failures_per_client=20, login_delay_max_s=0.0
    )
    async with _from(admin_engine, "192.0.2.11", settings) as client:
        codes = [
            (await client.post(LOGIN, json={"name": "ada", "password": "wrong!"})).status_code
            for _ in range(5)
        ]
        refused = await client.post(LOGIN, json={"name": "ada", "password": PASSWORD})
    assert codes == [401, 401, 401, 429, 429]
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert await _failure_rows(admin_engine) == 3
    async with _from(admin_engine, "10.0.0.7", settings) as ada:
        r = await ada.post(LOGIN, json={"name": "ada", "password": PASSWORD})
        assert r.status_code == 200, r.text
    # A success clears its own attempt: nothing is left of it.
    assert await _failure_rows(admin_engine) == 3
