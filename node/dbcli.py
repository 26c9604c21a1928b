"""``switchboard db ...``: migrate, inspect and purge the call log's database."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.calllog.migrate import downgrade, schema_state, upgrade
from bot.calllog.retention import purge
from bot.calllog.store import make_engine
from bot.recording.retention import purge_recordings
from node.calllog import database_url, recordings_dir
from node.settings import Settings


def run_db(
    settings: Settings, command: str, revision: str | None = None, days: int | None = None
) -> int:
    """Run one ``db`` subcommand on the configured database; the exit status."""
    url = database_url(settings)
    if command == "upgrade":
        upgrade(url, revision or "head")
        return asyncio.run(_current(url))
    if command == "downgrade":
        if not revision:
            raise ValueError("downgrade needs a revision")
        downgrade(url, revision)
        return asyncio.run(_current(url, expect_current=False))
    if command == "current":
        return asyncio.run(_current(url))
    if command == "purge":
        return asyncio.run(
            _purge(
                url,
                days or settings.calllog.transcript_retention_days,
                recordings_dir(settings),
                settings.recordings.retention_days,
            )
        )
    raise ValueError(f"unknown db command: {command}")


async def _current(url: str, *, expect_current: bool = True) -> int:
    engine = make_engine(url)
    try:
        state = await schema_state(engine)
    finally:
        await engine.dispose()
    print(f"database: {state.current or '(none)'}  code: {state.head}  ({state.status})")
    return 0 if state.status == "current" or not expect_current else 1


async def _purge(url: str, days: int, recordings: Path, recording_days: int) -> int:
    engine = make_engine(url)
    try:
        result = await purge(engine, days)
        gone = await purge_recordings(engine, recordings, recording_days)
    finally:
        await engine.dispose()
    print(
        f"deleted {gone.files} recording(s) of calls before {gone.cutoff:%Y-%m-%d %H:%M} UTC "
        f"({recording_days} days)"
    )
    if gone.outside:
        print(
            f"left {gone.outside} file(s) named by call rows outside {recordings} "
            "(unlinked, not deleted)"
        )
    print(
        f"blanked {result.turns} turn(s) and {result.events} event(s) "
        f"older than {result.cutoff:%Y-%m-%d %H:%M} UTC ({days} days)"
    )
    return 0
