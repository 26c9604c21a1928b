"""The admin tables: users, their sessions and API tokens, login failures, the audit log (the
bot configuration's versions are ``bot.config.models``, on the same metadata).

They live in the call log's database (one database, one Alembic history in ``migrations/``),
with the same constraint naming, so migrations are the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, Uuid
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from bot.calllog.models import UtcDateTime
from bot.config.models import ConfigBase


class AdminBase(DeclarativeBase):
    """Declarative base of the admin tables. One metadata with the configuration's tables
    (``bot.config.models``): one schema, one Alembic history."""

    metadata = ConfigBase.metadata


class User(AdminBase):
    """Someone who may log in to the console: ``admin``, ``editor`` or ``viewer``."""

    __tablename__ = "admin_users"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    #: argon2id hash (``argon2-cffi``): never the password.
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    #: A disabled user can neither log in nor use their tokens.
    disabled_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class ApiToken(AdminBase):
    """A bearer token for automation; only its SHA-256 is kept (shown once when created)."""

    __tablename__ = "admin_api_tokens"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("admin_users.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(64))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    #: At most the owner's role.
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class LoginSession(AdminBase):
    """A console login: the cookie holds a random id, the table its SHA-256."""

    __tablename__ = "admin_sessions"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    #: Sent back in the ``X-CSRF-Token`` header of every change made with the cookie.
    csrf_token: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("admin_users.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)


class LoginFailure(AdminBase):
    """A failed login, kept for the rate limit (in the database: shared by every node)."""

    __tablename__ = "admin_login_failures"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_name: Mapped[str] = mapped_column(String(64), index=True)
    client: Mapped[str] = mapped_column(String(64), index=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)


class AuditEntry(AdminBase):
    """One change: who made it, when, and the thing before and after."""

    __tablename__ = "admin_audit_log"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    #: ``user:<name>``, ``token:<name> (<owner>)`` or ``cli``.
    actor: Mapped[str] = mapped_column(String(160))
    #: ``user.create``, ``token.revoke``, ``intent.update``...
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(255))
    before: Mapped[Any] = mapped_column(JSON, nullable=True)
    after: Mapped[Any] = mapped_column(JSON, nullable=True)
