"""The admin API's database access: one engine, one session per request."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

#: How long an admin write waits for SQLite's one write lock (ms). Each login attempt is a
#: write (``admin.accounts.reserve_attempt``), each synced to disk: a burst of logins on a
#: loaded machine waited past the engine's 5 s and was answered 500 ("database is locked").
BUSY_TIMEOUT_MS = 30_000


def _durable(dbapi_conn: Any, _record: object, _proxy: object) -> None:
    # A commit is on disk, in the WAL, before it returns: NORMAL (the call log's setting)
    # survives a crash of the process but may lose the last commits to a power loss, and a
    # 2xx for a new user, a revoked token or a configuration version must not be lost.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cur.close()


class AdminDb:
    """The call log's database, seen from the admin API.

    On SQLite every connection the admin takes writes with ``synchronous=FULL`` and waits
    up to ``BUSY_TIMEOUT_MS`` for the write lock (set as it leaves the pool, outside any
    transaction, so connections made before this wrapper are covered too). PostgreSQL
    commits are durable on its own defaults (``fsync``, ``synchronous_commit`` on)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.sessions = async_sessionmaker(engine, expire_on_commit=False)
        sync = engine.sync_engine
        if sync.dialect.name == "sqlite" and not event.contains(sync, "checkout", _durable):
            event.listen(sync, "checkout", _durable)


def now() -> datetime:
    """The current UTC time."""
    return datetime.now(UTC)


def aware(at: datetime | None) -> datetime | None:
    """A time read back from the database, as UTC (SQLite returns it naive)."""
    if at is None:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def to_utc(at: datetime | None) -> datetime | None:
    """A time given by a client, in UTC (one without an offset is taken as UTC)."""
    if at is None:
        return None
    return at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
