"""Retention: old transcripts are blanked, idempotently; caller numbers stay out of the log."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog import mask_uri
from bot.calllog.models import CallEvent, TurnRow
from bot.calllog.retention import purge
from tests.calllog.helpers import a_turn, open_log


async def test_purge_blanks_only_old_text_and_is_idempotent(
    db_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    log = await open_log(db_url, tmp_path)
    log.call_answered("c1", caller="sip:+15550001111@pbx", callee="sip:bot@node")
    for n in range(4):
        log.turn_finished(a_turn("c1", n))
    log.event("c1", "dtmf", "7")
    log.event("c1", "barge_in")
    log.call_ended("c1", "remote hangup")
    await log.close()
    old = datetime.now(UTC) - timedelta(days=40)
    async with engine.begin() as conn:  # two turns and the events are 40 days old
        await conn.execute(update(TurnRow).where(TurnRow.seq <= 2).values(finished_at=old))
        await conn.execute(update(CallEvent).values(at=old))

    first = await purge(engine, days=30)
    second = await purge(engine, days=30)

    assert (first.turns, first.events) == (2, 1)  # the DTMF digit, not the barge-in
    assert (second.turns, second.events) == (0, 0)
    async with engine.connect() as conn:
        rows = (await conn.execute(select(TurnRow.seq, TurnRow.transcript, TurnRow.answer))).all()
        events = dict((await conn.execute(select(CallEvent.kind, CallEvent.detail))).all())
    text = {seq: (t, a) for seq, t, a in rows}
    assert text[1] == text[2] == (None, None)
    assert text[3] == ("where is my order 2", "it ships today 2")
    assert len(rows) == 4  # rows stay; only the text goes
    assert events == {"dtmf": None, "barge_in": None}


def test_mask_uri_hides_the_number() -> None:
    masked = mask_uri('"Bob" <sip:+15551234567@pbx.example.com>')
    assert "5551234" not in masked
    assert masked.startswith("sip:…67@pbx.example.com#")
    assert mask_uri("sip:+15551234567@pbx") == mask_uri("sip:+15551234567@pbx")


async def test_caller_numbers_and_transcripts_stay_out_of_the_info_log(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    log = await open_log(db_url, tmp_path)
    log.call_answered("c1", caller="sip:+15559876543@pbx", callee="sip:bot@node")
    log.turn_finished(a_turn("c1", 1, text="my card number is four four"))
    log.call_ended("c1", "remote hangup")
    await log.close()
    logged = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    assert "answered from sip:…43@pbx#" in logged
    assert "5559876543" not in logged and "card number" not in logged
