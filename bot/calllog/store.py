"""The database side: one engine for PostgreSQL or SQLite, and batch writes that ignore repeats."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Table, and_, bindparam, event, or_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql.dml import Insert

from bot.calllog.models import Call, CallEvent, TurnRow
from bot.calllog.records import Record

CONNECT_TIMEOUT_S = 3
#: How long a migration's connection may take (``migrations/env.py``): a one-off step that
#: an operator (``switchboard db upgrade``) or a starting node on a database that has just
#: answered takes; a busy server's slow connection is waited for, not a failed upgrade.
MIGRATION_CONNECT_TIMEOUT_S = 30


def make_engine(url: str, *, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> AsyncEngine:
    """An async engine for ``postgresql+psycopg://...`` or ``sqlite+aiosqlite:///...``.

    ``connect_timeout_s``: how long a new PostgreSQL connection may take before the attempt
    fails (the call log then spools to disk; the admin API answers 503)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, connect_args={"timeout": 5})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(
        url,
        pool_pre_ping=True,
        pool_size=2,
        max_overflow=2,
        connect_args={"connect_timeout": connect_timeout_s},
    )


def _sqlite_pragmas(dbapi_conn: sqlite3.Connection, _record: object) -> None:
    cur = dbapi_conn.cursor()
    # WAL: readers (an operator's query, `db purge`) never block the bot's writes.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _insert_ignore(dialect: str, table: Table) -> Insert:
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    raise ValueError(f"unsupported database: {dialect}")


_CALLS: Table = Call.__table__  # type: ignore[assignment]
_TURNS: Table = TurnRow.__table__  # type: ignore[assignment]
_EVENTS: Table = CallEvent.__table__  # type: ignore[assignment]

# A real end replaces a "crashed" one that recovery wrote before a late replay arrived.
_END = (
    update(_CALLS)
    .where(_CALLS.c.id == bindparam("b_id"))
    .where(or_(_CALLS.c.ended_at.is_(None), _CALLS.c.end_reason == "crashed"))
    .values(
        ended_at=bindparam("b_ended_at"),
        end_reason=bindparam("b_end_reason"),
        outcome=bindparam("b_outcome"),
        outcome_reason=bindparam("b_outcome_reason"),
        post_call_answer=bindparam("b_post_call_answer"),
    )
)
# Each turn's outcome, decided with its call's (``bot.calllog.outcomes``).
_TURN_OUTCOME = (
    update(_TURNS).where(_TURNS.c.id == bindparam("b_id")).values(outcome=bindparam("b_outcome"))
)


async def write_batch(engine: AsyncEngine, records: Sequence[Record]) -> None:
    """Write records in one transaction: call rows, then turns and events, then the calls'
    heartbeats, then ends."""
    rows: dict[str, list[dict[str, Any]]] = {
        "call": [],
        "turn": [],
        "event": [],
        "alive": [],
        "end": [],
    }
    for rec in records:
        rows[rec.kind].append(rec.row)
    async with engine.begin() as conn:
        await _write(conn, rows)


async def _write(conn: AsyncConnection, rows: dict[str, list[dict[str, Any]]]) -> None:
    dialect = conn.dialect.name
    for kind, table in (("call", _CALLS), ("turn", _TURNS), ("event", _EVENTS)):
        if rows[kind]:
            await conn.execute(_insert_ignore(dialect, table), rows[kind])
    for alive in rows["alive"]:
        await _mark_alive(conn, alive["ids"], alive["at"])
    if rows["end"]:
        # A record spooled before outcomes were decided has none: NULL, as before.
        params = [
            {
                "b_id": row["id"],
                "b_ended_at": row["ended_at"],
                "b_end_reason": row["end_reason"],
                "b_outcome": row.get("outcome"),
                "b_outcome_reason": row.get("outcome_reason"),
                "b_post_call_answer": row.get("post_call_answer"),
            }
            for row in rows["end"]
        ]
        await conn.execute(_END, params)
        turns = [
            {"b_id": uuid.UUID(turn_id), "b_outcome": outcome}
            for row in rows["end"]
            for turn_id, outcome in row.get("turn_outcomes") or []
        ]
        if turns:
            await conn.execute(_TURN_OUTCOME, turns)


async def _mark_alive(conn: AsyncConnection, ids: Sequence[uuid.UUID], at: datetime) -> None:
    """The calls ``ids`` were up at ``at``: an open call's ``alive_at`` moves on to it, and a
    call recovery already closed as crashed (this heartbeat replayed late) ends there."""
    if not ids:
        return
    later = or_(_CALLS.c.alive_at.is_(None), _CALLS.c.alive_at < at)
    mine = _CALLS.c.id.in_(list(ids))
    await conn.execute(
        update(_CALLS).where(mine, _CALLS.c.ended_at.is_(None), later).values(alive_at=at)
    )
    crashed = and_(_CALLS.c.end_reason == "crashed", _CALLS.c.ended_at < at)
    await conn.execute(update(_CALLS).where(mine, crashed).values(alive_at=at, ended_at=at))
