"""Calls a crash left open: closed on the next start with end reason "crashed"."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.models import Call, CallEvent, TurnRow

log = logging.getLogger(__name__)

CRASHED = "crashed"


async def close_crashed_calls(engine: AsyncEngine, node: str, started_before: datetime) -> int:
    """Close this node's calls answered before ``started_before`` that have no end.

    Each gets its last known time: the latest of its answer, its last heartbeat
    (``alive_at``), its turns and its events. Only this node's calls: another live node's
    open calls are not crashed.
    """
    last_turn = (
        select(func.max(TurnRow.finished_at)).where(TurnRow.call_id == Call.id).scalar_subquery()
    )
    last_event = (
        select(func.max(CallEvent.at)).where(CallEvent.call_id == Call.id).scalar_subquery()
    )
    async with engine.begin() as conn:
        rows = (
            await conn.execute(
                select(Call.id, Call.answered_at, Call.alive_at, last_turn, last_event)
                .where(Call.node == node)
                .where(Call.ended_at.is_(None))
                .where(Call.answered_at < started_before)
            )
        ).all()
        for call_id, answered, alive, turn_at, event_at in rows:
            known = (answered, alive, turn_at, event_at)
            last = max(_aware(t) for t in known if t is not None)
            await conn.execute(
                update(Call)
                .where(Call.id == call_id)
                .where(Call.ended_at.is_(None))
                .values(ended_at=last, end_reason=CRASHED, outcome="failed", outcome_reason=CRASHED)
            )
    if rows:
        log.warning("closed %d call(s) left open by a crash of node %s", len(rows), node)
    return len(rows)


def _aware(value: datetime | str) -> datetime:
    # SQLite hands back naive datetimes (or, from a subquery, strings); all are UTC.
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
