"""A token's and a login's rights are their owner's rights now: role, disabled, password.

Found by a security test: an admin's token, after that admin was made a viewer, still acted
as admin (and made a new admin); a password reset ended neither the user's logins nor their
tokens. Each check below runs on the next request, with no restart and no wait.
"""

from __future__ import annotations

import httpx
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.db import AdminDb
from admin.models import ApiToken, LoginSession
from tests.admin.conftest import PASSWORD, add_token, bearer

NEW_PASSWORD = "a brand new passphrase"


async def test_a_demoted_users_token_is_demoted_with_them(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    root = await add_token(admin_engine, "root", "admin")
    ada = await add_token(admin_engine, "ada", "admin")
    me = (await client.get("/api/v1/auth/me", headers=bearer(ada))).json()
    assert me["role"] == "admin"

    r = await client.patch("/api/v1/users/ada", json={"role": "viewer"}, headers=bearer(root))
    assert r.status_code == 200, r.text

    me = (await client.get("/api/v1/auth/me", headers=bearer(ada))).json()
    assert me["role"] == "viewer"
    new_admin = {"name": "mallory", "password": "long enough pw", "role": "admin"}
    r = await client.post("/api/v1/users", json=new_admin, headers=bearer(ada))
    assert r.status_code == 403, r.text
    r = await client.post(
        "/api/v1/tokens", json={"name": "again", "role": "admin"}, headers=bearer(ada)
    )
    assert r.status_code == 403, r.text
    # Still a viewer: reading works.
    assert (await client.get("/api/v1/calls", headers=bearer(ada))).status_code == 200

    # Promoted back, the token is again what it was made as (never more).
    r = await client.patch("/api/v1/users/ada", json={"role": "admin"}, headers=bearer(root))
    assert r.status_code == 200
    me = (await client.get("/api/v1/auth/me", headers=bearer(ada))).json()
    assert me["role"] == "admin"


async def test_an_editor_token_of_a_demoted_admin_stays_at_most_viewer(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    root = await add_token(admin_engine, "root", "admin")
    ada = await add_token(admin_engine, "ada", "admin")
    r = await client.post(
        "/api/v1/tokens", json={"name": "deploy", "role": "editor"}, headers=bearer(ada)
    )
    deploy = r.json()["token"]
    await client.patch("/api/v1/users/ada", json={"role": "viewer"}, headers=bearer(root))
    me = (await client.get("/api/v1/auth/me", headers=bearer(deploy))).json()
    assert me["role"] == "viewer"


async def test_a_password_reset_ends_the_users_logins_and_tokens(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    root = await add_token(admin_engine, "root", "admin")
    ada_token = await add_token(admin_engine, "ada", "editor")
    r = await client.post("/api/v1/auth/login", json={"name": "ada", "password": PASSWORD})
    assert r.status_code == 200
    assert (await client.get("/api/v1/auth/me")).json()["via"] == "session"

    r = await client.patch(
        "/api/v1/users/ada", json={"password": NEW_PASSWORD}, headers=bearer(root)
    )
    assert r.status_code == 200, r.text

    assert (await client.get("/api/v1/auth/me")).status_code == 401  # the cookie
    r = await client.get("/api/v1/auth/me", headers=bearer(ada_token))
    assert r.status_code == 401
    async with AdminDb(admin_engine).sessions() as session:
        assert (await session.execute(select(LoginSession))).scalars().all() == []
        tokens = (await session.execute(select(ApiToken))).scalars().all()
    revoked = {t.name: t.revoked_at is not None for t in tokens}
    assert revoked == {"ada-ci": True, "root-ci": False}

    # The old password is refused, the new one logs in.
    r = await client.post("/api/v1/auth/login", json={"name": "ada", "password": PASSWORD})
    assert r.status_code == 401
    r = await client.post("/api/v1/auth/login", json={"name": "ada", "password": NEW_PASSWORD})
    assert r.status_code == 200
    audit = (await client.get("/api/v1/audit", headers=bearer(root))).json()["items"]
    ended = next(e for e in audit if e["action"] == "user.logins_ended")
    assert ended["target"] == "user:ada"
    assert ended["after"] == {"reason": "password reset", "sessions": 1, "tokens": ["ada-ci"]}


async def test_disabling_a_user_ends_their_logins(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    root = await add_token(admin_engine, "root", "admin")
    ada_token = await add_token(admin_engine, "ada", "viewer")
    r = await client.patch("/api/v1/users/ada", json={"disabled": True}, headers=bearer(root))
    assert r.status_code == 200
    assert (await client.get("/api/v1/auth/me", headers=bearer(ada_token))).status_code == 401
    # Enabled again, the old token stays revoked: a new one must be made.
    r = await client.patch("/api/v1/users/ada", json={"disabled": False}, headers=bearer(root))
    assert r.status_code == 200
    assert (await client.get("/api/v1/auth/me", headers=bearer(ada_token))).status_code == 401
