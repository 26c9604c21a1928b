"""A clock the test moves: a stage's time and its waits without waiting.

``FakeClock`` is a ``bot.pipeline.clock.Clock``: hand it to a call (``CallSession(...,
clock=)``, ``MemoryCall(clock=)``) and the call's silences, fillers and timeouts pass as
the test moves it, not in real time. Before the time moves on, the loop is let run until
the call has nothing left to do now: every task that can run has run, and the work handed
to threads (the providers' ``_*_impl``, ``asyncio.to_thread``) is finished, so that the
fake time never runs ahead of real work and each run of a test goes the same way.
"""

from __future__ import annotations

import asyncio
import heapq
import weakref
from collections.abc import Callable
from typing import Any

#: Loop turns given to the tasks after each step of the clock: a stage woken from its
#: sleep runs to its next one in a turn or two (frames to a ``Collector`` are kept at once).
_TURNS = 20
#: The longest (real seconds) the clock waits for work handed to threads before a step.
_THREAD_WORK_MAX_S = 30.0


class ThreadWork:
    """Counts the work a loop hands to threads (``loop.run_in_executor``, which every
    provider call and ``asyncio.to_thread`` go through), so that it can be waited for."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.in_flight = 0
        self.submitted = 0
        #: Set while no work is in flight.
        self.idle = asyncio.Event()
        self.idle.set()
        submit = loop.run_in_executor

        def counted(executor: Any, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
            future = submit(executor, func, *args)
            self.submitted += 1
            self.in_flight += 1
            self.idle.clear()
            future.add_done_callback(self._done)
            return future

        loop.run_in_executor = counted  # type: ignore[method-assign]

    def _done(self, _: asyncio.Future[Any]) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self.idle.set()

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> ThreadWork:
        """The loop's counter (made, and the loop's ``run_in_executor`` wrapped, once)."""
        work = _WORK.get(loop)
        if work is None:
            work = _WORK[loop] = cls(loop)
        return work


_WORK: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ThreadWork] = (
    weakref.WeakKeyDictionary()
)


async def settle() -> None:
    """Let every task that can run, run, and the threads' work finish (no fake time
    passes): until a round of loop turns has started no new thread work and none is left
    in flight."""
    work = ThreadWork.of(asyncio.get_running_loop())
    while True:
        before = work.submitted
        for _ in range(_TURNS):
            await asyncio.sleep(0)
        if work.in_flight == 0 and work.submitted == before:
            return
        try:
            await asyncio.wait_for(work.idle.wait(), _THREAD_WORK_MAX_S)
        except TimeoutError:
            raise AssertionError(
                f"work handed to a thread still running after {_THREAD_WORK_MAX_S:g} s: "
                "a fake that waits in real time on a call on the test's clock?"
            ) from None


class FakeClock:
    """The time is ``now()`` (or ``clock()``); ``sleep`` waits until ``advance`` has moved
    the time past the sleep's end. Pass ``clock`` (or ``clock.now``) and ``clock.sleep`` to
    a stage that takes them, or the clock itself where a ``Clock`` is taken."""

    def __init__(self, start: float = 1000.0) -> None:
        self.time = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._made = 0

    def now(self) -> float:
        return self.time

    def __call__(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:  # as ``asyncio.sleep(0)``: a turn of the loop, no time
            await asyncio.sleep(0)
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.time + seconds, self._made, done))
        self._made += 1
        await done

    async def advance(self, seconds: float) -> None:
        """Move the time on by ``seconds``, waking each sleeper at its own time, in order,
        and letting the call settle (``settle``) before the next one."""
        end = self.time + seconds
        await settle()
        while self._sleepers and self._sleepers[0][0] <= end:
            due, _, done = heapq.heappop(self._sleepers)
            if done.done():  # its task was cancelled
                continue
            self.time = max(self.time, due)
            done.set_result(None)
            await settle()
        self.time = end
        await settle()
