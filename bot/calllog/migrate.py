"""Schema versions: Alembic migrations in ``migrations/`` are the only way the schema changes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect
from sqlalchemy.ext.asyncio import AsyncEngine

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = ROOT / "migrations"

SchemaStatus = Literal["current", "empty", "behind", "ahead", "unversioned"]


class SchemaError(RuntimeError):
    """The database's schema is not the one this code writes; the message says what to run."""


@dataclass(frozen=True)
class SchemaState:
    """Where a database stands against this code's migrations."""

    status: SchemaStatus
    current: str | None
    head: str

    def message(self) -> str:
        """What is wrong and what to run, for an operator."""
        if self.status == "empty":
            return "the call-log database has no tables: run `switchboard db upgrade`"
        if self.status == "behind":
            return (
                f"the call-log database is at revision {self.current}, this code needs "
                f"{self.head}: run `switchboard db upgrade`"
            )
        if self.status == "ahead":
            return (
                f"the call-log database is at revision {self.current}, which this code does "
                f"not know (newer code migrated it?): upgrade the bot, or run "
                f"`switchboard db downgrade {self.head}` with the newer code"
            )
        if self.status == "unversioned":
            return (
                "the call-log database has tables but no Alembic version: point "
                "SWITCHBOARD_DATABASE_URL at an empty database or one made by `switchboard db`"
            )
        return f"the call-log database is at revision {self.current}"


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` that runs the project's migrations."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["configure_logging"] = False  # leave the caller's logging alone
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Apply migrations up to ``revision`` (blocking; runs its own event loop)."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Undo migrations down to ``revision`` (``base``: drop everything)."""
    command.downgrade(alembic_config(url), revision)


def head_revision() -> str:
    """The newest revision in ``migrations/``."""
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    if head is None:  # pragma: no cover - the project always has a migration
        raise SchemaError("no migrations found in " + str(MIGRATIONS))
    return head


def _inspect(conn: Connection) -> tuple[str | None, list[str]]:
    current = MigrationContext.configure(conn).get_current_revision()
    tables = [t for t in inspect(conn).get_table_names() if t != "alembic_version"]
    return current, tables


async def schema_state(engine: AsyncEngine) -> SchemaState:
    """Compare the database's revision with this code's head (raises if unreachable)."""
    async with engine.connect() as conn:
        current, tables = await conn.run_sync(_inspect)
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    head = head_revision()
    status: SchemaStatus
    if current is None:
        status = "unversioned" if tables else "empty"
    elif current == head:
        status = "current"
    elif current in {rev.revision for rev in script.walk_revisions()}:
        status = "behind"
    else:
        status = "ahead"
    return SchemaState(status=status, current=current, head=head)


async def current_revision(engine: AsyncEngine) -> str | None:
    """The database's revision (None: never migrated)."""
    return (await schema_state(engine)).current


async def upgrade_async(url: str, revision: str = "head") -> None:
    """``upgrade`` from inside a running event loop."""
    await asyncio.to_thread(upgrade, url, revision)
