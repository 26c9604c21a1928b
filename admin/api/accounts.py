"""Login and logout, users, API tokens and the audit log."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response, status
from pydantic import AfterValidator, BaseModel, Field, WithJsonSchema
from pydantic_core import PydanticCustomError
from sqlalchemy import func, select

from admin import accounts
from admin.api.pagination import DbText, Page, PageDep
from admin.db import aware
from admin.deps import (
    SESSION_COOKIE,
    Admin,
    SessionDep,
    SettingsDep,
    Viewer,
    client_address,
    principal,
)
from admin.errors import error, error_responses
from admin.models import AuditEntry, User
from admin.security import (
    MAX_USER_NAME,
    MIN_PASSWORD_LENGTH,
    USER_NAME_PATTERN,
    Principal,
    Role,
    rank,
    user_name_problem,
)

router = APIRouter(prefix="/api/v1", tags=["accounts"])


def _user_name(name: str) -> str:
    problem = user_name_problem(name)
    if problem is not None:
        raise PydanticCustomError("user_name", problem)
    return name


_NAME_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_USER_NAME,
    "pattern": USER_NAME_PATTERN,
    "description": "letters, digits and _ . @ -, not dots alone",
}
#: A user name, by the one rule (``admin.security.user_name_problem``: the CLI's too), with
#: its reason in words when refused.
UserName = Annotated[str, AfterValidator(_user_name), WithJsonSchema(_NAME_SCHEMA)]
PathUserName = Annotated[UserName, Path()]


class LoginRequest(BaseModel):
    name: UserName
    password: str = Field(min_length=1, max_length=1024)


class Me(BaseModel):
    """Who is logged in; ``csrf_token`` goes in ``X-CSRF-Token`` with every change."""

    name: str
    role: Role
    via: str
    csrf_token: str | None = None


@router.post(
    "/auth/login",
    response_model=Me,
    summary="Log in to the console",
    responses=error_responses(401, 429),
)
async def login(
    body: LoginRequest,
    request: Request,
    response: Response,
    session: SessionDep,
    settings: SettingsDep,
) -> Me:
    client = client_address(request, settings)
    attempt = await accounts.reserve_attempt(
        session,
        body.name,
        client,
        max_failures=settings.login_max_failures,
        max_client_failures=settings.login_max_failures_per_client,
        window_s=settings.login_window_s,
    )
    if isinstance(attempt, accounts.RateLimited):
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            detail="too many failed logins: try again later",
            headers={"Retry-After": str(attempt.retry_after_s)},
        )
    delay = await accounts.login_delay(
        session,
        body.name,
        attempt,
        max_failures=settings.login_max_failures,
        window_s=settings.login_window_s,
        max_delay_s=settings.login_delay_max_s,
    )
    if delay > 0:
        await session.commit()  # the connection goes back to the pool while this waits
        await asyncio.sleep(delay)
    user = await accounts.authenticate(session, body.name, body.password, client, attempt)
    if user is None:
        # The attempt's row, committed before the password was checked, is the failure.
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, detail="wrong name or password")
    secret, csrf = await accounts.open_session(session, user, settings.session_hours)
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        max_age=int(settings.session_hours * 3600),
        httponly=True,
        secure=settings.cookie_secure,
        samesite="strict",
        path="/",
    )
    return Me(name=user.name, role=user.role, via="session", csrf_token=csrf)


@router.post("/auth/logout", status_code=204, summary="End this console login")
async def logout(
    request: Request,
    response: Response,
    session: SessionDep,
    _who: Annotated[Principal, Depends(principal)],
) -> None:
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie is not None:
        await accounts.close_session(session, cookie)
    response.delete_cookie(SESSION_COOKIE, path="/")


@router.get("/auth/me", response_model=Me, summary="Who is asking")
async def me(who: Viewer) -> Me:
    return Me(name=who.user_name, role=who.role, via=who.via, csrf_token=who.csrf_token)


# -- users (admin only) -----------------------------------------------------------------


class UserCreate(BaseModel):
    name: UserName
    password: str = Field(min_length=MIN_PASSWORD_LENGTH, max_length=1024)
    role: Role


class UserUpdate(BaseModel):
    """Fields left out are not changed."""

    role: Role | None = None
    password: str | None = Field(None, min_length=MIN_PASSWORD_LENGTH, max_length=1024)
    disabled: bool | None = None


class UserRead(BaseModel):
    id: uuid.UUID
    name: str
    role: Role
    created_at: datetime
    disabled: bool


def _user_read(user: User) -> UserRead:
    created = aware(user.created_at)
    assert created is not None
    return UserRead(
        id=user.id,
        name=user.name,
        role=user.role,
        created_at=created,
        disabled=user.disabled_at is not None,
    )


@router.get("/users", response_model=Page[UserRead], summary="List users")
async def list_users(session: SessionDep, _who: Admin, page: PageDep) -> Page[UserRead]:
    total = (await session.execute(select(func.count()).select_from(User))).scalar_one()
    rows = await session.execute(
        select(User).order_by(User.name).limit(page.limit).offset(page.offset)
    )
    return Page(
        items=[_user_read(u) for u in rows.scalars()],
        total=total,
        limit=page.limit,
        offset=page.offset,
    )


@router.post(
    "/users",
    response_model=UserRead,
    status_code=201,
    summary="Add a user",
    responses=error_responses(409),
)
async def create_user(body: UserCreate, session: SessionDep, who: Admin) -> UserRead:
    """409 when the name is taken, by a user created before or at the same moment."""
    try:
        user = await accounts.create_user(
            session, body.name, body.password, body.role, actor=who.actor
        )
    except accounts.AccountError as exc:
        raise error(status.HTTP_409_CONFLICT, str(exc)) from None
    return _user_read(user)


@router.patch(
    "/users/{name}",
    response_model=UserRead,
    summary="Change a user",
    responses=error_responses(404, 409),
)
async def update_user(
    name: PathUserName,
    body: UserUpdate,
    session: SessionDep,
    who: Admin,
) -> UserRead:
    """A new password or a disabled account ends the user's logins and revokes their
    tokens. 409 when the change would leave no enabled admin (the last one cannot be
    demoted or disabled, by herself or anyone)."""
    user = await accounts.find_user(session, name)
    if user is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no user {name!r}")
    try:
        await accounts.update_user(
            session,
            user,
            role=body.role,
            password=body.password,
            disabled=body.disabled,
            actor=who.actor,
        )
    except accounts.LastAdmin as exc:
        raise error(status.HTTP_409_CONFLICT, str(exc)) from None
    return _user_read(user)


# -- API tokens -------------------------------------------------------------------------


class TokenCreate(BaseModel):
    name: DbText = Field(min_length=1, max_length=64)
    #: At most your own role; default: your role.
    role: Role | None = None


class TokenRead(BaseModel):
    id: uuid.UUID
    name: str
    user: str
    #: The role the token was created with.
    role: Role
    #: What it holds now: the lower of ``role`` and its owner's current role.
    effective_role: Role
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool


class TokenCreated(TokenRead):
    """The token itself is in ``token``: shown this once, never again."""

    token: str


def _token_read(token: Any, owner: User) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "user": owner.name,
        "role": token.role,
        "effective_role": accounts.capped_role(token.role, owner.role),
        "created_at": aware(token.created_at),
        "last_used_at": aware(token.last_used_at),
        "revoked": token.revoked_at is not None,
    }


async def _acting_user(session: SessionDep, who: Principal) -> User:
    user = await accounts.find_user(session, who.user_name)
    if user is None:  # pragma: no cover - the principal was just resolved from this user
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, detail="user gone")
    return user


@router.get("/tokens", response_model=Page[TokenRead], summary="List API tokens")
async def list_tokens(session: SessionDep, who: Viewer, page: PageDep) -> Page[TokenRead]:
    """Your own tokens; an admin sees everyone's."""
    owner = None if who.may("admin") else await _acting_user(session, who)
    rows = await accounts.list_tokens(session, owner)
    items = [TokenRead(**_token_read(t, n)) for t, n in rows]
    return Page(
        items=items[page.offset : page.offset + page.limit],
        total=len(items),
        limit=page.limit,
        offset=page.offset,
    )


