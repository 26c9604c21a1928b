"""The login limit: whose address counts, and who it stops.

Found by a security test: the limit trusted ``X-Forwarded-For`` from any client on
loopback (each new header value a fresh budget), and five wrong passwords at a known name
locked its real user out for five minutes: anyone who knew a name could keep an admin out.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

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
