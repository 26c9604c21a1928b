"""The configuration's tables: its versions, and what each node did with them.

They live in the call log's database with the admin tables (one metadata: the admin's base
shares it, so one Alembic history covers them), with the call log's constraint naming.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Integer, MetaData, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from bot.calllog.models import NAMING, UtcDateTime


class ConfigBase(DeclarativeBase):
    """Declarative base of the configuration tables (and, sharing its metadata, the admin's)."""

    metadata = MetaData(naming_convention=NAMING)


def now() -> datetime:
    """The current UTC time."""
    return datetime.now(UTC)


def aware(at: datetime | None) -> datetime | None:
    """A time read back from the database, as UTC (SQLite returns it naive)."""
    if at is None:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


class ConfigVersion(ConfigBase):
    """One version of the bot's configuration: the whole profile, validated, as JSON.

    Versions only grow; the newest is the one nodes run. A call records the version it ran
    with in ``calls.config_version``.
    """

    __tablename__ = "bot_config_versions"

    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    created_by: Mapped[str] = mapped_column(String(160))
    #: What changed, in a few words (``intent.update opening_hours``).
    comment: Mapped[str] = mapped_column(Text)
    profile: Mapped[dict[str, Any]] = mapped_column(JSON)


class NodeConfigState(ConfigBase):
    """What one node did with the configuration versions: the one it runs, and the last
    one it could not apply (and why), written by the node, read by the console.

    A version a node refused stays written (it is valid as a profile: only the node's own
    check, such as embedding its examples in time, failed); the node keeps running the last
    version it applied.
    """

    __tablename__ = "bot_config_nodes"

    #: The node's name (``host:sip_port`` by default), as in ``calls.node``.
    node: Mapped[str] = mapped_column(String(255), primary_key=True)
    applied_version: Mapped[int | None] = mapped_column(Integer)
    applied_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    failed_version: Mapped[int | None] = mapped_column(Integer)
    #: Why the node could not apply ``failed_version`` (the error, shortened).
    failed_reason: Mapped[str | None] = mapped_column(Text)
    failed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
