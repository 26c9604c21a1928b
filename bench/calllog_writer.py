"""Call-log writer throughput, batch commit times, and event-loop lag while it writes.

``python -m bench.calllog_writer`` runs on PostgreSQL (a scratch database on
127.0.0.1:5432, dropped after) and on a SQLite file, and prints a markdown table.

- records/s: turns handed to ``CallLog.turn_finished`` as fast as the loop allows, until all
  are committed (the writer's sustained rate; the rest waits in the queue, then the spool).
- commit P50/P95: one batch transaction (up to ``batch_size`` records).
- loop lag: lateness of a 20 ms periodic callback (the audio path's frame clock), idle, at a
  heavy but real load (200 calls, a turn every 5 s each: 40 records/s), and at saturation.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bot.calllog import CallLog
from bot.calllog.migrate import upgrade_async
from bot.calllog.settings import CallLogSettings
from bot.pipeline.turn import STAGES, Turn

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
TICK_S = 0.02


@dataclass
class Figures:
    backend: str
    records_per_s: float
    commit_p50_ms: float
    commit_p95_ms: float
    batch_mean: float
    lag_idle: tuple[float, float]
    lag_real: tuple[float, float]
    lag_saturated: tuple[float, float]


def _turn(call_id: str, n: int) -> Turn:
    turn = Turn(
        call_id=call_id, transcript=f"where is my order number {n}", answer="It ships today."
    )
    turn.route = "llm"
    base = time.monotonic() - 1.0
    for i, stage in enumerate(STAGES):
        turn.mark(stage, base + 0.05 * i)
    turn.model_ms.update(asr=80.0, llm_first_token=120.0, tts_first_chunk=60.0)
    return turn


class Ticker:
    """A 20 ms periodic callback; records how late each tick ran."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        due = time.monotonic()
        while True:
            due += TICK_S
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            self.lags.append((time.monotonic() - due) * 1000.0)

    def start(self) -> None:
        self.lags.clear()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> tuple[float, float]:
        """P50 and P99 lateness in ms since ``start``."""
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        return _pct(self.lags, 50), _pct(self.lags, 99)


def _pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100)[q - 1]


async def measure(backend: str, url: str, spool: Path, records: int, seconds: float) -> Figures:
    # The queue holds the whole burst: this measures the writer, not the spool.
    options = CallLogSettings(max_pending=records + 1000)
    log = await CallLog.open(
        url, spool_dir=spool, node="bench", config_version="0" * 64, options=options
    )
    ticker = Ticker()
    ticker.start()
    await asyncio.sleep(seconds)
    idle = await ticker.stop()

    # A heavy real load: 200 calls, one turn every 5 s each.
    calls = [f"call-{i}" for i in range(200)]
    for c in calls:
        log.call_answered(c, caller="sip:+15550000000@pbx", callee="sip:bot@node")
    await log.writer.flush()
    ticker.start()
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        log.turn_finished(_turn(calls[n % len(calls)], n))
        n += 1
        await asyncio.sleep(1 / 40)
    real = await ticker.stop()
    await log.writer.flush()

    # Saturation: as fast as the loop can hand records over, until all are committed.
    stats = log.writer.stats
    stats.commit_ms.clear()
    written0, batches0 = stats.written + stats.replayed, stats.batches
    ticker.start()
    started = time.perf_counter()
    for i in range(records):
        log.turn_finished(_turn(calls[i % len(calls)], n + i))
        if i % 100 == 99:
            await asyncio.sleep(0)  # let the writer and the ticker run
    await log.writer.flush()  # returns when every record handed over is committed
    elapsed = time.perf_counter() - started
    saturated = await ticker.stop()
    batches = stats.batches - batches0
    written = stats.written + stats.replayed - written0
    commit = list(stats.commit_ms)
    for c in calls:
        log.call_ended(c, "bench")
    await log.close()
    if stats.spooled:
        print(f"note: {backend}: {stats.spooled} records went through the spool")
    return Figures(
        backend=backend,
        records_per_s=written / elapsed,
        commit_p50_ms=_pct(commit, 50),
        commit_p95_ms=_pct(commit, 95),
        batch_mean=written / max(1, batches),
        lag_idle=idle,
        lag_real=real,
        lag_saturated=saturated,
    )


@contextlib.contextmanager
def scratch_pg() -> Iterator[str]:
    name = f"calllog_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def run(backends: list[str], records: int, seconds: float) -> list[Figures]:
    out = []
    with tempfile.TemporaryDirectory(prefix="sb-calllog-bench-") as tmp:
        for backend in backends:
            spool = Path(tmp) / backend
            if backend == "postgresql":
                with scratch_pg() as url:
                    await upgrade_async(url)
                    out.append(await measure(backend, url, spool, records, seconds))
            else:
                url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
                await upgrade_async(url)
                out.append(await measure(backend, url, spool, records, seconds))
    return out


def table(rows: list[Figures]) -> str:
    """The figures as a markdown table."""

    def lag(v: tuple[float, float]) -> str:
        return f"{v[0]:.2f} / {v[1]:.2f}"

    lines = [
        "| backend | records/s (saturated) | batch commit P50 / P95 ms | records/batch "
        "| loop lag P50 / P99 ms: idle | at 40 rec/s | saturated |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in rows:
        lines.append(
            f"| {f.backend} | {f.records_per_s:,.0f} | {f.commit_p50_ms:.1f} / "
            f"{f.commit_p95_ms:.1f} | {f.batch_mean:.0f} | {lag(f.lag_idle)} "
            f"| {lag(f.lag_real)} | {lag(f.lag_saturated)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["postgresql", "sqlite"], action="append")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=5.0, help="idle and real-load phases")
    args = parser.parse_args()
    defaults = CallLogSettings()
    rows = asyncio.run(run(args.backend or ["postgresql", "sqlite"], args.records, args.seconds))
    print(
        f"call-log writer: batch_size={defaults.batch_size}, "
        f"window={defaults.batch_window_ms} ms, {args.records} turn records saturated"
    )
    print(table(rows))


if __name__ == "__main__":
    main()
