"""Deletes recordings past their retention: the files, and the call rows' links to them."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.models import Call
from bot.recording.files import PART_SUFFIX, inside_folder, partial_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordingPurge:
    """How many recordings a purge deleted."""

    #: Calls whose recording was deleted (and unlinked).
    calls: int
    #: Files deleted, including ones no call row names (a call the log never got).
    files: int
    cutoff: datetime
    #: Call rows whose path lies outside the recordings folder: unlinked, file left alone.
    outside: int = 0


async def purge_recordings(
    engine: AsyncEngine, folder: Path, days: int, now: datetime | None = None
) -> RecordingPurge:
    """Delete the recordings of calls answered more than ``days`` ago; idempotent.

    The calls named in the log go by their answer time; any other WAV file left in
    ``folder`` goes by its modification time (with a ``.part`` left by a node that
    stopped mid-call). A file already gone is not an error. A row whose path lies outside
    ``folder`` is unlinked but its file is not deleted: the purge deletes only recordings.
    """
    now = now or datetime.now(UTC)
    cutoff = now - timedelta(days=days)
    async with engine.begin() as conn:
        rows = (
            await conn.execute(
                select(Call.id, Call.recording_path)
                .where(Call.answered_at < cutoff)
                .where(Call.recording_path.is_not(None))
            )
        ).all()
        inside = [inside_folder(folder, r.recording_path) for r in rows]
        paths = [p for p in inside if p is not None]
        for row, path in zip(rows, inside, strict=True):
            if path is None:
                log.warning(
                    "call %s: recording path %r is outside %s: unlinked, not deleted",
                    row.id,
                    row.recording_path,
                    folder,
                )
        files = await asyncio.to_thread(_delete_files, paths, folder, cutoff)
        if rows:
            await conn.execute(
                update(Call).where(Call.id.in_([r.id for r in rows])).values(recording_path=None)
            )
    result = RecordingPurge(
        calls=len(rows), files=files, cutoff=cutoff, outside=len(rows) - len(paths)
    )
    log.info("deleted %d recordings (%d calls) before %s", files, len(rows), cutoff)
    return result


def _delete_files(paths: list[Path], folder: Path, cutoff: datetime) -> int:
    """Delete ``paths``, then any WAV file in ``folder`` older than ``cutoff``."""
    files = sum(_delete(p) + _delete(partial_path(p)) for p in paths)
    if folder.is_dir():
        for wav in (*folder.glob("*/*.wav"), *folder.glob(f"*/*.wav{PART_SUFFIX}")):
            if wav.stat().st_mtime < cutoff.timestamp():
                files += _delete(wav)
        for day in folder.iterdir():
            if day.is_dir() and not any(day.iterdir()):
                day.rmdir()
    return files


def _delete(path: Path) -> int:
    try:
        path.unlink()
    except FileNotFoundError:
        return 0
    return 1
