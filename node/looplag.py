"""How late the event loop runs its callbacks: the measure of blocking work on it.

Every call's frames, timers and IPC share one asyncio loop. Anything that blocks it (a model
call run inline, a slow synchronous write) delays every call at once. The monitor sleeps
``interval_s`` in a loop and records how much later than asked it woke up; every
``report_every_s`` it writes one structured line with the percentiles and starts over.
"""

from __future__ import annotations

import asyncio
import logging
import time

import numpy as np

from bot.tasks import cancel_and_wait

log = logging.getLogger("switchboard.loop")


class LoopLagMonitor:
    """Samples the running loop's scheduling lateness."""

    def __init__(self, *, interval_s: float = 0.02, report_every_s: float = 60.0) -> None:
        self.interval_s = interval_s
        self.report_every_s = report_every_s
        self._lags_ms: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="loop-lag")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        self.report()

    def snapshot(self) -> dict[str, float]:
        """Percentiles (ms) of the lateness seen since the last report."""
        if not self._lags_ms:
            return {"samples": 0}
        lags = np.asarray(self._lags_ms)
        p50, p95, p99 = np.percentile(lags, [50, 95, 99])
        return {
            "samples": int(lags.size),
            "p50_ms": round(float(p50), 2),
            "p95_ms": round(float(p95), 2),
            "p99_ms": round(float(p99), 2),
            "max_ms": round(float(lags.max()), 2),
        }

    def report(self) -> None:
        """Log the lateness since the last report as one structured line, and reset."""
        record = self.snapshot()
        if record["samples"]:
            log.info("loop lag", extra={"record": {"event": "loop_lag", **record}})
        self._lags_ms = []

    async def _run(self) -> None:
        last_report = time.monotonic()
        while True:
            asked = time.monotonic() + self.interval_s
            await asyncio.sleep(self.interval_s)
            woke = time.monotonic()
            self._lags_ms.append(max(0.0, (woke - asked) * 1000.0))
            if woke - last_report >= self.report_every_s:
                self.report()
                last_report = woke
