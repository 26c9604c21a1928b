"""Every write is in the database when its 2xx arrives, on the app served by real uvicorn.

Found by a security test: right after ``DELETE /tokens/{id}`` answered 204 the row still had
``revoked_at = NULL`` (6 of 6), and the revoked token was accepted by the next request 10
times in 20; a logged-out cookie was accepted once in 10. The session's commit ran in a
dependency's exit, which FastAPI runs after the response is sent. Here the database is read
right after each response, through a connection of its own, with the server's event loop
held (the read is synchronous): a commit still to come cannot slip in before the check.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.db import AdminDb
from admin.server import AdminServer
from admin.settings import AdminSettings
from bot.calllog.migrate import upgrade_async
from bot.calllog.store import make_engine
from bot.config.store import seed
from tests.admin.conftest import PASSWORD, add_token, add_user, bearer
from tests.admin.test_config import PROFILE

ROUNDS = 5


@pytest.fixture
def reader(admin_db_url: str) -> Iterator[Engine]:
    """A synchronous engine on the same database: reading with it blocks the event loop."""
    url = admin_db_url.replace("+aiosqlite", "")
    engine = create_engine(url)
    yield engine
    engine.dispose()


def _one(engine: Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(text(sql), params).scalar()


@pytest.fixture
async def served(admin_engine: AsyncEngine) -> AsyncIterator[httpx.AsyncClient]:
    await seed(admin_engine, PROFILE, "profile:test.toml")
    app = create_app(admin_engine, AdminSettings(cookie_secure=False))
    server = AdminServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        # What is checked is each answer and the rows, not how fast: 21 requests at once
        # (logins hash passwords) outlast httpx's 5 s default on a loaded machine.
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{server.port}", timeout=60.0
        ) as client:
            yield client
    finally:
        await server.stop()


async def test_each_2xx_is_already_committed(
    served: httpx.AsyncClient, admin_engine: AsyncEngine, reader: Engine
) -> None:
    root = await add_token(admin_engine, "root", "admin")
    await add_user(admin_engine, "bob", "editor")
    admin = bearer(root)
    for round_ in range(ROUNDS):
        # A token revoked: the row says so, and the token is refused at once.
        r = await served.post("/api/v1/tokens", json={"name": f"t{round_}"}, headers=admin)
        assert r.status_code == 201, r.text
        made = r.json()
        r = await served.delete(f"/api/v1/tokens/{made['id']}", headers=admin)
        assert r.status_code == 204
        revoked = _one(
            reader,
            "SELECT count(*) FROM admin_api_tokens WHERE name = :name AND revoked_at IS NOT NULL",
            name=f"t{round_}",
        )
        assert revoked == 1, f"round {round_}: revoke answered before its commit"
        r = await served.get("/api/v1/auth/me", headers=bearer(made["token"]))
        assert r.status_code == 401, f"round {round_}: a revoked token was accepted"

        # A user changed: the role is in the row.
        role = "viewer" if round_ % 2 == 0 else "editor"
        r = await served.patch("/api/v1/users/bob", json={"role": role}, headers=admin)
        assert r.status_code == 200, r.text
        stored = _one(reader, "SELECT role FROM admin_users WHERE name = 'bob'")
        assert stored == role, f"round {round_}: user change answered before its commit"

        # A configuration change: its version is the newest in the table.
        r = await served.patch(
            "/api/v1/config/settings", json={"greeting": f"Hello {round_}."}, headers=admin
        )
        assert r.status_code == 200, r.text
        newest = _one(reader, "SELECT max(version) FROM bot_config_versions")
        assert newest == r.json()["config_version"], f"round {round_}: config not committed"

        # A logout: the login's row is gone, and the cookie is refused at once.
        r = await served.post("/api/v1/auth/login", json={"name": "bob", "password": PASSWORD})
        assert r.status_code == 200, r.text
        csrf = r.json()["csrf_token"]
        assert _one(reader, "SELECT count(*) FROM admin_sessions") == 1
        r = await served.post("/api/v1/auth/logout", headers={"X-CSRF-Token": csrf})
        assert r.status_code == 204
        left = _one(reader, "SELECT count(*) FROM admin_sessions")
        assert left == 0, f"round {round_}: logout answered before its commit"


async def test_requests_of_one_login_racing_its_logout_get_200_or_401(
    served: httpx.AsyncClient, admin_engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    """Each request of a login extends it. Requests with one cookie sent together with that
    cookie's logout are answered 200 (before it) or 401 (after it), and nothing fails in
    the server: the extension of a login deleted meanwhile was a ``StaleDataError``."""
    await add_user(admin_engine, "ada", "admin")
    for round_ in range(ROUNDS):
        r = await served.post("/api/v1/auth/login", json={"name": "ada", "password": PASSWORD})
        assert r.status_code == 200, r.text
        csrf = r.json()["csrf_token"]
        caplog.clear()
        with caplog.at_level(logging.ERROR):
            answers = await asyncio.gather(
                *(served.get("/api/v1/auth/me") for _ in range(10)),
                served.post("/api/v1/auth/logout", headers={"X-CSRF-Token": csrf}),
                *(served.get("/api/v1/calls") for _ in range(10)),
            )
            await asyncio.sleep(0.2)  # a failure after the response is logged by then
        codes = [a.status_code for a in answers]
        assert codes[10] == 204, codes
        assert set(codes[:10] + codes[11:]) <= {200, 401}, (round_, codes)
        errors = [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.ERROR]
        assert errors == [], (round_, errors)
        assert (await served.get("/api/v1/auth/me")).status_code == 401


async def test_admin_writes_on_sqlite_are_synced_before_the_commit_returns(
    tmp_path: Path,
) -> None:
    """Found by a durability review: SQLite ran ``synchronous=NORMAL`` (the call log's
    setting), under which a 2xx's commit survives the process dying but not a power loss.
    Every connection the admin takes is ``FULL``, one the engine made before the app too."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'sync.db'}"
    await upgrade_async(url)
    engine = make_engine(url)
    try:
        async with engine.connect() as early:  # pooled before the app wraps the engine
            assert (await early.execute(text("PRAGMA synchronous"))).scalar_one() == 1
        app = create_app(engine, AdminSettings())
        async with app.state.db.sessions() as session:
            assert (await session.execute(text("PRAGMA synchronous"))).scalar_one() == 2  # FULL
        await add_user(engine, "ada", "admin")  # and writes through the app's database
        async with AdminDb(engine).sessions() as session:
            assert (await session.execute(text("PRAGMA synchronous"))).scalar_one() == 2
    finally:
        await engine.dispose()
