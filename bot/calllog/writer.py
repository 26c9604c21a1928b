"""The writer task: batches records to the database off the audio path, spooling on outage.

``submit`` never waits: it appends to a bounded in-memory queue and returns. One asyncio
task takes batches from the queue and writes each in one transaction. When a write fails
for lack of a database (refused, timed out, dropped), that batch and everything after it
go to the spool on disk, in order; the task retries every ``retry_s``, replays the spool
front to back when the database answers, and then goes back to writing directly. A full
queue (the database far behind) also diverts to the spool rather than grow memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.access import refusal
from bot.calllog.records import Record
from bot.calllog.spool import Spool
from bot.calllog.store import write_batch
from bot.tasks import cancel_and_wait

log = logging.getLogger(__name__)

#: Errors that say "the data is wrong", not "the database is away": retrying cannot help.
_REJECTED = (sa_exc.IntegrityError, sa_exc.DataError, sa_exc.ProgrammingError)
#: Errors that say "no database right now": the records wait in the spool.
#: Where records the database refused as invalid are kept (not replayed automatically).
REJECTED_FILE = "rejected.ndjson"
_UNAVAILABLE = (sa_exc.DBAPIError, sa_exc.TimeoutError, OSError, TimeoutError)


@dataclass
class WriterStats:
    """Counters for tests, benchmarks and the log."""

    written: int = 0  # records committed straight from the queue
    spooled: int = 0  # records that went to the spool file
    replayed: int = 0  # records committed from the spool
    rejected: int = 0  # records the database refused as invalid (kept in rejected.jsonl)
    dropped: int = 0  # oldest spooled records dropped to keep the spool within its bound
    batches: int = 0
    commit_ms: list[float] = field(default_factory=list)


class RecordWriter:
    """Owns the queue, the spool and the one task that writes both to the database."""

    def __init__(
        self,
        engine: AsyncEngine,
        spool: Spool,
        *,
        batch_size: int = 200,
        batch_window_s: float = 0.05,
        max_pending: int = 10_000,
        write_timeout_s: float = 5.0,
        retry_s: float = 1.0,
        on_synced: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._engine = engine
        self._spool = spool
        self._batch_size = batch_size
        self._window_s = batch_window_s
        self._max_pending = max_pending
        self._timeout_s = write_timeout_s
        self._retry_s = retry_s
        self._on_synced = on_synced
        self._queue: deque[Record] = deque()
        # Records bound for the spool that the task has not written to the file yet.
        self._to_spool: deque[Record] = deque()
        self._spooling = False
        self._offset = 0  # bytes of the spool file already replayed
        self._next_retry = 0.0
        self._wake = asyncio.Event()
        # One drain at a time: the task's, or a caller's `flush` / `close`.
        self._lock = asyncio.Lock()
        self._inflight = 0
        self._spooling_now = 0  # records on their way to the spool file (counted on arrival)
        self._task: asyncio.Task[None] | None = None
        self.stats = WriterStats()

    @property
    def spooling(self) -> bool:
        """True while records go to the spool (database away, or spool not replayed yet)."""
        return self._spooling

    @property
    def pending(self) -> int:
        """Records accepted but not yet in the database or the spool file."""
        return len(self._queue) + len(self._to_spool) + self._inflight + self._spooling_now

    def submit(self, record: Record) -> None:
        """Hand over a record; never blocks, never raises for database trouble."""
        if self._spooling:
            self._to_spool.append(record)
        elif len(self._queue) >= self._max_pending:
            log.warning("call-log queue full (%d): spooling to disk", self._max_pending)
            self._start_spooling()
            self._next_retry = 0.0
            self._to_spool.append(record)
        else:
            self._queue.append(record)
        self._wake.set()

    def start(self, *, spooling: bool = False) -> None:
        """Start the task; ``spooling`` when the spool already holds records to replay."""
        if spooling:
            self._start_spooling()
        self._task = asyncio.create_task(self._run(), name="calllog-writer")

    async def flush(self) -> None:
        """Write everything submitted so far (to the database, or failing that the spool)."""
        async with self._lock:
            await self._drain(replay=True)

    async def close(self) -> None:
        """Stop the task after a last flush; what the database did not take stays spooled."""
        async with self._lock:  # lets a write in progress finish first
            await cancel_and_wait(self._task)
            self._task = None
            await self._drain(replay=True)

    async def _run(self) -> None:
        while True:
            timeout = self._retry_s if self._spooling else None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            if self._queue and len(self._queue) < self._batch_size and self._window_s > 0:
                await asyncio.sleep(self._window_s)  # let a batch gather
            try:
                async with self._lock:
                    await self._drain(replay=time.monotonic() >= self._next_retry)
            except asyncio.CancelledError:
                raise
            except Exception:
                # The writer must outlive any bug: what it holds is still queued or spooled.
                log.exception("call-log writer failed; retrying")
                self._start_spooling()

    async def _drain(self, *, replay: bool) -> None:
        while self._queue:
            batch = [self._queue.popleft() for _ in range(min(self._batch_size, len(self._queue)))]
            self._inflight = len(batch)
            try:
                ok = await self._write(batch)
            except BaseException:
                self._queue.extendleft(reversed(batch))  # cancelled: keep it for the next drain
                raise
            finally:
                self._inflight = 0
            if not ok:
                # This batch and everything queued after it go to the spool, ahead of
                # anything already bound there (which was submitted later).
                self._start_spooling()
                rest = batch + list(self._queue)
                self._queue.clear()
                self._to_spool.extendleft(reversed(rest))
        await self._spool_pending()
        if self._spooling and replay:
            await self._replay()

    async def _spool_pending(self) -> None:
        while self._to_spool:
            items = list(self._to_spool)
            self._to_spool.clear()
            self._spooling_now = len(items)
            try:
                rewritten, dropped = await asyncio.to_thread(
                    self._spool.append, items, self._offset
                )
            except BaseException:
                self._to_spool.extendleft(reversed(items))
                raise
            finally:
                self._spooling_now = 0
            self.stats.spooled += len(items)
            if rewritten:
                self._offset = 0  # the replayed records are gone from the file
            if dropped:
                self.stats.dropped += dropped
                log.error(
                    "call-log spool at its bound (%d bytes, SWITCHBOARD_CALLLOG__SPOOL_MAX_BYTES):"
                    " dropped the %d oldest records (%d in all)",
                    self._spool.max_bytes or 0,
                    dropped,
                    self.stats.dropped,
                )

    async def _replay(self) -> None:
        self._next_retry = time.monotonic() + self._retry_s
        while True:
            records, offset = await asyncio.to_thread(
                self._spool.read_from, self._offset, self._batch_size
            )
            if records:
                if not await self._write(records, replay=True):
                    return
                self._offset = offset
                self.stats.replayed += len(records)
                await self._spool_pending()
                continue
            if self._to_spool:
                await self._spool_pending()
                continue
            await asyncio.to_thread(self._spool.clear)
            self._offset = 0
            if self._to_spool:  # arrived while clearing: not in the file yet
                continue
            self._spooling = False
            log.warning("call-log database reachable again: spool replayed")
            if self._on_synced is not None:
                await self._on_synced()
            return

    def _start_spooling(self) -> None:
        if not self._spooling:
            self._spooling = True
            self._next_retry = time.monotonic() + self._retry_s

    async def _write(self, batch: Sequence[Record], *, replay: bool = False) -> bool:
        """Commit ``batch``; False if the database is unavailable (nothing is lost)."""
        started = time.perf_counter()
        try:
            await self._commit(batch)
        except _REJECTED as exc:
            if not await self._write_one_by_one(batch, exc):
                return False
        except _UNAVAILABLE as exc:
            if not self._spooling:
                why = refusal(exc)
                if why is not None:
                    log.error("call-log database %s; spooling until it lets us in", why)
                else:
                    log.warning("call-log database unavailable, spooling: %s", _brief(exc))
            return False
        except Exception:
            # A bug, not an outage; keeping the records (spooled) beats dropping them.
            log.exception("call-log write failed, spooling")
            return False
        self.stats.batches += 1
        self.stats.commit_ms.append((time.perf_counter() - started) * 1000.0)
        if not replay:
            self.stats.written += len(batch)
        return True

    async def _commit(self, batch: Sequence[Record]) -> None:
        async with asyncio.timeout(self._timeout_s):
            await write_batch(self._engine, batch)

    async def _write_one_by_one(self, batch: Sequence[Record], first: Exception) -> bool:
        # One bad record must not hold the rest back, nor block the spool forever.
        log.error("call-log batch refused (%s): writing records one by one", _brief(first))
        for rec in batch:
            try:
                await self._commit([rec])
            except _REJECTED as exc:
                self.stats.rejected += 1
                log.error("call-log record refused, kept aside: %s %s", rec.kind, _brief(exc))
                await asyncio.to_thread(_keep_rejected, self._spool.directory, rec)
            except _UNAVAILABLE:
                return False  # the rest is retried later; repeats are ignored
        return True


def _keep_rejected(directory: Path, rec: Record) -> None:
    with open(directory / REJECTED_FILE, "a", encoding="utf-8") as f:
        f.write(rec.to_json() + "\n")


def _brief(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc) or type(exc).__name__
    return text.splitlines()[0][:200]
