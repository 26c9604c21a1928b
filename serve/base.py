"""The provider base class: it owns threads, timeouts, retries, error wrapping, timings, metrics.

A concrete provider implements ``_load`` and one blocking ``_..._impl`` method; everything a
caller relies on (never blocking the event loop, bounded waits, one retry of retryable errors,
``ProviderError`` instead of library exceptions, per-stage timings) lives here once.
"""

from __future__ import annotations

import abc
import asyncio
import atexit
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Executor
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

from serve.errors import ProviderError, ProviderTimeout, ProviderUnavailable, WorkDropped
from serve.priority_pool import Priority, PriorityPool, Urgency, submitted_at
from serve.timing import StageTimings

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The time a warm-up call may take. A model's first inference does one-time work (graph
#: optimization, allocations) and, with another model loading or another node starting
#: beside it on a small machine, takes far longer than a call's ``timeout_s``: a warm-up
#: is not a caller waiting, so it is not held to a caller's timeout.
WARMUP_TIMEOUT_S = 120.0
_warming: ContextVar[bool] = ContextVar("provider_warming", default=False)


@contextlib.contextmanager
def unhurried() -> Iterator[None]:
    """Provider calls made inside (and in tasks started inside) are held to
    ``WARMUP_TIMEOUT_S`` instead of each call's ``timeout_s``: work no caller waits for,
    such as a node's start-up (fixed phrases synthesized, the intents' examples embedded
    and their answers synthesized), which on a loaded machine takes longer than a turn
    may."""
    token = _warming.set(True)
    try:
        yield
    finally:
        _warming.reset(token)


SHARED_WORKERS = 2
"""Worker threads shared by all thread-safe providers: one per core on the reference machine."""

_EWMA_ALPHA = 0.2

_shared_executor: PriorityPool | None = None
_shared_executor_lock = threading.Lock()


def shared_executor() -> PriorityPool:
    """The bounded thread pool that thread-safe providers run their blocking work on.

    It takes the most urgent job first (``serve.priority_pool``): a turn that has ended
    before another call's speculative pass.
    """
    global _shared_executor  # noqa: PLW0603 - one pool per process, created on first use
    with _shared_executor_lock:
        if _shared_executor is None:
            _shared_executor = PriorityPool(SHARED_WORKERS, thread_name_prefix="serve")
            # Its threads are daemons; let a running job finish before the interpreter goes.
            atexit.register(_shared_executor.shutdown, True, cancel_futures=True)
        return _shared_executor


def _renice(nice: int) -> None:
    """Make the calling thread ``nice`` steps nicer than the process (Linux: niceness is per
    thread; threads it starts inherit it). Relative: a node started under ``nice`` keeps
    the same order between its threads (set as an absolute value, a thread niceness below
    the process's was refused, and one above it was less nice than asked)."""
    if nice:
        try:
            base = os.getpriority(os.PRIO_PROCESS, os.getpid())
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, base + nice))
        except (OSError, AttributeError):
            logger.warning("could not set thread niceness %d", nice)


@dataclass
class _Metrics:
    count: int = 0
    errors: int = 0
    timeouts: int = 0
    retries: int = 0
    #: Calls whose work was dropped before it ran, over its priority's budget.
    dropped: int = 0
    last_ms: float = 0.0
    ewma_ms: float = 0.0

    def observe(self, ms: float) -> None:
        self.last_ms = ms
        if self.ewma_ms == 0.0:  # the first sample
            self.ewma_ms = ms
        else:
            self.ewma_ms += _EWMA_ALPHA * (ms - self.ewma_ms)


