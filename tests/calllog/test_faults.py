"""Faults: the database away for part of a call, and a node killed mid-call."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.models import Call, CallEvent, TurnRow
from bot.calllog.records import Record
from bot.calllog.settings import CallLogSettings
from bot.calllog.store import make_engine, write_batch
from tests.calllog import crash_writer
from tests.calllog.conftest import TcpProxy, counts, pg_target, with_port
from tests.calllog.helpers import FAST, a_turn, open_log, wait_for

ROOT = Path(__file__).resolve().parents[2]


async def test_outage_mid_call_spools_then_replays_without_loss_or_duplicates(
    pg_url: str, tmp_path: Path
) -> None:
    engine = make_engine(pg_url)
    before = await counts(engine)
    proxy = TcpProxy(*pg_target(pg_url))
    await proxy.start()
    opts = CallLogSettings(batch_window_ms=5, write_timeout_s=1.0, retry_s=0.2)
    log = await open_log(with_port(pg_url, proxy.port), tmp_path / "spool", options=opts)

    log.call_answered("c1", caller="sip:+15550001111@pbx", callee="sip:bot@node")
    for n in range(5):
        log.turn_finished(a_turn("c1", n))
    await wait_for(lambda: log.writer.stats.written == 6)
    await proxy.cut()  # connections dropped, new ones refused
    for n in range(5, 12):
        log.turn_finished(a_turn("c1", n))
        log.event("c1", "dtmf", str(n % 10))
    log.event("c1", "barge_in")
    await wait_for(lambda: log.writer.spooling and log.writer.stats.spooled >= 15)
    spooled = log.writer.stats.spooled
    assert log.writer._spool.size() > 0
    during = await counts(engine)
    assert (during.calls, during.turns, during.events) == (1, 5, 0)

    await proxy.restore()
    for n in range(12, 15):
        log.turn_finished(a_turn("c1", n))
    log.call_ended("c1", "remote hangup")
    await wait_for(lambda: not log.writer.spooling and log.writer.pending == 0, 15)
    assert log.writer._spool.size() == 0
    replayed = log.writer.stats.replayed
    await log.close()
    await proxy.close()

    after = await counts(engine)
    await engine.dispose()
    assert after.calls - before.calls == 1
    assert after.turns - before.turns == 15  # none lost, none twice (15 distinct turns)
    assert after.events - before.events == 8
    assert after.open_calls == 0
    assert replayed >= spooled  # the outage's records came back from the spool


def _run_and_kill(url: str, spool: Path, node: str, turns: int) -> tuple[str, datetime, datetime]:
    """Run the crash script, SIGKILL it once READY: how it wrote, when it said READY, and
    when it was killed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.calllog.crash_writer", url, str(spool), node, str(turns)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until READY (or the script died)
        assert line.startswith("READY"), f"crash script said {line!r}, rc={proc.poll()}"
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = datetime.now(UTC)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    _, mode, ready_at = line.split()
    return mode, datetime.fromisoformat(ready_at), killed_at


def _utc(value: datetime) -> datetime:
    # SQLite reads back naive UTC times.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


#: How much of a crashed call's length its recovery may lose: one heartbeat of the crash
#: script (0.5 s), and the script's event loop being late for it.
LOST_AT_MOST = timedelta(seconds=crash_writer.HEARTBEAT_S + 2.0)


@pytest.mark.parametrize("db_down", [False, True], ids=["db-up", "db-down"])
async def test_a_node_killed_mid_call_closes_it_as_crashed_on_restart(
    db_url: str, engine: AsyncEngine, tmp_path: Path, db_down: bool
) -> None:
    if db_down and db_url.startswith("sqlite"):
        pytest.skip("a SQLite file is never away")
    before = await counts(engine)
    spool, node = tmp_path / "spool", "node-a:5060"
    # db-down: the killed node could not reach the database at all: everything is spooled.
    url = with_port(db_url, 1) if db_down else db_url
    how, ready_at, killed_at = await asyncio.to_thread(_run_and_kill, url, spool, node, 3)
    assert how == ("spooling" if db_down else "written")
    mid = await counts(engine)
    assert mid.open_calls - before.open_calls == (0 if db_down else 2)

    log = await open_log(db_url, spool, node=node)  # the restart
    await log.close()

    after = await counts(engine)
    assert (after.calls - before.calls, after.turns - before.turns) == (2, 3)
    assert after.events - before.events == 1
    assert after.open_calls == 0
    async with engine.connect() as conn:
        calls = {
            row.sip_call_id: row
            for row in await conn.execute(
                select(Call.sip_call_id, Call.end_reason, Call.answered_at, Call.ended_at)
            )
        }
        last_turn = (await conn.execute(select(TurnRow.finished_at))).scalars().all()
        last_event = (await conn.execute(select(CallEvent.at))).scalars().all()
    assert {c.end_reason for c in calls.values()} == {"crashed"}
    talked, silent = calls["crash-1"], calls["crash-silent"]
    # Each call ends at the last time the node knew it up: its last heartbeat, within a
    # heartbeat (and the loop's lateness) of the kill; not at its last turn or event, nor,
    # for the caller who said nothing, at its answer (both were up LIVE_S more seconds).
    for call in (talked, silent):
        ended = _utc(call.ended_at)
        assert ready_at - LOST_AT_MOST <= ended <= killed_at, call
        length = ended - _utc(call.answered_at)
        assert length >= timedelta(seconds=crash_writer.LIVE_S) - LOST_AT_MOST, call
    last_written = max(_utc(t) for t in [*last_turn, *last_event])
    assert _utc(talked.ended_at) - last_written >= timedelta(seconds=1.5)
    assert list(spool.glob("*.jsonl")) == []  # the dead node's spool was adopted and emptied


