"""A thread pool that runs the most urgent waiting job first.

The shared pool runs every call's speech work. Under load a queue forms, and first come,
first served puts a caller who has just finished speaking behind another call's guess at
what its caller might be saying. Here each job carries the ``Priority`` of the work that
submitted it (read from the submitting context, see ``priority``), and a free worker takes
the most urgent job, oldest first within a level. The work can raise its priority while its
jobs wait (the guess became the answer a caller is waiting for) or withdraw them (the
caller spoke again): a withdrawn job that has not started never runs.

Work of several jobs one after the other (a pause's pass: the first hearing, the lookup, the
second hearing) may keep its place (``Priority(keeps_place=True)``): each of its jobs is
queued where its first one was, not behind every job submitted since. Within a level the
oldest work then goes first: the caller who paused first, whose turn is nearest to its end,
has the second hearing of its pass before a caller who paused later has a first hearing.

Work ahead of time has a budget (``Priority.budget_s``): a job still waiting at a level
below ``NOW`` that long after it was submitted is dropped, not left in the queue: its
future fails with ``serve.errors.WorkDropped`` (the pool's own thread drops it at the
deadline, so the caller learns it at once, not when a worker frees). A job raised to
``NOW`` before its deadline runs whatever it waited. ``DEFAULT_BUDGET_S`` is each level's
budget for work that names its level only (``Priority.of``); a ``Priority`` made directly
has none unless given one, as before budgets existed.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor, Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar

from serve.errors import WorkDropped

T = TypeVar("T")


class Urgency(IntEnum):
    """How soon a job's result is needed; lower runs first."""

    #: A caller is waiting for it: the turn has ended.
    NOW = 0
    #: Work ahead of time: the caller has paused, the turn may be over.
    AHEAD = 1
    #: Work that may turn out not to be needed at all, started only on a worker nothing
    #: more urgent waits for (a second hearing begun beside the first, in case the first
    #: leads nowhere); raised to its work's level once it is needed, else withdrawn.
    SPARE = 2


#: How long a job of each level may wait for a worker before it is dropped (None: it waits
#: as long as it takes; the provider's ``timeout_s`` still bounds its caller's wait).
#: ``AHEAD``: a pass over a pause that has not started 300 ms after it was asked for is
#: late for the decision it was for (a finished sentence ends the turn 300 ms into the
#: silence); when that turn ends, its caller transcribes it as an ended turn, at ``NOW``.
#: ``SPARE``: work that may not be needed starts on a worker free at once, or not at all: a
#: second hearing begun beside the first only pays while a core is idle, and under load it
#: would only delay other calls' turns.
DEFAULT_BUDGET_S: Mapping[Urgency, float | None] = {
    Urgency.NOW: None,
    Urgency.AHEAD: 0.3,
    Urgency.SPARE: 0.05,
}


class Priority:
    """The urgency of the jobs one piece of work submits, changeable while they wait.

    ``budget_s``: how long its jobs may wait for a worker while below ``NOW`` before they
    are dropped (``WorkDropped``); None: never dropped. ``keeps_place``: its jobs are queued
    where its first job was (work of several jobs in turn, each needing the one before);
    False: each job where it is submitted (a priority many unrelated jobs share).
    """

    def __init__(
        self, level: Urgency, *, budget_s: float | None = None, keeps_place: bool = False
    ) -> None:
        if budget_s is not None and budget_s <= 0:
            raise ValueError("a budget is a duration: more than 0 seconds")
        self.level = level
        self.budget_s = budget_s
        self.keeps_place = keeps_place
        self.withdrawn = False
        self._futures: list[Future[Any]] = []
        #: The queue order of its first job, when it keeps its place (set by the pool).
        self.place: int | None = None

    @classmethod
    def of(cls, level: Urgency, *, keeps_place: bool = False) -> Priority:
        """A new priority at ``level`` with that level's ``DEFAULT_BUDGET_S``."""
        return cls(level, budget_s=DEFAULT_BUDGET_S.get(level), keeps_place=keeps_place)

    def over_budget(self, waited_s: float) -> bool:
        """Whether a job of this priority that has waited ``waited_s`` is to be dropped."""
        return self.level != Urgency.NOW and self.budget_s is not None and waited_s >= self.budget_s

    def deadline(self, submitted: float) -> float | None:
        """When a job submitted at ``submitted`` is to be dropped (None: never, as it is)."""
        if self.level == Urgency.NOW or self.budget_s is None:
            return None
        return submitted + self.budget_s

    def raise_to(self, level: Urgency, *, budget_s: float | None = None) -> None:
        """Jobs still waiting (and later ones) run at ``level`` if it is more urgent, with
        ``budget_s`` from then on (None: never dropped) when the level changes."""
        if level < self.level:
            self.level = level
            self.budget_s = budget_s

    def withdraw(self) -> None:
        """The work is no longer wanted: its waiting jobs and any later ones never run."""
        self.withdrawn = True
        for future in self._futures:
            future.cancel()  # False for a job already running: it runs to its end
        self._futures.clear()

    def _track(self, future: Future[Any]) -> None:
        if self.withdrawn:
            future.cancel()
            return
        self._futures = [f for f in self._futures if not f.done()]
        self._futures.append(future)


