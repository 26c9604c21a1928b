"""The call's clock: what every stage reads the time from and waits on.

A call runs on ``MONOTONIC`` (``time.monotonic`` and ``asyncio.sleep``); a test may hand
the call a clock of its own (``tests/support/clock.py``) and move it itself, so that the
call's silences, fillers and timeouts pass without being waited for. A stage takes the
clock from its ``CallContext`` (``ctx.clock``) and never reads the wall clock for call
time itself. Provider timeouts (``serve``) stay real time: they bound real work.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

from bot.tasks import cancel_and_wait

T = TypeVar("T")


class Clock(Protocol):
    """A call's time (``now``, seconds on a monotonic scale) and its waits (``sleep``)."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """The real clock: ``time.monotonic`` and ``asyncio.sleep``."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


#: The clock of every call in production.
MONOTONIC = MonotonicClock()


async def wait_for(clock: Clock, awaitable: Awaitable[T], seconds: float) -> T:
    """``asyncio.wait_for`` on ``clock``: the result of ``awaitable``, or ``TimeoutError``
    (and ``awaitable`` cancelled) once ``seconds`` have passed on it."""
    if isinstance(clock, MonotonicClock):
        return await asyncio.wait_for(awaitable, seconds)
    work = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((work, timer), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # cancelled from outside: both go
        work.cancel()
        timer.cancel()
        raise
    timer.cancel()
    if work.done():
        return work.result()
    await cancel_and_wait(work)
    raise TimeoutError