class Provider(abc.ABC):
    """A model behind an async interface; subclasses implement ``_load`` and one ``_..._impl``."""

    name: str = "provider"
    thread_safe: bool = True
    """False: calls run one at a time on the provider's own thread (llama.cpp is not
    thread-safe); True: on the shared pool."""
    own_thread: bool = False
    """True: a thread-safe provider still runs on its own thread, so that its long jobs
    (synthesizing a sentence) never queue in front of the shared pool's short, urgent ones
    (transcribing the turn a caller just finished). The own thread takes its jobs by
    priority too (a one-worker ``PriorityPool``): a question synthesized in one caller's
    pause waits behind the words of a turn that has ended, and is raised with its pass
    when its own turn ends."""
    thread_nice: int = 0
    """Niceness of the provider's own thread (not thread-safe, or ``own_thread``). A
    positive value lets work on the caller's critical path (VAD, ASR, intent lookup) take
    the CPU first when every core is busy."""

    def __init__(self, *, timeout_s: float, retries: int = 1, name: str | None = None) -> None:
        if name is not None:
            self.name = name
        self.timeout_s = timeout_s
        self.retries = retries
        self.loaded = False
        self._metrics = _Metrics()
        self._own_executor: PriorityPool | None = None

    @property
    def description(self) -> str:
        """What is loaded, for logs and progress messages (e.g. "whisper tiny.en")."""
        return self.name

    @abc.abstractmethod
    def _load(self) -> None:
        """Load the model (blocking; runs on a worker thread)."""

    @abc.abstractmethod
    async def warmup(self) -> None:
        """Run one real tiny inference so that the first call is fast."""

    async def warm(self) -> None:
        """``warmup`` under ``WARMUP_TIMEOUT_S`` instead of each call's ``timeout_s``."""
        with unhurried():
            await self.warmup()

    async def load(self) -> None:
        """Load the model off the event loop; a second call does nothing."""
        if self.loaded:
            return
        logger.info("loading %s...", self.description)
        started = time.monotonic()
        try:
            await self._in_thread(self._load)
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderUnavailable(f"{self.name}: load failed: {exc!r}") from exc
        self.loaded = True
        logger.info("loaded %s in %.2fs", self.description, time.monotonic() - started)

    def metrics(self) -> dict[str, float]:
        """Cumulative counters and latency (ms; for streams, the latency to the first item)."""
        m = self._metrics
        return {
            "count": float(m.count),
            "errors": float(m.errors),
            "timeouts": float(m.timeouts),
            "retries": float(m.retries),
            "dropped": float(m.dropped),
            "last_ms": m.last_ms,
            "ewma_ms": m.ewma_ms,
        }

    def _reset_metrics(self) -> None:
        self._metrics = _Metrics()

    def _executor(self) -> Executor:
        if self.thread_safe and not self.own_thread:
            return shared_executor()
        if self._own_executor is None:
            self._own_executor = PriorityPool(
                1,
                thread_name_prefix=f"serve-{self.name}",
                initializer=partial(_renice, self.thread_nice),
            )
        return self._own_executor

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor(), fn)

    def _check_loaded(self) -> None:
        if not self.loaded:
            raise ProviderUnavailable(f"{self.name} is not loaded: await load() first")

    def _wrap(self, exc: Exception) -> ProviderError:
        """Turn a library exception into a ProviderError (not retryable unless overridden)."""
        if isinstance(exc, ProviderError):
            return exc
        return ProviderError(f"{self.name} failed: {exc!r}")

    def _limit(self) -> float:
        """A try's bound: ``timeout_s`` (``WARMUP_TIMEOUT_S`` in ``warm``)."""
        return max(self.timeout_s, WARMUP_TIMEOUT_S) if _warming.get() else self.timeout_s

    async def _next_item(self, get: Callable[[], Awaitable[T]]) -> T:
        """A stream's next item, under the bound of its first: a model that stops sending
        mid-answer (a replica lost without word yet, a hung worker) fails the stream, which
        the call hears as what it has said so far or the apology, never as a silence that
        lasts. Not retried: part of the answer may be out."""
        limit = self._limit()
        deadline = asyncio.timeout(limit)
        try:
            async with deadline:
                return await get()
        except TimeoutError:
            if not deadline.expired():
                raise
            self._metrics.timeouts += 1
            raise ProviderTimeout(
                f"{self.name} stalled: no more of the stream after {limit:g}s", retryable=False
            ) from None

    async def _attempt(self, work: Callable[[], Awaitable[T]]) -> T:
        """One try of ``work`` under ``timeout_s`` (``WARMUP_TIMEOUT_S`` in ``warm``), with
        library errors wrapped."""
        limit = self._limit()
        deadline = asyncio.timeout(limit)
        try:
            async with deadline:
                return await work()
        except ProviderError:
            raise
        except Exception as exc:
            # The abandoned thread runs on to the end of its current step: Python cannot stop
            # a thread; streams are told to stop through their stop event instead.
            if deadline.expired():
                raise ProviderTimeout(f"{self.name} timed out after {limit:g}s") from None
            raise self._wrap(exc) from exc

    def _observe(self, started: float, timings: StageTimings | None, stage: str) -> None:
        """Count the time since ``started`` in this provider's metrics and, when given, in
        ``timings`` under ``stage``."""
        ms = (time.monotonic() - started) * 1000.0
        self._metrics.observe(ms)
        if timings is not None:
            timings.record(stage, ms)

    async def _with_retries(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work`` with timeout and up to ``retries`` retries of retryable errors."""
        self._check_loaded()
        self._metrics.count += 1
        retried = 0
        while True:
            try:
                return await self._attempt(work)
            except WorkDropped:
                self._metrics.dropped += 1  # not a failure: nobody waited for it
                raise
            except ProviderError as exc:
                if isinstance(exc, ProviderTimeout):
                    self._metrics.timeouts += 1
                if not exc.retryable or retried >= self.retries:
                    self._metrics.errors += 1
                    raise
                retried += 1
                self._metrics.retries += 1
                logger.warning("%s: %s; retry %d of %d", self.name, exc, retried, self.retries)

    async def _call(
        self,
        stage: str,
        fn: Callable[[], T],
        timings: StageTimings | None,
        priority: Priority | Urgency | None = None,
    ) -> T:
        """Run blocking ``fn`` off the loop; record its duration as ``stage``.

        ``priority``: where the job stands in the shared pool's queue
        (``serve.priority_pool``): None keeps the calling context's (``NOW`` unless set);
        an ``Urgency`` runs it at that level with the level's default budget; a
        ``Priority`` as it is. Work dropped over its budget raises ``WorkDropped``; a
        provider on its own thread queues its jobs the same way, on its one worker.
        """
        started = time.monotonic()
        picked_up: list[float] = []

        def timed() -> T:
            picked_up.append(time.monotonic())
            return fn()

        def submit() -> Awaitable[T]:
            # Submitted here, inside the block: the pool reads the priority at submission.
            with submitted_at(priority):
                return asyncio.get_running_loop().run_in_executor(self._executor(), timed)

        result = await self._with_retries(submit)
        self._observe(started, timings, stage)
        if timings is not None:
            # How long it waited for a worker thread: under load, queueing behind other
            # calls' work is a separate cause from slow computing.
            timings.record(f"{stage}_wait", (picked_up[0] - started) * 1000.0)
        return result

    async def _stream(
        self,
        first_stage: str,
        total_stage: str,
        make_iter: Callable[[], Iterator[T]],
        timings: StageTimings | None,
    ) -> AsyncGenerator[T, None]:
        """Run blocking iterator ``make_iter()`` on a worker thread and yield its items.

        ``timeout_s`` and retries apply to the first item, ``timeout_s`` alone to each
        later one (``_next_item``). Closing or cancelling the consumer sets the stop event:
        the worker stops after the item it is computing.
        """
        loop = asyncio.get_running_loop()
        started = time.monotonic()

        async def open_pipe() -> tuple[_ThreadPipe[T], T | _End]:
            pipe = _ThreadPipe(loop, make_iter)
            # A stream whose job never runs (withdrawn, or dropped over its budget) ends
            # there, instead of leaving its consumer waiting out ``timeout_s``.
            pipe.watch(loop.run_in_executor(self._executor(), pipe.run))
            try:
                return pipe, await pipe.get()
            except BaseException:
                pipe.stop.set()
                raise

        pipe, item = await self._with_retries(open_pipe)
        self._observe(started, timings, first_stage)
        try:
            while not isinstance(item, _End):
                yield item
                try:
                    item = await self._next_item(pipe.get)
                except ProviderError:
                    self._metrics.errors += 1
                    raise
                except Exception as exc:
                    self._metrics.errors += 1
                    raise self._wrap(exc) from exc
        finally:
            pipe.stop.set()
        if timings is not None:
            timings.record(total_stage, (time.monotonic() - started) * 1000.0)

    async def _call_async(
        self, stage: str, work: Callable[[], Awaitable[T]], timings: StageTimings | None
    ) -> T:
        """As ``_call`` for work that is already asynchronous (a remote model's handle):
        the same timeout, retries, error wrapping, metrics and timings, no thread."""
        started = time.monotonic()
        result = await self._with_retries(work)
        self._observe(started, timings, stage)
        return result

    async def _stream_async(
        self,
        first_stage: str,
        total_stage: str,
        open_stream: Callable[[], AsyncIterator[T]],
        timings: StageTimings | None,
    ) -> AsyncGenerator[T, None]:
        """As ``_stream`` for an asynchronous stream (a remote model's): ``timeout_s`` and
        retries apply to opening it and its first item, ``timeout_s`` alone to each later
        one; closing the consumer closes it."""
        started = time.monotonic()

        async def first() -> tuple[AsyncIterator[T], T | _End]:
            items = open_stream()
            try:
                return items, await anext(items)
            except StopAsyncIteration:
                return items, _End()
            except BaseException:
                await _aclose(items)
                raise

        items, item = await self._with_retries(first)
        self._observe(started, timings, first_stage)
        try:
            while not isinstance(item, _End):
                yield item
                try:
                    item = await self._next_item(lambda: anext(items))
                except StopAsyncIteration:
                    break
                except ProviderError:
                    self._metrics.errors += 1
                    raise
                except Exception as exc:
                    self._metrics.errors += 1
                    raise self._wrap(exc) from exc
        finally:
            await _aclose(items)
        if timings is not None:
            timings.record(total_stage, (time.monotonic() - started) * 1000.0)


async def _aclose(items: AsyncIterator[Any]) -> None:
    close = getattr(items, "aclose", None)
    if close is not None:
        await close()


@dataclass(frozen=True)
class _End:
    """Marks the end of a worker's iterator; ``error`` is set when it failed."""

    error: Exception | None = None


class _ThreadPipe(Generic[T]):
    """Hands the items of a blocking iterator, run on a worker thread, to the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, make_iter: Callable[[], Iterator[T]]):
        self._loop = loop
        self._make_iter = make_iter
        self._queue: asyncio.Queue[T | _End] = asyncio.Queue()
        self.stop = threading.Event()

    async def get(self) -> T | _End:
        """The next item, or ``_End()``; re-raises what the iterator raised."""
        item = await self._queue.get()
        if isinstance(item, _End) and item.error is not None:
            raise item.error
        return item

    def watch(self, job: asyncio.Future[None]) -> None:
        """End the pipe when ``job`` (``run`` on a pool) ends without running: withdrawn by
        its priority's owner, or dropped over its budget (``WorkDropped``). ``run`` itself
        never raises: it puts its own end."""

        def ended(done: asyncio.Future[None]) -> None:
            if done.cancelled():
                self._queue.put_nowait(_End(WorkDropped("withdrawn before it ran")))
            elif (error := done.exception()) is not None and isinstance(error, Exception):
                self._queue.put_nowait(_End(error))

        job.add_done_callback(ended)

    def run(self) -> None:
        """Worker thread body: iterate until exhausted, failed or told to stop."""
        end = _End()
        try:
            iterator = self._make_iter()
            try:
                for item in iterator:
                    if self.stop.is_set() or not self._put(item):
                        break
            finally:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()
        except Exception as exc:
            end = _End(exc)
        self._put(end)

    def _put(self, item: T | _End) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the event loop is closed: nobody is listening any more
            self.stop.set()
            return False
        return True
