"""Migrations up and down from an empty database, and what a stale schema does to start-up."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog import CallLog, SchemaError, store
from bot.calllog import migrate as migrate_mod
from bot.calllog.migrate import (
    MIGRATIONS,
    downgrade,
    head_revision,
    schema_state,
    upgrade_async,
)
from bot.calllog.store import make_engine
from tests.calllog.helpers import open_log

TABLES = {
    "calls",
    "turns",
    "call_events",
    "admin_users",
    "admin_api_tokens",
    "admin_sessions",
    "admin_login_failures",
    "admin_audit_log",
    "bot_config_versions",
    "bot_config_nodes",
}


async def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: inspect(c).get_table_names())
    finally:
        await engine.dispose()
    return set(names) - {"alembic_version"}


async def test_up_down_up_from_empty(empty_url: str) -> None:
    engine = make_engine(empty_url)
    try:
        assert (await schema_state(engine)).status == "empty"
        await upgrade_async(empty_url)
        state = await schema_state(engine)
        assert (state.status, state.current) == ("current", head_revision())
        assert await _tables(empty_url) == TABLES
        await migrate_mod.asyncio.to_thread(downgrade, empty_url, "base")
        assert await _tables(empty_url) == set()
        assert (await schema_state(engine)).status == "empty"
        await upgrade_async(empty_url)
        assert await _tables(empty_url) == TABLES
    finally:
        await engine.dispose()


async def test_a_database_behind_is_refused_with_what_to_run(
    empty_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await upgrade_async(empty_url)
    # This code, one migration later.
    newer = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS, newer, ignore=shutil.ignore_patterns("__pycache__"))
    head = head_revision()
    (newer / "versions" / "9999_later.py").write_text(
        f'revision = "9999"\ndown_revision = "{head}"\nbranch_labels = None\n'
        "depends_on = None\ndef upgrade() -> None: ...\ndef downgrade() -> None: ...\n"
    )
    monkeypatch.setattr(migrate_mod, "MIGRATIONS", newer)
    with pytest.raises(SchemaError, match=rf"revision {head}.*needs 9999.*switchboard db upgrade"):
        await open_log(empty_url, tmp_path / "spool")


async def test_an_unknown_revision_is_refused(empty_url: str, tmp_path: Path) -> None:
    await upgrade_async(empty_url)
    engine = make_engine(empty_url)
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE alembic_version SET version_num = 'ffff'"))
    await engine.dispose()
    with pytest.raises(SchemaError, match="not know"):
        await open_log(empty_url, tmp_path / "spool")


async def test_an_empty_database_is_created_only_when_asked(empty_url: str, tmp_path: Path) -> None:
    # `switchboard run` asks for it on the embedded SQLite default, not on PostgreSQL.
    with pytest.raises(SchemaError, match="switchboard db upgrade"):
        await open_log(empty_url, tmp_path / "spool")
    log = await CallLog.open(
        empty_url, spool_dir=tmp_path / "spool", node="n", config_version="0", create_if_empty=True
    )
    await log.close()
    assert await _tables(empty_url) == TABLES


def test_switchboard_run_refuses_a_stale_schema(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    url = f"sqlite+aiosqlite:///{db}"
    migrate_mod.upgrade(url)
    import sqlite3  # noqa: PLC0415

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'ffff'")
    proc = subprocess.run(
        [sys.executable, "-m", "node.cli", "run", "--port", "5999"],
        env={"SWITCHBOARD_DATABASE_URL": url, "SWITCHBOARD_DATA_DIR": str(tmp_path), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "switchboard: the call-log database is at revision ffff" in proc.stderr


def test_db_commands(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    env = {"SWITCHBOARD_DATABASE_URL": url, "PATH": ""}

    def db(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "node.cli", "db", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    current = db("current")
    assert current.returncode == 1 and "(empty)" in current.stdout, current
    up = db("upgrade")
    assert up.returncode == 0 and "(current)" in up.stdout, up
    down = db("downgrade", "base")
    assert down.returncode == 0 and "(empty)" in down.stdout, down
    assert db("upgrade").returncode == 0
    purge = db("purge", "--days", "7")
    assert purge.returncode == 0 and "blanked 0 turn(s)" in purge.stdout, purge


async def test_a_migration_waits_for_a_slow_connection_longer_than_a_request_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Beside every test group at once, a PostgreSQL connection took over the product's
    # 3 s and a migration failed; a migration is a one-off step, and waits longer.
    asked: list[float] = []

    def recording(url: str, *, connect_timeout_s: float = store.CONNECT_TIMEOUT_S) -> AsyncEngine:
        asked.append(connect_timeout_s)
        return make_engine(url, connect_timeout_s=connect_timeout_s)

    monkeypatch.setattr(store, "make_engine", recording)  # what migrations/env.py calls
    await upgrade_async(f"sqlite+aiosqlite:///{tmp_path / 'patient.db'}")
    assert asked == [store.MIGRATION_CONNECT_TIMEOUT_S]
    assert store.MIGRATION_CONNECT_TIMEOUT_S > store.CONNECT_TIMEOUT_S
