"""Recordings: one stereo WAV a call, linked from its call row (SQLite and PostgreSQL),
deleted with its link once past retention."""

from __future__ import annotations

import asyncio
import os
import time
import wave
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.models import Call
from bot.recording import CallRecorder, RecordedCall, recording_path
from bot.recording.files import partial_path
from bot.recording.retention import purge_recordings
from telephony.events import AudioIn
from tests.bot.fakes import MemoryCall
from tests.calllog.helpers import open_log

FRAME = 320  # 20 ms at 8 kHz


def frames(value: int, n: int) -> bytes:
    return np.full(n * FRAME // 2, value, dtype="<i2").tobytes()


def read(path: Path) -> tuple[int, np.ndarray]:
    with wave.open(str(path), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth()) == (2, 2)
        data = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
        return wav.getframerate(), data.reshape(-1, 2)


async def test_both_sides_are_written_in_step_and_a_flush_is_never_heard(
    tmp_path: Path,
) -> None:
    inner = MemoryCall("rec-1")
    inner.remote_uri, inner.local_uri, inner.answered_at = "sip:a@b", "sip:bot@n", 0.0  # type: ignore[attr-defined]
    path = recording_path(tmp_path, "abc@host/../x", datetime(2026, 11, 25, tzinfo=UTC))
    assert path.parent == tmp_path / "2026-11-25" and "/" not in path.name
    recorder = CallRecorder(path, 8000)
    call = RecordedCall(inner, recorder)  # type: ignore[arg-type]
    call.send(frames(1000, 3))  # the bot queues 3 frames
    received = []

    async def take() -> None:
        async for event in call.receive():
            received.append(event)

    task = asyncio.create_task(take())
    for value in (7, 8, 9, 10):  # the caller's frames, one a tick
        await inner._inbound.put(AudioIn(pcm=frames(value, 1), at=time.monotonic()))
    await asyncio.sleep(0.05)
    call.send(frames(2000, 5))
    call.clear_playout()  # a barge-in: those 5 frames are never played
    await inner._inbound.put(AudioIn(pcm=frames(11, 1), at=time.monotonic()))
    await inner.end()
    await task
    assert not path.exists() and partial_path(path).exists()  # no fetch sees half a file
    recorder.close()
    assert not partial_path(path).exists()
    assert len(received) == 6  # every event still reaches the session
    rate, data = read(path)
    assert rate == 8000 and len(data) == 5 * FRAME // 2
    per_frame = data.reshape(5, -1, 2)
    assert per_frame[:, 0, 0].tolist() == [7, 8, 9, 10, 11]  # left: the caller
    assert per_frame[:, 0, 1].tolist() == [1000, 1000, 1000, 0, 0]  # right: the bot


async def test_the_call_row_links_the_recording_and_purge_removes_both(
    db_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    folder = tmp_path / "recordings"
    old_file = folder / "2026-10-01" / "old.wav"
    new_file = folder / "2026-11-25" / "new.wav"
    stray = folder / "2026-10-02" / "stray.wav"  # a call the log never got
    unfinished = folder / "2026-10-02" / "crashed.wav.part"  # a node stopped mid-call
    elsewhere = tmp_path / "not-a-recording.wav"  # named by a tampered row
    sneaky = folder / ".." / elsewhere.name
    for f in (old_file, new_file, stray, unfinished, elsewhere):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"RIFF")
    forty_days = time.time() - 40 * 86400
    for f in (stray, unfinished):
        os.utime(f, (forty_days, forty_days))
    log = await open_log(db_url, tmp_path / "spool")
    log.call_answered("old", caller="sip:a@b", callee="sip:bot@n", recording=str(old_file))
    log.call_answered("new", caller="sip:a@b", callee="sip:bot@n", recording=str(new_file))
    log.call_answered("none", caller="sip:a@b", callee="sip:bot@n")
    for call_id, path in (("tampered", elsewhere), ("sneaky", sneaky)):
        log.call_answered(call_id, caller="sip:a@b", callee="sip:bot@n", recording=str(path))
    for call_id in ("old", "new", "none", "tampered", "sneaky"):
        log.call_ended(call_id, "bye")
    await log.close()
    async with engine.begin() as conn:
        old = datetime.now(UTC) - timedelta(days=40)
        await conn.execute(
            update(Call)
            .where(Call.sip_call_id.in_(["old", "tampered", "sneaky"]))
            .values(answered_at=old)
        )

    first = await purge_recordings(engine, folder, days=30)
    second = await purge_recordings(engine, folder, days=30)

    assert (first.calls, first.files, first.outside) == (3, 3, 2)
    assert (second.calls, second.files, second.outside) == (0, 0, 0)
    assert not old_file.exists() and not stray.exists() and not unfinished.exists()
    assert new_file.exists()
    assert elsewhere.exists()  # a file outside the folder is never deleted...
    assert not (folder / "2026-10-01").exists()  # emptied day folders go too
    async with engine.connect() as conn:
        rows = dict((await conn.execute(select(Call.sip_call_id, Call.recording_path))).all())
    # ...but the rows past retention no longer name it.
    assert rows == {
        "old": None,
        "new": str(new_file),
        "none": None,
        "tampered": None,
        "sneaky": None,
    }
