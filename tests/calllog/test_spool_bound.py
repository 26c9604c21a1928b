"""The spool has a size bound: past it the oldest records go (counted), never the disk."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from bot.calllog.records import Record
from bot.calllog.settings import CallLogSettings
from bot.calllog.spool import Spool
from tests.calllog.conftest import TcpProxy, pg_target, with_port
from tests.calllog.helpers import a_turn, open_log, wait_for


def rec(n: int) -> Record:
    return Record("event", {"n": n, "pad": "x" * 80})


def test_spool_drops_the_oldest_records_to_stay_within_its_bound(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=2000)
    spool.open()
    try:
        line = len(rec(0).to_json()) + 1
        assert spool.append([rec(n) for n in range(10)]) == (False, 0)
        # 10 more would pass 2000 bytes: the oldest go, the newest stay, in order.
        rewritten, dropped = spool.append([rec(n) for n in range(10, 20)])
        fits = 2000 // line
        assert rewritten and dropped == 20 - fits
        assert spool.size() <= 2000
        records, _ = spool.read_from(0, 100)
        assert [r.row["n"] for r in records] == list(range(20 - fits, 20))
        # Bytes already replayed go first, before any record that is still waiting.
        _, first_two = spool.read_from(0, 2)
        rewritten, dropped = spool.append([rec(20), rec(21)], first_two)
        assert rewritten and dropped == 0 and spool.size() <= 2000
        records, _ = spool.read_from(0, 100)
        assert [r.row["n"] for r in records] == list(range(22 - fits, 22))
    finally:
        spool.close()


async def test_a_long_outage_keeps_the_spool_within_its_bound(
    pg_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = TcpProxy(*pg_target(pg_url))
    await proxy.start()
    await proxy.cut()  # the database is away for the whole test
    opts = CallLogSettings(
        batch_window_ms=5, write_timeout_s=1.0, retry_s=0.2, spool_max_bytes=16_384
    )
    log = await open_log(with_port(pg_url, proxy.port), tmp_path, options=opts)
    try:
        with caplog.at_level(logging.ERROR, logger="bot.calllog.writer"):
            log.call_answered("c1", caller="sip:a@b", callee="sip:bot@node")
            for n in range(300):
                log.turn_finished(a_turn("c1", n))
                if n % 50 == 49:
                    await wait_for(lambda: log.writer.pending == 0)
            await wait_for(lambda: log.writer.pending == 0)
        stats = log.writer.stats
        assert log.writer._spool.path is not None
        spooled = await asyncio.to_thread(log.writer._spool.path.read_bytes)
        assert len(spooled) <= 16_384
        assert stats.dropped > 0 and stats.spooled == 301
        lines = spooled.splitlines()
        last = json.loads(lines[-1])
        assert last["kind"] == "turn" and last["row"]["transcript"].endswith(" 299")
        assert len(lines) + stats.dropped == 301  # nothing lost without being counted
        said = [r.getMessage() for r in caplog.records if "spool at its bound" in r.getMessage()]
        assert said and "SWITCHBOARD_CALLLOG__SPOOL_MAX_BYTES" in said[0]
        assert f"({stats.dropped} in all)" in said[-1]
    finally:
        await log.close()
        await proxy.close()
