"""Alembic environment: async, for PostgreSQL (psycopg) and SQLite (aiosqlite) alike."""

from __future__ import annotations

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from admin.models import AdminBase
from bot.calllog.models import Base
from bot.calllog.store import MIGRATION_CONNECT_TIMEOUT_S, make_engine
from node.calllog import database_url
from node.settings import load_settings

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name)

target_metadata = [Base.metadata, AdminBase.metadata]
url = config.get_main_option("sqlalchemy.url") or database_url(load_settings())


def run_migrations_offline() -> None:
    """Emit SQL to stdout (``alembic upgrade head --sql``)."""
    context.configure(
        url=url, target_metadata=target_metadata, literal_binds=True, render_as_batch=True
    )
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    # Batch mode: SQLite cannot ALTER most things, Alembic copies the table instead.
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = make_engine(url, connect_timeout_s=MIGRATION_CONNECT_TIMEOUT_S)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_online() -> None:
    """Migrate over an async engine (its own event loop: called from sync code)."""
    asyncio.run(_run_async())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
