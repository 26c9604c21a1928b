"""The admin API's database access: one engine, one session per request."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker


class AdminDb:
    """The call log's database, seen from the admin API."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.sessions = async_sessionmaker(engine, expire_on_commit=False)


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
