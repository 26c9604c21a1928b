"""The event-loop lag monitor sees blocking work on the loop."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from node.looplag import LoopLagMonitor


async def test_a_blocked_loop_shows_up_as_lag(caplog: pytest.LogCaptureFixture) -> None:
    monitor = LoopLagMonitor(interval_s=0.01, report_every_s=3600)
    monitor.start()
    await asyncio.sleep(0.1)
    quiet = monitor.snapshot()
    time.sleep(0.15)  # noqa: ASYNC251 - blocking work on the loop, on purpose
    await asyncio.sleep(0.05)
    blocked = monitor.snapshot()
    assert quiet["samples"] >= 3
    assert blocked["max_ms"] >= 130.0  # slept 150 ms inline; interval 10 ms
    with caplog.at_level(logging.INFO, logger="switchboard.loop"):
        await monitor.stop()
    (line,) = [r for r in caplog.records if r.name == "switchboard.loop"]
    record = line.__dict__["record"]
    assert record["event"] == "loop_lag" and record["max_ms"] >= 100.0
    assert monitor.snapshot() == {"samples": 0}
