"""FastAPI dependencies: the database session, and who is asking (with their role checked)."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from ipaddress import ip_address
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from sqlalchemy.ext.asyncio import AsyncSession

from admin.accounts import session_principal, token_principal
from admin.db import AdminDb
from admin.security import Principal, Role
from admin.settings import AdminSettings

SESSION_COOKIE = "sb_session"
CSRF_HEADER = "X-CSRF-Token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def admin_db(request: Request) -> AdminDb:
    db: AdminDb = request.app.state.db
    return db


def client_address(request: Request, settings: AdminSettings) -> str:
    """The client's address: the one that connected, unless that is a trusted proxy
    (``trusted_proxies``); then the rightmost ``X-Forwarded-For`` entry that is not a
    trusted proxy. Without trusted proxies the header is ignored: anyone can send it."""
    peer = request.client.host if request.client else "unknown"
    proxies = settings.trusted_proxies

    def trusted(address: str) -> bool:
        try:
            ip = ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in proxies)

    if not proxies or not trusted(peer):
        return peer
    hops = [
        hop.strip()
        for value in request.headers.getlist("x-forwarded-for")
        for hop in value.split(",")
    ]
    for hop in reversed(hops):
        try:
            ip_address(hop)
        except ValueError:
            return peer  # the trusted proxy wrote something that is not an address
        if not trusted(hop):
            return hop
    return hops[0] if hops else peer


def admin_settings(request: Request) -> AdminSettings:
    settings: AdminSettings = request.app.state.settings
    return settings


async def db_session(
    db: Annotated[AdminDb, Depends(admin_db)],
) -> AsyncIterator[AsyncSession]:
    """One session a request, committed when the handler returns without an error.

    Used with ``scope="function"``: the commit runs when the handler returns, before the
    response is sent. (With the default scope FastAPI runs it after the response is sent:
    a client could act on a 2xx whose change was not yet in the database, or never got
    there.)"""
    async with db.sessions() as session:
        yield session
        await session.commit()


SessionDep = Annotated[AsyncSession, Depends(db_session, scope="function")]
SettingsDep = Annotated[AdminSettings, Depends(admin_settings)]


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED, detail=detail, headers={"WWW-Authenticate": "Bearer"}
    )


async def principal(request: Request, session: SessionDep, settings: SettingsDep) -> Principal:
    """Who sent the request: a bearer token, or the console's session cookie.

    A change made with the cookie must carry the session's CSRF token in ``X-CSRF-Token``
    (a token sent in a header is not something another site's page can make a browser send).

    The token's last use or the login's new expiry (written at most once a minute) is
    committed here, before the route runs: the request then holds no lock on its own token
    or login while it works (on SQLite, not the database's one write lock), and a route that
    locks rows (the admins, to keep the last one) waits for no other request's token row
    while holding them, so two requests never wait for each other.
    """
    found = await _identify(request, session, settings)
    await session.commit()
    return found


async def _identify(request: Request, session: AsyncSession, settings: AdminSettings) -> Principal:
    auth = request.headers.get("Authorization")
    if auth is not None:
        scheme, _, secret = auth.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise _unauthorized("Authorization: expected 'Bearer <token>'")
        found = await token_principal(session, secret.strip())
        if found is None:
            raise _unauthorized("token unknown or revoked")
        return found
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie is None:
        raise _unauthorized("not logged in: log in, or send an API token")
    found = await session_principal(session, cookie, settings.session_hours)
    if found is None:
        raise _unauthorized("login expired: log in again")
    if request.method not in _SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        assert found.csrf_token is not None
        if not hmac.compare_digest(sent.encode(), found.csrf_token.encode()):
            raise HTTPException(
                status.HTTP_403_FORBIDDEN, detail=f"{CSRF_HEADER} header missing or wrong"
            )
    return found


def require(role: Role) -> Callable[..., Awaitable[Principal]]:
    """A dependency that lets through ``role`` and higher, and answers 403 to the rest."""

    async def check(who: Annotated[Principal, Depends(principal)]) -> Principal:
        if not who.may(role):
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                detail=f"needs the {role} role (you are {who.role})",
            )
        return who

    check.role = role  # type: ignore[attr-defined]  # read by admin/openapi.py
    return check


Viewer = Annotated[Principal, Depends(require("viewer"))]
Editor = Annotated[Principal, Depends(require("editor"))]
Admin = Annotated[Principal, Depends(require("admin"))]
