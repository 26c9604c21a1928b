"""Users through the API: the last admin, names taken at the same moment, names that cannot be
part of an address, and a token's role beside the role it holds now (SQLite and PostgreSQL).

Found by an accounts review: the last admin could demote herself (200, no admin left); two
``POST /users`` of one name at once were a 500 (``IntegrityError``) on SQLite in 2 to 4 of 10
tries; users named ``.`` or ``..`` were accepted but the console could not reach them (the
browser resolves the path); the Tokens page showed a token's stored role only.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from admin import accounts
from admin.db import AdminDb
from admin.models import User
from tests.admin.conftest import PASSWORD, add_token, bearer, error_text


async def _enabled_admins(engine: AsyncEngine) -> list[str]:
    async with AdminDb(engine).sessions() as session:
        rows = await session.execute(
            select(User.name).where(User.role == "admin", User.disabled_at.is_(None))
        )
        return sorted(rows.scalars())


async def test_the_last_admin_cannot_demote_or_disable_herself(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    ada = bearer(await add_token(admin_engine, "ada", "admin"))
    for change in ({"role": "editor"}, {"role": "viewer"}, {"disabled": True}):
        r = await client.patch("/api/v1/users/ada", json=change, headers=ada)
        assert r.status_code == 409, (change, r.text)
        assert (
            error_text(r) == "user 'ada' is the last enabled admin: make another user admin first"
        )
    assert await _enabled_admins(admin_engine) == ["ada"]
    # A second admin: then either may step down, and the one left may not.
    r = await client.post(
        "/api/v1/users", json={"name": "bob", "password": PASSWORD, "role": "admin"}, headers=ada
    )
    assert r.status_code == 201, r.text
    r = await client.patch("/api/v1/users/ada", json={"role": "editor"}, headers=ada)
    assert r.status_code == 200, r.text
    async with AdminDb(admin_engine).sessions() as session:
        bob = await accounts.find_user(session, "bob")
        assert bob is not None
        _, secret = await accounts.create_token(session, bob, "bob-ci", "admin", actor="test")
        await session.commit()
    r = await client.patch("/api/v1/users/bob", json={"disabled": True}, headers=bearer(secret))
    assert r.status_code == 409, r.text
    # Changes that keep an admin are not refused: a new password, enabling, the same role.
    r = await client.patch(
        "/api/v1/users/bob", json={"role": "admin", "disabled": False}, headers=bearer(secret)
    )
    assert r.status_code == 200, r.text
    assert await _enabled_admins(admin_engine) == ["bob"]


async def _admin_again(engine: AsyncEngine, name: str) -> dict[str, str]:
    """``name`` an enabled admin again, with a new token (a disabled user's were revoked)."""
    async with AdminDb(engine).sessions() as session:
        user = await accounts.find_user(session, name)
        assert user is not None
        user.role, user.disabled_at = "admin", None
        _, secret = await accounts.create_token(session, user, f"{name}-again", "admin", actor="t")
        await session.commit()
    return bearer(secret)


async def test_two_admins_demoting_each_other_at_once_leave_one(
    client: httpx.AsyncClient, admin_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both requests are let in and have found their user before either changes anything
    (each waits for the other there): only the check itself can keep an admin."""
    await add_token(admin_engine, "ada", "admin")
    await add_token(admin_engine, "bob", "admin")
    update_user = accounts.update_user
    arrived: list[str] = []
    both = asyncio.Event()

    async def together(session: Any, user: User, **change: Any) -> User:
        arrived.append(user.name)
        if len(arrived) % 2 == 0:
            both.set()
        await asyncio.wait_for(both.wait(), 5)
        return await update_user(session, user, **change)

    monkeypatch.setattr(accounts, "update_user", together)
    changes: list[dict[str, Any]] = [{"role": "viewer"}, {"disabled": True}, {"role": "editor"}]
    for change in changes * 2:
        ada = await _admin_again(admin_engine, "ada")
        bob = await _admin_again(admin_engine, "bob")
        both.clear()
        answers = await asyncio.gather(
            client.patch("/api/v1/users/bob", json=change, headers=ada),
            client.patch("/api/v1/users/ada", json=change, headers=bob),
        )
        codes = sorted(r.status_code for r in answers)
        assert codes == [200, 409], (change, [r.text for r in answers])
        assert len(await _enabled_admins(admin_engine)) == 1, change


async def test_one_name_created_twice_at_once_is_one_user_and_one_409(
    client: httpx.AsyncClient, admin_engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both requests look the name up before either writes it (each look-up waits for the
    other's), so that the database's unique index is what refuses the second."""
    ada = bearer(await add_token(admin_engine, "ada", "admin"))
    find_user = accounts.find_user
    looked: list[str] = []
    both = asyncio.Event()

    async def together(session: Any, name: str) -> User | None:
        found = await find_user(session, name)
        looked.append(name)
        if len(looked) % 2 == 0:
            both.set()
        await asyncio.wait_for(both.wait(), 5)
        return found

    monkeypatch.setattr(accounts, "find_user", together)
    for i in range(3):
        both.clear()
        body = {"name": f"carol{i}", "password": PASSWORD, "role": "viewer"}
        answers = await asyncio.gather(
            client.post("/api/v1/users", json=body, headers=ada),
            client.post("/api/v1/users", json=body, headers=ada),
        )
        assert Counter(r.status_code for r in answers) == {201: 1, 409: 1}, [
            r.text for r in answers
        ]
        refused = next(r for r in answers if r.status_code == 409)
        assert error_text(refused) == f"name: user 'carol{i}' exists"
    async with AdminDb(admin_engine).sessions() as session:
        count = await session.execute(
            select(func.count()).select_from(User).where(User.name.like("carol%"))
        )
        assert count.scalar_one() == 3


#: Names that cannot be one segment of a URL path as they are: dots alone are resolved
#: away, the rest must be escaped (and some proxies and browsers undo the escape).
BAD_NAMES = (".", "..", "...", "a/b", "a%2eb", "a?b", "a#b", "a b", "a\tb", "a\x00b", "é", "")


async def test_names_that_cannot_travel_in_a_path_are_refused_with_the_reason(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    ada = bearer(await add_token(admin_engine, "ada", "admin"))
    for name in BAD_NAMES:
        r = await client.post(
            "/api/v1/users",
            json={"name": name, "password": PASSWORD, "role": "viewer"},
            headers=ada,
        )
        assert r.status_code == 422, (name, r.text)
        (problem,) = r.json()["detail"]
        assert problem["loc"] == ["body", "name"], (name, problem)
        assert problem["msg"].startswith("name: "), (name, problem)
        assert accounts.user_name_problem(name) == problem["msg"]
    # The same rule at the login and in the path.
    r = await client.post("/api/v1/auth/login", json={"name": "..", "password": PASSWORD})
    assert r.status_code == 422
    r = await client.patch("/api/v1/users/%2E%2E", json={"role": "viewer"}, headers=ada)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["path", "name"]
    # Dots inside a name are fine.
    r = await client.post(
        "/api/v1/users", json={"name": "a.b", "password": PASSWORD, "role": "viewer"}, headers=ada
    )
    assert r.status_code == 201, r.text
    r = await client.patch("/api/v1/users/a.b", json={"role": "editor"}, headers=ada)
    assert r.status_code == 200, r.text


async def test_a_token_shows_its_role_and_the_role_it_holds_now(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    ada = bearer(await add_token(admin_engine, "ada", "admin"))
    await add_token(admin_engine, "dave", "admin")
    r = await client.patch("/api/v1/users/dave", json={"role": "viewer"}, headers=ada)
    assert r.status_code == 200, r.text
    tokens = {
        t["name"]: t for t in (await client.get("/api/v1/tokens", headers=ada)).json()["items"]
    }
    assert (tokens["dave-ci"]["role"], tokens["dave-ci"]["effective_role"]) == ("admin", "viewer")
    assert (tokens["ada-ci"]["role"], tokens["ada-ci"]["effective_role"]) == ("admin", "admin")