async def _alive_and_end(engine: AsyncEngine) -> tuple[datetime | None, datetime | None]:
    async with engine.connect() as conn:
        row = (await conn.execute(select(Call.alive_at, Call.ended_at))).one()
    return row.alive_at, row.ended_at


async def test_a_live_call_is_marked_alive_until_it_ends(
    db_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    # The heartbeat's interval is out of reach: the test marks the calls alive itself, as
    # each heartbeat does (with a 0.2 s one, the first beat came before the first check
    # could read the row, beside every test group at once).
    options = FAST.model_copy(update={"heartbeat_s": 300.0})
    log = await open_log(db_url, tmp_path / "spool", options=options)
    log.call_answered("c1", caller="sip:a@b", callee="sip:bot@node")
    await log.writer.flush()
    assert await _alive_and_end(engine) == (None, None)  # not yet a heartbeat
    seen: list[datetime] = []
    for _ in range(3):
        await asyncio.sleep(0.01)
        log.mark_alive()
        await log.writer.flush()
        alive_at, _ = await _alive_and_end(engine)
        assert alive_at is not None
        seen.append(alive_at)
    assert len(set(seen)) == 3 and seen == sorted(seen)  # each mark moves alive_at on
    log.call_ended("c1", "remote hangup")
    await log.writer.flush()
    alive, ended = await _alive_and_end(engine)
    assert alive is not None and ended is not None and alive <= ended
    log.mark_alive()  # no call up: nothing to mark, the ended row is left alone
    await log.close()
    assert await _alive_and_end(engine) == (alive, ended)


async def test_the_heartbeat_marks_a_live_call_alive_each_interval(
    db_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    options = FAST.model_copy(update={"heartbeat_s": 0.2})
    log = await open_log(db_url, tmp_path / "spool", options=options)
    log.call_answered("c1", caller="sip:a@b", callee="sip:bot@node")
    await log.writer.flush()
    seen: list[datetime] = []

    async def moved_on() -> bool:
        alive, _ = await _alive_and_end(engine)
        if alive is not None and alive not in seen:
            seen.append(alive)
        return len(seen) >= 3

    await wait_for(moved_on)  # each heartbeat moves alive_at on, with no one asking
    assert seen == sorted(seen)
    await log.close()


async def test_a_heartbeat_replayed_after_recovery_moves_the_crashed_end_on(
    db_url: str, engine: AsyncEngine
) -> None:
    # A heartbeat that reached the database only after recovery had closed the call (a
    # spool adopted late): the call was up then, so its crashed end moves on to it.
    call_id = uuid.uuid4()
    answered = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
    row = {
        "id": call_id,
        "sip_call_id": "c1",
        "caller": "sip:a@b",
        "callee": "sip:bot@node",
        "node": "node-a:5060",
        "config_version": "0",
        "arrived_at": answered,
        "answered_at": answered,
        "ended_at": answered + timedelta(seconds=2),
        "end_reason": "crashed",
        "recording_path": None,
    }
    later = answered + timedelta(seconds=9)
    heartbeat = Record("alive", {"ids": [call_id], "at": later})
    await write_batch(engine, [Record("call", row), heartbeat])
    alive, ended = await _alive_and_end(engine)
    assert alive is not None and ended is not None
    assert (_utc(alive), _utc(ended)) == (later, later)
    # An older heartbeat changes nothing; a real end replaces the crashed one.
    await write_batch(engine, [Record("alive", {"ids": [call_id], "at": answered})])
    assert await _alive_and_end(engine) == (alive, ended)
    end = {"id": call_id, "ended_at": later + timedelta(seconds=1), "end_reason": "200 OK"}
    await write_batch(engine, [Record("end", end)])
    _, ended = await _alive_and_end(engine)
    assert ended is not None and _utc(ended) == later + timedelta(seconds=1)


async def test_another_nodes_open_calls_are_left_alone(
    db_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    live = await open_log(db_url, tmp_path / "a", node="node-a:5060")
    live.call_answered("c1", caller="sip:a@b", callee="sip:bot@node")
    await live.writer.flush()
    other = await open_log(db_url, tmp_path / "b", node="node-b:5060")
    await other.close()
    assert (await counts(engine)).open_calls == 1
    live.call_ended("c1", "remote hangup")
    await live.close()
    assert (await counts(engine)).open_calls == 0
