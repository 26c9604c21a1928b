"""Faults: the database away for part of a call, and a node killed mid-call."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.models import Call, CallEvent, TurnRow
from bot.calllog.settings import CallLogSettings
from bot.calllog.store import make_engine
from tests.calllog.conftest import TcpProxy, counts, pg_target, with_port
from tests.calllog.helpers import a_turn, open_log, wait_for

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


def _run_and_kill(url: str, spool: Path, node: str, turns: int) -> str:
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
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    return line.split()[1]


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
    how = await asyncio.to_thread(_run_and_kill, url, spool, node, 3)
    assert how == ("spooling" if db_down else "written")
    mid = await counts(engine)
    assert mid.open_calls - before.open_calls == (0 if db_down else 1)

    log = await open_log(db_url, spool, node=node)  # the restart
    await log.close()

    after = await counts(engine)
    assert (after.calls - before.calls, after.turns - before.turns) == (1, 3)
    assert after.events - before.events == 1
    assert after.open_calls == 0
    async with engine.connect() as conn:
        call = (await conn.execute(select(Call.end_reason, Call.ended_at))).one()
        last_turn = (await conn.execute(select(TurnRow.finished_at))).scalars().all()
        last_event = (await conn.execute(select(CallEvent.at))).scalars().all()
    assert call.end_reason == "crashed"
    assert call.ended_at == max([*last_turn, *last_event])  # its last known time
    assert list(spool.glob("*.jsonl")) == []  # the dead node's spool was adopted and emptied


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
