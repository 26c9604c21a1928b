"""Calls with known endings, through the call log's writer: their outcomes as stored."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.models import Call, TurnRow
from tests.calllog.helpers import open_log
from tests.calllog.known_calls import KNOWN, report


async def test_each_call_and_turn_stores_its_outcome(
    db_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    log = await open_log(db_url, tmp_path / "spool")
    told: list[tuple[str, str, list[str]]] = []
    log.on_outcome = lambda outcome, reason, turns: told.append((outcome, reason, list(turns)))
    try:
        for call in KNOWN:
            report(log, call)
        await log.writer.flush()
    finally:
        await log.close()
    async with engine.connect() as conn:
        calls = {
            sip: (outcome, reason, end)
            for sip, outcome, reason, end in await conn.execute(
                select(Call.sip_call_id, Call.outcome, Call.outcome_reason, Call.end_reason)
            )
        }
        turns = (
            await conn.execute(
                select(Call.sip_call_id, TurnRow.outcome)
                .join(TurnRow, TurnRow.call_id == Call.id)
                .order_by(TurnRow.seq)
            )
        ).all()
    assert told == [(*c.outcome, c.turn_outcomes) for c in KNOWN]  # the node's metrics
    assert calls == {c.sip_call_id: (*c.outcome, c.end_reason) for c in KNOWN}
    for call in KNOWN:
        assert [o for sip, o in turns if sip == call.sip_call_id] == call.turn_outcomes, call
