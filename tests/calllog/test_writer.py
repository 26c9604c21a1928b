"""The writer: batches, ignores repeats, and never makes the call wait for the database."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.models import Call, TurnRow
from bot.calllog.records import Record
from bot.calllog.settings import CallLogSettings
from bot.calllog.store import make_engine, write_batch
from tests.calllog.conftest import TcpProxy, counts, pg_target, with_port
from tests.calllog.helpers import a_turn, open_log, wait_for


async def test_records_are_batched(db_url: str, engine: AsyncEngine, tmp_path: Path) -> None:
    opts = CallLogSettings(batch_size=100, batch_window_ms=20)
    log = await open_log(db_url, tmp_path, options=opts)
    log.call_answered("c1", caller="sip:+15550001111@pbx", callee="sip:bot@node")
    for n in range(450):
        log.turn_finished(a_turn("c1", n))
    log.call_ended("c1", "remote hangup")
    await wait_for(lambda: log.writer.pending == 0)
    await log.writer.flush()
    stats = log.writer.stats
    await log.close()
    got = await counts(engine)
    assert (got.calls, got.turns, got.open_calls) == (1, 450, 0)
    assert stats.written == 452
    assert 5 <= stats.batches <= 10, stats.batches  # ~100 a transaction, not one each


async def test_the_same_record_twice_is_one_row(
    db_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    log = await open_log(db_url, tmp_path)
    log.call_answered("c1", caller="sip:a@b", callee="sip:bot@node")
    turn = a_turn("c1", 1)
    log.turn_finished(turn)
    log.turn_finished(turn)  # the speaker may report a turn twice (interrupt, then hang-up)
    await log.writer.flush()
    # The same records again, as a retry or a spool replay would send them.
    async with engine.connect() as conn:
        call = (await conn.execute(select(Call.__table__))).mappings().one()
        row = (await conn.execute(select(TurnRow.__table__))).mappings().one()
    again = [Record("call", dict(call)), Record("turn", dict(row))]
    await write_batch(engine, again)
    await write_batch(engine, again + again)
    log.writer._spool.append(again)  # replayed from the spool on top
    log.writer._start_spooling()
    await log.writer.flush()
    assert not log.writer.spooling
    await log.close()
    got = await counts(engine)
    assert (got.calls, got.turns) == (1, 1)


@asynccontextmanager
async def stalled_database(
    url: str,
) -> AsyncIterator[tuple[str, Callable[[], None], Callable[[], None]]]:
    """A URL to ``url``'s database, and functions that stall it and let it go."""
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[1]
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

        def stall() -> None:
            holder.execute("BEGIN EXCLUSIVE")  # every writer waits on the lock

        def unstall() -> None:
            holder.execute("COMMIT")

        try:
            yield url, stall, unstall
        finally:
            if holder.in_transaction:
                holder.execute("COMMIT")
            holder.close()
    else:
        proxy = TcpProxy(*pg_target(url))
        await proxy.start()
        try:
            yield with_port(url, proxy.port), proxy.stall, proxy.unstall
        finally:
            await proxy.close()


async def test_a_stalled_database_does_not_stall_the_call(
    db_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    opts = CallLogSettings(batch_window_ms=5, write_timeout_s=1.0, retry_s=0.3)
    async with stalled_database(db_url) as (url, stall, unstall):
        log = await open_log(url, tmp_path, options=opts)
        log.call_answered("c1", caller="sip:a@b", callee="sip:bot@node")
        await log.writer.flush()
        stall()
        lags: list[float] = []
        calls: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:  # the audio path's 20 ms frame clock
            due = time.monotonic()
            while not stop.is_set():
                due += 0.02
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                lags.append(time.monotonic() - due)

        tick = asyncio.create_task(ticker())
        for n in range(100):
            t0 = time.perf_counter()
            log.turn_finished(a_turn("c1", n))
            calls.append(time.perf_counter() - t0)
            await asyncio.sleep(0.02)
        await wait_for(lambda: log.writer.spooling, 10)
        stop.set()
        await tick
        unstall()
        log.call_ended("c1", "remote hangup")
        await wait_for(lambda: not log.writer.spooling and log.writer.pending == 0, 20)
        await log.close()
    # A call or a writer that waited on the stalled database would take the whole write
    # timeout (1 s); the bounds leave room for scheduler noise on a busy 2-core box (a
    # process preempted mid-call reads as a slow call).
    assert max(calls) < 0.1, f"turn_finished took {max(calls) * 1000:.1f} ms"
    assert max(lags) < 0.25, f"event loop lagged {max(lags) * 1000:.1f} ms"
    got = await counts(engine)
    assert (got.calls, got.turns, got.open_calls) == (1, 100, 0)


async def test_the_node_starts_with_the_database_down_and_catches_up(
    pg_url: str, tmp_path: Path
) -> None:
    proxy = TcpProxy(*pg_target(pg_url))
    await proxy.start()
    await proxy.cut()  # nothing listens: connection refused
    log = await open_log(with_port(pg_url, proxy.port), tmp_path)
    assert log.writer.spooling
    log.call_answered("c1", caller="sip:a@b", callee="sip:bot@node")
    log.turn_finished(a_turn("c1", 1))
    log.call_ended("c1", "remote hangup")
    await wait_for(lambda: log.writer.stats.spooled == 3)
    await proxy.restore()
    await wait_for(lambda: not log.writer.spooling, 15)
    await log.close()
    await proxy.close()
    engine = make_engine(pg_url)
    got = await counts(engine)
    await engine.dispose()
    assert (got.calls, got.turns, got.open_calls) == (1, 1, 0)
