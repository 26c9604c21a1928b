"""A thread pool that runs the most urgent waiting job first.

The shared pool runs every call's speech work. Under load a queue forms, and first come,
first served puts a caller who has just finished speaking behind another call's guess at
what its caller might be saying. Here each job carries the ``Priority`` of the work that
submitted it (read from the submitting context, see ``priority``), and a free worker takes
the most urgent job, oldest first within a level. The work can raise its priority while its
jobs wait (the guess became the answer a caller is waiting for) or withdraw them (the
caller spoke again): a withdrawn job that has not started never runs.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar

T = TypeVar("T")


class Urgency(IntEnum):
    """How soon a job's result is needed; lower runs first."""

    #: A caller is waiting for it: the turn has ended.
    NOW = 0
    #: Work ahead of time: the caller has paused, the turn may be over.
    AHEAD = 1


class Priority:
    """The urgency of the jobs one piece of work submits, changeable while they wait."""

    def __init__(self, level: Urgency) -> None:
        self.level = level
        self.withdrawn = False
        self._futures: list[Future[Any]] = []

    def raise_to(self, level: Urgency) -> None:
        """Jobs still waiting (and later ones) run at ``level`` if it is more urgent."""
        self.level = min(self.level, level)

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


@dataclass
class _Job:
    priority: Priority
    order: int
    future: Future[Any]
    call: Callable[[], Any] = field(repr=False)

    def key(self) -> tuple[int, int]:
        return int(self.priority.level), self.order


class PriorityPool(Executor):
    """``workers`` threads taking jobs by urgency, then in order of submission."""

    def __init__(self, workers: int, *, thread_name_prefix: str = "pool") -> None:
        if workers < 1:
            raise ValueError("a pool needs at least one worker")
        self._queue: list[_Job] = []
        self._order = itertools.count()
        self._ready = threading.Condition()
        #: Jobs submitted and not finished (waiting, withdrawn but not yet skipped, running).
        self._unfinished = 0
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{thread_name_prefix}_{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        owner = current_priority()
        owner._track(future)
        if future.cancelled():
            return future
        job = _Job(owner, next(self._order), future, lambda: fn(*args, **kwargs))
        with self._ready:
            if self._closed:
                raise RuntimeError("cannot submit to a pool that is shut down")
            self._queue.append(job)
            self._unfinished += 1
            self._ready.notify()
        return future

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
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()

    def _next(self) -> _Job | None:
        with self._ready:
            while not self._queue and not self._closed:
                self._ready.wait()
            if not self._queue:
                return None  # shut down and drained
            # A linear scan: the queue holds a few jobs per call, and levels change while
            # jobs wait, which a heap would not see.
            best = min(range(len(self._queue)), key=lambda i: self._queue[i].key())
            return self._queue.pop(best)

    def _work(self) -> None:
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