@router.post("/tokens", response_model=TokenCreated, status_code=201, summary="New API token")
async def create_token(body: TokenCreate, session: SessionDep, who: Viewer) -> TokenCreated:
    role = body.role or who.role
    if rank(role) > rank(who.role):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, detail=f"role: a token cannot hold more than {who.role}"
        )
    user = await _acting_user(session, who)
    token, secret = await accounts.create_token(session, user, body.name, role, actor=who.actor)
    return TokenCreated(**_token_read(token, user), token=secret)


@router.delete(
    "/tokens/{token_id}",
    status_code=204,
    summary="Revoke an API token",
    responses=error_responses(404),
)
async def revoke_token(token_id: uuid.UUID, session: SessionDep, who: Viewer) -> None:
    owner = None if who.may("admin") else await _acting_user(session, who)
    if await accounts.revoke_token(session, token_id, owner, actor=who.actor) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no such token")


# -- audit log --------------------------------------------------------------------------


class AuditRead(BaseModel):
    id: uuid.UUID
    at: datetime
    actor: str
    action: str
    target: str
    before: Any
    after: Any


@router.get("/audit", response_model=Page[AuditRead], summary="The audit log, newest first")
async def audit_log(session: SessionDep, _who: Admin, page: PageDep) -> Page[AuditRead]:
    total = (await session.execute(select(func.count()).select_from(AuditEntry))).scalar_one()
    rows = await session.execute(
        select(AuditEntry).order_by(AuditEntry.at.desc()).limit(page.limit).offset(page.offset)
    )
    items = [
        AuditRead(
            id=e.id,
            at=aware(e.at),
            actor=e.actor,
            action=e.action,
            target=e.target,
            before=e.before,
            after=e.after,
        )
        for e in rows.scalars()
    ]
    return Page(items=items, total=total, limit=page.limit, offset=page.offset)
