"""A caller answered into the call queue and then given to the bot is one call row."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.models import Call, CallEvent
from tests.calllog.helpers import open_log


async def test_a_call_reported_answered_twice_keeps_its_first_row(
    db_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    log = await open_log(db_url, tmp_path / "spool")
    log.call_answered("q-1", caller="sip:a@b", callee="sip:bot@n", recording="/rec/q-1.wav")
    log.event("q-1", "queued", "position 1")
    log.event("q-1", "dequeued", "waited 4.0 s")
    # The call session reports the same call when it starts: no second row.
    log.call_answered("q-1", caller="sip:a@b", callee="sip:bot@n")
    log.event("q-1", "dtmf", "5")
    log.call_ended("q-1", "bye")
    await log.close()
    async with engine.connect() as conn:
        calls = (await conn.execute(select(Call))).all()
        kinds = (await conn.execute(select(CallEvent.kind).order_by(CallEvent.at))).scalars()
        assert len(calls) == 1
        assert calls[0].recording_path == "/rec/q-1.wav" and calls[0].end_reason == "bye"
        assert list(kinds) == ["queued", "dequeued", "dtmf"]
