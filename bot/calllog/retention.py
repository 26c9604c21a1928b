"""Retention: what callers said is kept for a set number of days, then blanked."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.models import CallEvent, TurnRow

log = logging.getLogger(__name__)

#: Events whose detail is personal data: keys pressed (PINs), and the warm handoff's summary
#: (the caller's number and words).
PERSONAL_EVENTS = ("dtmf", "handoff_summary")


@dataclass(frozen=True)
class PurgeResult:
    """How many rows a purge blanked."""

    turns: int
    events: int
    cutoff: datetime


async def purge(engine: AsyncEngine, days: int, now: datetime | None = None) -> PurgeResult:
    """Blank transcripts, answers and DTMF digits older than ``days``; idempotent.

    The rows stay (timings, routes, counts): only the personal text goes. Rows already
    purged are not touched again.
    """
    now = now or datetime.now(UTC)
    cutoff = now - timedelta(days=days)
    async with engine.begin() as conn:
        turns = await conn.execute(
            update(TurnRow)
            .where(TurnRow.finished_at < cutoff)
            .where(TurnRow.purged_at.is_(None))
            .values(transcript=None, answer=None, purged_at=now)
        )
        events = await conn.execute(
            update(CallEvent)
            .where(CallEvent.at < cutoff)
            .where(CallEvent.kind.in_(PERSONAL_EVENTS))
            .where(CallEvent.purged_at.is_(None))
            .values(detail=None, purged_at=now)
        )
    result = PurgeResult(turns=turns.rowcount, events=events.rowcount, cutoff=cutoff)
    log.info("purged %d turns and %d events before %s", result.turns, result.events, cutoff)
    return result