_DEFAULT = Priority(Urgency.NOW)
_current: ContextVar[Priority] = ContextVar("serve_priority", default=_DEFAULT)


@contextlib.contextmanager
def priority(value: Priority) -> Iterator[Priority]:
    """Jobs submitted inside this block (in this task or thread) carry ``value``."""
    token = _current.set(value)
    try:
        yield value
    finally:
        _current.reset(token)


def current_priority() -> Priority:
    return _current.get()


def as_priority(value: Priority | Urgency | None) -> Priority | None:
    """The ``priority=`` keyword of the model interfaces as a ``Priority``: an ``Urgency``
    gets a new one with its level's default budget (``Priority.of``), a ``Priority`` is
    used as it is (its owner may raise or withdraw it), None leaves the submitting
    context's (``current_priority``: ``NOW`` unless set by ``priority``)."""
    if value is None or isinstance(value, Priority):
        return value
    return Priority.of(value)


@contextlib.contextmanager
def submitted_at(value: Priority | Urgency | None) -> Iterator[None]:
    """Jobs submitted inside run at ``value`` (see ``as_priority``); None: unchanged."""
    chosen = as_priority(value)
    if chosen is None:
        yield
        return
    with priority(chosen):
        yield


@dataclass
class _Job:
    priority: Priority
    order: int
    future: Future[Any]
    call: Callable[[], Any] = field(repr=False)
    submitted: float = 0.0

    #: Where the job queues within its level: its own order, or its work's first job's.
    place: int = 0

    def key(self) -> tuple[int, int, int]:
        return int(self.priority.level), self.place, self.order


#: The order jobs are submitted in, shared by every pool: a piece of work keeps the place of
#: its first job in whichever pool its later jobs go to.
_ORDER = itertools.count()

#: What the pool counts per level (``PriorityPool.counts``): jobs submitted; of them,
#: queued (no worker was free: the job waited), started, dropped over their budget, and
#: withdrawn before they ran; and the seconds the started ones waited, in all.
COUNTS = ("submitted", "queued", "started", "dropped", "withdrawn", "wait_seconds")


