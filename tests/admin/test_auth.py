"""Who may do what: logins, CSRF, tokens, roles, the login rate limit, the audit trail."""

from __future__ import annotations

import httpx
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.db import AdminDb
from admin.models import ApiToken, User
from tests.admin.conftest import PASSWORD, add_token, add_user, bearer, error_text


async def test_no_credentials_is_401(client: httpx.AsyncClient) -> None:
    for path in ("/api/v1/calls", "/api/v1/calls/live", "/api/v1/summary", "/api/v1/users"):
        r = await client.get(path)
        assert r.status_code == 401, path
        assert r.headers["www-authenticate"] == "Bearer"
    r = await client.get("/api/v1/calls", headers=bearer("sbt_not-a-token"))
    assert r.status_code == 401
    assert error_text(r) == "token unknown or revoked"


async def test_login_sets_a_secure_cookie_and_changes_need_the_csrf_token(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    await add_user(admin_engine, "ada", "admin")
    r = await client.post("/api/v1/auth/login", json={"name": "ada", "password": "wrong pw"})
    assert r.status_code == 401
    r = await client.post("/api/v1/auth/login", json={"name": "ada", "password": PASSWORD})
    assert r.status_code == 200, r.text
    csrf = r.json()["csrf_token"]
    cookie = r.headers["set-cookie"].lower()
    for flag in ("httponly", "secure", "samesite=strict", "path=/"):
        assert flag in cookie
    me = (await client.get("/api/v1/auth/me")).json()
    assert (me["name"], me["role"], me["via"]) == ("ada", "admin", "session")

    new_user = {"name": "bob", "password": "another long one", "role": "viewer"}
    r = await client.post("/api/v1/users", json=new_user)
    assert r.status_code == 403
    assert "X-CSRF-Token" in error_text(r)
    r = await client.post("/api/v1/users", json=new_user, headers={"X-CSRF-Token": "guess"})
    assert r.status_code == 403
    r = await client.post("/api/v1/users", json=new_user, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 201, r.text
    assert r.json()["role"] == "viewer"

    r = await client.post("/api/v1/auth/logout", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 204
    assert (await client.get("/api/v1/auth/me")).status_code == 401


async def test_a_viewer_cannot_write_and_cannot_mint_a_stronger_token(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    token = await add_token(admin_engine, "vic", "viewer")
    assert (await client.get("/api/v1/calls", headers=bearer(token))).status_code == 200
    r = await client.post(
        "/api/v1/users",
        json={"name": "eve", "password": "long enough pw", "role": "admin"},
        headers=bearer(token),
    )
    assert r.status_code == 403
    assert error_text(r) == "needs the admin role (you are viewer)"
    r = await client.post(
        "/api/v1/tokens", json={"name": "escalate", "role": "admin"}, headers=bearer(token)
    )
    assert r.status_code == 403
    assert (await client.get("/api/v1/audit", headers=bearer(token))).status_code == 403


async def test_a_token_is_shown_once_stored_hashed_and_stops_working_when_revoked(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    admin = await add_token(admin_engine, "root", "admin")
    r = await client.post(
        "/api/v1/tokens", json={"name": "deploy", "role": "editor"}, headers=bearer(admin)
    )
    assert r.status_code == 201, r.text
    created = r.json()
    secret = created["token"]
    assert secret.startswith("sbt_") and created["role"] == "editor"
    listed = (await client.get("/api/v1/tokens", headers=bearer(admin))).json()["items"]
    assert {t["name"] for t in listed} == {"deploy", "root-ci"}
    assert all("token" not in t for t in listed)
    async with AdminDb(admin_engine).sessions() as session:
        hashes = (await session.execute(select(ApiToken.token_hash))).scalars().all()
        pw_hashes = (await session.execute(select(User.password_hash))).scalars().all()
    assert secret not in hashes and len(hashes) == 2
    assert all(h.startswith("$argon2id$") for h in pw_hashes)

    assert (await client.get("/api/v1/auth/me", headers=bearer(secret))).status_code == 200
    r = await client.delete(f"/api/v1/tokens/{created['id']}", headers=bearer(admin))
    assert r.status_code == 204
    r = await client.get("/api/v1/auth/me", headers=bearer(secret))
    assert r.status_code == 401

    audit = (await client.get("/api/v1/audit", headers=bearer(admin))).json()["items"]
    revoke = next(e for e in audit if e["action"] == "token.revoke")
    assert revoke["actor"] == "token:root-ci (root)"
    assert (revoke["before"]["revoked"], revoke["after"]["revoked"]) == (False, True)
    assert any(e["action"] == "token.create" and e["after"]["name"] == "deploy" for e in audit)


async def test_failed_logins_are_rate_limited_per_name(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    await add_user(admin_engine, "ada", "admin")
    for _ in range(3):  # admin_settings: 3 failures a minute
        r = await client.post("/api/v1/auth/login", json={"name": "ada", "password": "nope"})
        assert r.status_code == 401
    r = await client.post("/api/v1/auth/login", json={"name": "ada", "password": PASSWORD})
    assert r.status_code == 429
    assert 1 <= int(r.headers["retry-after"]) <= 61


async def test_validation_errors_name_the_field_and_reason(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    admin = await add_token(admin_engine, "root", "admin")
    r = await client.post(
        "/api/v1/users",
        json={"name": "bob", "password": "short", "role": "owner"},
        headers=bearer(admin),
    )
    assert r.status_code == 422
    errors = {tuple(e["loc"]): e["msg"] for e in r.json()["detail"]}
    assert "at least 12 characters" in errors[("body", "password")]
    assert "'viewer', 'editor' or 'admin'" in errors[("body", "role")]
    r = await client.get("/api/v1/calls?limit=0", headers=bearer(admin))
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["query", "limit"]


async def test_a_non_admin_cannot_see_or_revoke_someone_elses_token(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    admin = await add_token(admin_engine, "root", "admin")
    viewer = await add_token(admin_engine, "vic", "viewer")
    everyone = (await client.get("/api/v1/tokens", headers=bearer(admin))).json()["items"]
    roots = next(t for t in everyone if t["user"] == "root")
    mine = (await client.get("/api/v1/tokens", headers=bearer(viewer))).json()["items"]
    assert [t["user"] for t in mine] == ["vic"]
    r = await client.delete(f"/api/v1/tokens/{roots['id']}", headers=bearer(viewer))
    assert r.status_code == 404
    assert (await client.get("/api/v1/auth/me", headers=bearer(admin))).status_code == 200
