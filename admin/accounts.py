"""Users, console logins, API tokens and the login rate limit, on the database."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from admin.audit import record
from admin.db import aware, now
from admin.models import ApiToken, LoginFailure, LoginSession, User
from admin.security import (
    MIN_PASSWORD_LENGTH,
    Principal,
    Role,
    digest,
    hash_password,
    new_secret,
    rank,
    user_name_problem,
    verify_password,
)

#: How often a login's expiry and a token's last use are written, at most.
_TOUCH_EVERY = timedelta(seconds=60)


def capped_role(granted: str, owner: str) -> Role:
    """The lower of a token's role and its owner's current role."""
    return cast(Role, granted if rank(granted) <= rank(owner) else owner)


class AccountError(ValueError):
    """A request about accounts that cannot be carried out; the message says why."""


def user_view(user: User) -> dict[str, object]:
    """What the audit log keeps of a user (never the hash)."""
    return {
        "name": user.name,
        "role": user.role,
        "disabled": user.disabled_at is not None,
    }


async def create_user(
    session: AsyncSession, name: str, password: str, role: Role, *, actor: str
) -> User:
    """Add a user (audited). Refuses a name the login would not accept, a taken name and
    a short password."""
    problem = user_name_problem(name)
    if problem is not None:
        raise AccountError(problem)
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError(f"password: at least {MIN_PASSWORD_LENGTH} characters")
    taken = AccountError(f"name: user {name!r} exists")
    if await find_user(session, name) is not None:
        raise taken
    user = User(
        id=uuid.uuid4(),
        name=name,
        password_hash=hash_password(password),
        role=role,
        created_at=now(),
    )
    session.add(user)
    try:
        # Written now, not at the commit: a name taken at the same moment (which the look-up
        # above could not see) is the unique index's refusal, answered as a taken name.
        await session.flush()
    except IntegrityError:
        await session.rollback()
        raise taken from None
    record(session, actor, "user.create", f"user:{name}", after=user_view(user))
    return user


class LastAdmin(AccountError):
    """The change would leave no enabled admin."""


async def _enabled_admins(session: AsyncSession, *, lock: bool = False) -> list[uuid.UUID]:
    query = (
        select(User.id).where(User.role == "admin", User.disabled_at.is_(None)).order_by(User.id)
    )
    if lock:
        query = query.with_for_update()
    return list((await session.execute(query)).scalars())


async def update_user(
    session: AsyncSession,
    user: User,
    *,
    role: Role | None = None,
    password: str | None = None,
    disabled: bool | None = None,
    actor: str,
) -> User:
    """Change ``user``'s role, password or state (audited; a new password or a disabled
    account ends their logins and tokens). ``LastAdmin`` (nothing written) when the change
    would leave no enabled admin.

    Race-free on both databases: on PostgreSQL the enabled admins' rows are locked first
    (``FOR UPDATE``, in id order), so two admins demoting each other at once are one after
    the other, and the second sees the first's change; on SQLite the change is written
    first, which takes the database's one write lock, and the admins are counted after it,
    under that lock."""
    name = user.name
    before = user_view(user)
    loses_admin = before["role"] == "admin" and before["disabled"] is False
    loses_admin = loses_admin and ((role is not None and role != "admin") or (disabled is True))
    if loses_admin:
        await _enabled_admins(session, lock=True)
    if role is not None:
        user.role = role
    if password is not None:
        user.password_hash = hash_password(password)
    if disabled is not None and disabled != (user.disabled_at is not None):
        user.disabled_at = now() if disabled else None
    if loses_admin:
        await session.flush()
        if not await _enabled_admins(session):
            await session.rollback()
            raise LastAdmin(
                f"user {name!r} is the last enabled admin: make another user admin first"
            )
    after = user_view(user)
    if password is not None:
        after["password"] = "changed"
    record(session, actor, "user.update", f"user:{name}", before=before, after=after)
    if password is not None:
        await end_logins(session, user, actor=actor, reason="password reset")
    elif disabled:
        await end_logins(session, user, actor=actor, reason="disabled")
    return user


async def find_user(session: AsyncSession, name: str) -> User | None:
    return (await session.execute(select(User).where(User.name == name))).scalar_one_or_none()


async def count_users(session: AsyncSession) -> int:
    return (await session.execute(select(func.count()).select_from(User))).scalar_one()


@dataclass(frozen=True)
class RateLimited:
    """Too many failed logins: try again after ``retry_after_s``."""

    retry_after_s: int


async def _failures(session: AsyncSession, since: datetime, *where: Any) -> tuple[int, Any]:
    count, oldest = (
        await session.execute(
            select(func.count(), func.min(LoginFailure.at))
            .where(*where)
            .where(LoginFailure.at >= since)
        )
    ).one()
    return int(count), oldest


async def reserve_attempt(
    session: AsyncSession,
    name: str,
    client: str,
    *,
    max_failures: int,
    max_client_failures: int,
    window_s: int,
) -> uuid.UUID | RateLimited:
    """Count a login attempt as a failure before its password is checked; the attempt's
    row id, or ``RateLimited`` (and no row) when this client address is past a limit: at
    this name, or at all.

    The row is committed first, then the failures are counted, the attempt's own included:
    an attempt goes on only if that count is within the limit. Of attempts at once, each
    sees its own row and every row committed before its count, so the k-th to go on saw
    at least k rows, and no more than the limit go on: however many arrive at once, on any
    number of API servers sharing the database, no lock held. A refused attempt's row is
    deleted (it checked no password); ``authenticate`` clears the row of a success.

    The name alone never blocks: a stranger who fails at a user's name from their address
    is stopped there, and the user logging in from elsewhere is not (``login_delay``
    slows a name that many addresses fail at instead).
    """
    attempt = LoginFailure(id=uuid.uuid4(), user_name=name[:64], client=client[:64], at=now())
    session.add(attempt)
    await session.commit()
    window = timedelta(seconds=window_s)
    since = now() - window
    for where, limit in (
        ((LoginFailure.user_name == name[:64], LoginFailure.client == client[:64]), max_failures),
        ((LoginFailure.client == client[:64],), max_client_failures),
    ):
        count, oldest = await _failures(session, since, *where)
        if count > limit:
            await session.execute(delete(LoginFailure).where(LoginFailure.id == attempt.id))
            await session.commit()
            oldest_at = aware(oldest)
            assert oldest_at is not None
            wait = (oldest_at + window - now()).total_seconds()
            return RateLimited(retry_after_s=max(1, int(wait) + 1))
    return attempt.id


async def login_delay(
    session: AsyncSession,
    name: str,
    attempt: uuid.UUID,
    *,
    max_failures: int,
    window_s: int,
    max_delay_s: float,
) -> float:
    """Seconds to wait before answering ``attempt`` at ``name``: none until the name has
    ``max_failures`` failures in the window from anywhere (attempts under way count as
    failures; ``attempt`` itself does not), then 1 s, doubling with each further failure,
    up to ``max_delay_s``. Slows guessing spread over many addresses, and never refuses
    the user who knows the password."""
    since = now() - timedelta(seconds=window_s)
    count, _ = await _failures(
        session, since, LoginFailure.user_name == name[:64], LoginFailure.id != attempt
    )
    if count < max_failures:
        return 0.0
    return float(min(max_delay_s, 2.0 ** min(count - max_failures, 16)))


async def authenticate(
    session: AsyncSession, name: str, password: str, client: str, attempt: uuid.UUID
) -> User | None:
    """The user if the password is right. ``attempt`` (``reserve_attempt``'s row) stays as
    the failure otherwise; a success deletes it with this address's other failures at this
    name."""
    user = await find_user(session, name)
    await session.commit()  # no connection held while the password is checked
    # argon2 takes tens of ms of CPU: off the event loop, where a node's calls run.
    ok = await asyncio.to_thread(verify_password, user.password_hash if user else None, password)
    if not ok or user is None or user.disabled_at is not None:
        return None
    await session.execute(
        delete(LoginFailure)
        .where(LoginFailure.user_name == name[:64])
        .where(LoginFailure.client == client[:64])
    )
    return user


async def open_session(session: AsyncSession, user: User, hours: float) -> tuple[str, str]:
    """A new console login for ``user``: (cookie secret, CSRF token)."""
    secret, csrf = new_secret(), new_secret()
    at = now()
    session.add(
        LoginSession(
            token_hash=digest(secret),
            csrf_token=csrf,
            user_id=user.id,
            created_at=at,
            expires_at=at + timedelta(hours=hours),
        )
    )
    # Expired logins of everyone are dropped on the way.
    await session.execute(delete(LoginSession).where(LoginSession.expires_at < at))
    return secret, csrf


async def close_session(session: AsyncSession, secret: str) -> None:
    await session.execute(delete(LoginSession).where(LoginSession.token_hash == digest(secret)))


async def session_principal(session: AsyncSession, secret: str, hours: float) -> Principal | None:
    """The user behind a session cookie, if the login is current; it is extended."""
    row = (
        await session.execute(
            select(LoginSession, User)
            .join(User, User.id == LoginSession.user_id)
            .where(LoginSession.token_hash == digest(secret))
        )
    ).one_or_none()
    if row is None:
        return None
    login, user = row
    expires = aware(login.expires_at)
    assert expires is not None
    at = now()
    if expires < at or user.disabled_at is not None:
        return None
    # Extended at most once a minute, by a statement that matches nothing (rather than
    # failing) when the login was ended meanwhile by a request of the same cookie.
    renewed = at + timedelta(hours=hours)
    if expires < renewed - _TOUCH_EVERY:
        await session.execute(
            update(LoginSession)
            .where(LoginSession.id == login.id)
            .values(expires_at=renewed)
            .execution_options(synchronize_session=False)
        )
    return Principal(user.name, user.role, "session", csrf_token=login.csrf_token)  # type: ignore[arg-type]


async def token_principal(session: AsyncSession, secret: str) -> Principal | None:
    """The token's principal, if it exists, is not revoked and its user is enabled."""
    row = (
        await session.execute(
            select(ApiToken, User)
            .join(User, User.id == ApiToken.user_id)
            .where(ApiToken.token_hash == digest(secret))
        )
    ).one_or_none()
    if row is None:
        return None
    token, user = row
    if token.revoked_at is not None or user.disabled_at is not None:
        return None
    at = now()
    used = aware(token.last_used_at)
    if used is None or used < at - _TOUCH_EVERY:
        await session.execute(
            update(ApiToken)
            .where(ApiToken.id == token.id)
            .values(last_used_at=at)
            .execution_options(synchronize_session=False)
        )
    # A token holds at most its owner's role as it is now: a demoted owner's token is demoted
    # with them on the very next request.
    return Principal(user.name, capped_role(token.role, user.role), "token", token_name=token.name)


async def end_logins(session: AsyncSession, user: User, *, actor: str, reason: str) -> int:
    """End every console login and revoke every API token of ``user`` (a password reset,
    a disabled account): what was granted with the old credentials stops working at once.
    Returns how many were ended; the revocations are audited as one entry."""
    gone = await session.execute(delete(LoginSession).where(LoginSession.user_id == user.id))
    ended = int(cast("CursorResult[Any]", gone).rowcount or 0)
    tokens = (
        (
            await session.execute(
                select(ApiToken)
                .where(ApiToken.user_id == user.id)
                .where(ApiToken.revoked_at.is_(None))
            )
        )
        .scalars()
        .all()
    )
    at = now()
    for token in tokens:
        token.revoked_at = at
    if ended or tokens:
        record(
            session,
            actor,
            "user.logins_ended",
            f"user:{user.name}",
            after={"reason": reason, "sessions": ended, "tokens": [t.name for t in tokens]},
        )
    return ended + len(tokens)


async def create_token(
    session: AsyncSession, user: User, name: str, role: Role, *, actor: str
) -> tuple[ApiToken, str]:
    """A new API token for ``user``: the row, and the secret (shown once, never stored)."""
    secret = "sbt_" + new_secret()
    token = ApiToken(
        id=uuid.uuid4(),
        user_id=user.id,
        name=name,
        token_hash=digest(secret),
        role=role,
        created_at=now(),
    )
    session.add(token)
    record(
        session,
        actor,
        "token.create",
        f"token:{token.id}",
        after={"name": name, "user": user.name, "role": role},
    )
    return token, secret


async def list_tokens(session: AsyncSession, user: User | None) -> list[tuple[ApiToken, User]]:
    """Tokens (of ``user``, or everyone's), newest first, with their owner."""
    query = select(ApiToken, User).join(User, User.id == ApiToken.user_id)
    if user is not None:
        query = query.where(ApiToken.user_id == user.id)
    rows = await session.execute(query.order_by(ApiToken.created_at.desc()))
    return [(t, u) for t, u in rows.all()]


async def revoke_token(
    session: AsyncSession, token_id: uuid.UUID, owner: User | None, *, actor: str
) -> ApiToken | None:
    """Revoke a token (``owner``'s only, unless None); None when there is no such token."""
    query = select(ApiToken).where(ApiToken.id == token_id)
    if owner is not None:
        query = query.where(ApiToken.user_id == owner.id)
    token = (await session.execute(query)).scalar_one_or_none()
    if token is None:
        return None
    if token.revoked_at is None:
        token.revoked_at = now()
        record(
            session,
            actor,
            "token.revoke",
            f"token:{token.id}",
            before={"name": token.name, "revoked": False},
            after={"name": token.name, "revoked": True},
        )
    return token