class PriorityPool(Executor):
    """``workers`` threads taking jobs by urgency, then in order of submission (of the
    work's first job, for work that keeps its place)."""

    def __init__(
        self,
        workers: int,
        *,
        thread_name_prefix: str = "pool",
        clock: Callable[[], float] = time.monotonic,
        initializer: Callable[[], None] | None = None,
    ) -> None:
        """``initializer``: run once on each worker thread before its first job (setting
        the thread's niceness, as ``ThreadPoolExecutor``'s)."""
        if workers < 1:
            raise ValueError("a pool needs at least one worker")
        self._initializer = initializer
        self._queue: list[_Job] = []
        self._order = _ORDER
        lock = threading.Lock()
        self._ready = threading.Condition(lock)
        #: Wakes the thread that drops jobs over budget (a new job, a shutdown).
        self._budgets = threading.Condition(lock)
        self._clock = clock
        #: Jobs submitted and not finished (waiting, withdrawn but not yet skipped, running).
        self._unfinished = 0
        #: Workers waiting for a job.
        self._idle = 0
        self._counts: defaultdict[tuple[str, str], float] = defaultdict(float)
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{thread_name_prefix}_{i}", daemon=True)
            for i in range(workers)
        ]
        self._threads.append(
            threading.Thread(
                target=self._drop_late, name=f"{thread_name_prefix}_budget", daemon=True
            )
        )
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        owner = current_priority()
        level = owner.level.name.lower()
        owner._track(future)
        if future.cancelled():
            with self._ready:
                self._counts[(level, "submitted")] += 1
                self._counts[(level, "withdrawn")] += 1
            return future
        with self._ready:
            if self._closed:
                raise RuntimeError("cannot submit to a pool that is shut down")
            job = _Job(owner, next(self._order), future, lambda: fn(*args, **kwargs))
            job.submitted = self._clock()
            job.place = job.order
            if owner.keeps_place:
                if owner.place is None:
                    owner.place = job.order
                job.place = owner.place
            self._counts[(level, "submitted")] += 1
            if self._idle <= self._live_waiting():
                self._counts[(level, "queued")] += 1
            self._queue.append(job)
            self._unfinished += 1
            self._ready.notify()
            self._budgets.notify()
        return future

    def counts(self) -> dict[str, dict[str, float]]:
        """Per level (``now``, ``ahead``, ``spare``), each of ``COUNTS`` since the pool started."""
        with self._ready:
            return {
                u.name.lower(): {k: self._counts.get((u.name.lower(), k), 0.0) for k in COUNTS}
                for u in Urgency
            }

    def waiting_by_level(self) -> dict[str, int]:
        """Jobs waiting for a worker now, per level (withdrawn ones excluded)."""
        with self._ready:
            out = {u.name.lower(): 0 for u in Urgency}
            for job in self._queue:
                if not job.future.cancelled():
                    out[job.priority.level.name.lower()] += 1
            return out

    def _live_waiting(self) -> int:
        return sum(1 for job in self._queue if not job.future.cancelled())

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until no job waits or runs, at most ``timeout_s``; True when idle.

        For work that should use only what the pool leaves of the CPU (an LLM on the same
        cores): it calls this between its own steps.
        """
        with self._ready:
            return self._ready.wait_for(lambda: self._unfinished == 0, timeout_s)

    def waiting(self) -> int:
        """How many jobs wait for a worker (withdrawn ones excluded)."""
        with self._ready:
            return sum(1 for job in self._queue if not job.future.cancelled())

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._ready:
            self._closed = True
            if cancel_futures:
                for job in self._queue:
                    job.future.cancel()
                self._unfinished -= len(self._queue)
                self._queue.clear()
            self._ready.notify_all()
            self._budgets.notify_all()
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()

    def _next(self) -> _Job | None:
        with self._ready:
            while True:
                self._drop_over_budget()
                if self._queue or self._closed:
                    break
                self._idle += 1
                try:
                    self._ready.wait()
                finally:
                    self._idle -= 1
            if not self._queue:
                return None  # shut down and drained
            # A linear scan: the queue holds a few jobs per call, and levels change while
            # jobs wait, which a heap would not see.
            best = min(range(len(self._queue)), key=lambda i: self._queue[i].key())
            job = self._queue.pop(best)
            level = job.priority.level.name.lower()
            if job.future.cancelled():
                self._counts[(level, "withdrawn")] += 1
            else:
                self._counts[(level, "started")] += 1
                self._counts[(level, "wait_seconds")] += self._clock() - job.submitted
            return job

    def _drop_over_budget(self) -> float | None:
        """Drop every waiting job over its budget (the lock held); the next deadline."""
        now = self._clock()
        kept: list[_Job] = []
        soonest: float | None = None
        for job in self._queue:
            waited = now - job.submitted
            if job.future.cancelled() or not job.priority.over_budget(waited):
                kept.append(job)
                deadline = job.priority.deadline(job.submitted)
                if deadline is not None and not job.future.cancelled():
                    soonest = deadline if soonest is None else min(soonest, deadline)
                continue
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(
                    WorkDropped(
                        f"dropped: waited {waited * 1000:.0f} ms for a worker, over its "
                        f"budget of {(job.priority.budget_s or 0) * 1000:.0f} ms",
                        waited_s=waited,
                    )
                )
                self._counts[(job.priority.level.name.lower(), "dropped")] += 1
            else:
                self._counts[(job.priority.level.name.lower(), "withdrawn")] += 1
            self._unfinished -= 1
        if len(kept) != len(self._queue):
            self._queue[:] = kept
            if self._unfinished == 0:
                self._ready.notify_all()
        return soonest

    def _drop_late(self) -> None:
        """The budget thread: drops each job at its deadline, whether or not a worker frees."""
        with self._budgets:
            while not self._closed:
                soonest = self._drop_over_budget()
                # A raised priority moves a deadline away, never nearer: waking at the old
                # one finds nothing to drop and waits again.
                wait = None if soonest is None else max(0.0, soonest - self._clock())
                self._budgets.wait(wait)

    def _work(self) -> None:
        if self._initializer is not None:
            self._initializer()
        while (job := self._next()) is not None:
            try:
                self._run(job)
            finally:
                with self._ready:
                    self._unfinished -= 1
                    if self._unfinished == 0:
                        self._ready.notify_all()

    @staticmethod
    def _run(job: _Job) -> None:
        if not job.future.set_running_or_notify_cancel():
            return  # withdrawn while it waited
        try:
            result = job.call()
        except BaseException as exc:
            job.future.set_exception(exc)
        else:
            job.future.set_result(result)
