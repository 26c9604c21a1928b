"""The shared pool's order: most urgent first, raised and withdrawn jobs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from serve.priority_pool import Priority, PriorityPool, Urgency, current_priority, priority


@pytest.fixture
def pool() -> Iterator[PriorityPool]:
    workers = PriorityPool(1, thread_name_prefix="test-pool")
    yield workers
    workers.shutdown(wait=True, cancel_futures=True)


def block(pool: PriorityPool) -> threading.Event:
    """Occupy the pool's one worker until the returned event is set."""
    release, started = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(5.0)

    pool.submit(hold)
    assert started.wait(5.0)
    return release


def test_the_most_urgent_waiting_job_runs_first(pool: PriorityPool) -> None:
    release = block(pool)
    ran: list[str] = []
    ahead = Priority(Urgency.AHEAD)
    with priority(ahead):
        first = pool.submit(ran.append, "guess 1")
        second = pool.submit(ran.append, "guess 2")
    now = pool.submit(ran.append, "ended turn")  # the default: a caller is waiting
    assert pool.waiting() == 3
    release.set()
    for future in (first, second, now):
        future.result(5.0)
    assert ran == ["ended turn", "guess 1", "guess 2"]


def test_a_raised_priority_takes_effect_while_the_job_waits(pool: PriorityPool) -> None:
    release = block(pool)
    ran: list[str] = []
    older, promoted = Priority(Urgency.AHEAD), Priority(Urgency.AHEAD)
    with priority(older):
        a = pool.submit(ran.append, "other call's guess")
    with priority(promoted):
        b = pool.submit(ran.append, "this call's guess, now its answer")
    promoted.raise_to(Urgency.NOW)
    promoted.raise_to(Urgency.AHEAD)  # never lowered again
    release.set()
    a.result(5.0), b.result(5.0)
    assert ran == ["this call's guess, now its answer", "other call's guess"]


def test_a_withdrawn_job_never_runs_and_later_ones_are_refused(pool: PriorityPool) -> None:
    release = block(pool)
    ran: list[str] = []
    guess = Priority(Urgency.AHEAD)
    with priority(guess):
        waiting = pool.submit(ran.append, "stale guess")
    guess.withdraw()
    assert waiting.cancelled()
    assert pool.waiting() == 0
    with priority(guess):
        later = pool.submit(ran.append, "lookup after the stale guess")
    assert later.cancelled()
    kept = pool.submit(ran.append, "kept")
    release.set()
    kept.result(5.0)
    assert ran == ["kept"]


def test_a_running_job_is_not_withdrawn(pool: PriorityPool) -> None:
    started, release = threading.Event(), threading.Event()
    guess = Priority(Urgency.AHEAD)

    def work() -> str:
        started.set()
        release.wait(5.0)
        return "finished"

    with priority(guess):
        running = pool.submit(work)
    assert started.wait(5.0)
    guess.withdraw()
    release.set()
    assert running.result(5.0) == "finished"


def test_errors_reach_the_caller_and_the_worker_goes_on(pool: PriorityPool) -> None:
    def fail() -> None:
        raise ValueError("bad audio")

    with pytest.raises(ValueError, match="bad audio"):
        pool.submit(fail).result(5.0)
    assert pool.submit(lambda: 42).result(5.0) == 42


def test_no_jobs_after_shutdown() -> None:
    workers = PriorityPool(2)
    workers.shutdown(wait=True)
    with pytest.raises(RuntimeError, match="shut down"):
        workers.submit(lambda: None)


async def test_priority_follows_the_asyncio_task_that_set_it(pool: PriorityPool) -> None:
    loop = asyncio.get_running_loop()
    seen: dict[str, Urgency] = {}
    guess = Priority(Urgency.AHEAD)

    async def speculative() -> None:
        with priority(guess):
            await asyncio.sleep(0)
            seen["inside"] = current_priority().level
            await loop.run_in_executor(pool, lambda: None)

    await asyncio.create_task(speculative())
    seen["outside"] = current_priority().level
    assert seen == {"inside": Urgency.AHEAD, "outside": Urgency.NOW}


async def test_a_withdrawn_job_cancels_the_awaiting_coroutine(pool: PriorityPool) -> None:
    release = block(pool)
    loop = asyncio.get_running_loop()
    guess = Priority(Urgency.AHEAD)
    with priority(guess):
        waiting = loop.run_in_executor(pool, lambda: "never")
    guess.withdraw()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()


def test_wait_idle_returns_once_no_job_waits_or_runs(pool: PriorityPool) -> None:
    assert pool.wait_idle(0.0) is True
    release = block(pool)
    queued = pool.submit(lambda: "next")
    assert pool.wait_idle(0.05) is False  # one running, one waiting
    release.set()
    assert pool.wait_idle(5.0) is True
    assert queued.result(0) == "next"


def test_a_withdrawn_job_does_not_keep_the_pool_busy(pool: PriorityPool) -> None:
    release = block(pool)
    guess = Priority(Urgency.AHEAD)
    with priority(guess):
        pool.submit(lambda: None)
    guess.withdraw()
    release.set()
    assert pool.wait_idle(5.0) is True


def test_work_that_keeps_its_place_goes_before_newer_work_at_its_level(
    pool: PriorityPool,
) -> None:
    """A pause's pass submits its jobs one after the other (hear, look up, hear again):
    each queues where the pass's first job did, so the caller who paused first is heard
    again before a caller who paused later is heard once."""
    ran: list[str] = []
    earlier = Priority(Urgency.AHEAD, keeps_place=True)
    later = Priority(Urgency.AHEAD, keeps_place=True)
    shared = Priority(Urgency.AHEAD)  # many unrelated jobs: each where it is submitted
    with priority(earlier):
        pool.submit(ran.append, "earlier pause, first hearing").result(5.0)
    release = block(pool)
    with priority(later):
        a = pool.submit(ran.append, "later pause, first hearing")
    with priority(shared):
        b = pool.submit(ran.append, "a shared job")
    with priority(earlier):
        c = pool.submit(ran.append, "earlier pause, second hearing")
    with priority(shared):
        d = pool.submit(ran.append, "a shared job, again")
    now = pool.submit(ran.append, "ended turn")
    release.set()
    for future in (a, b, c, d, now):
        future.result(5.0)
    assert ran == [
        "earlier pause, first hearing",
        "ended turn",
        "earlier pause, second hearing",
        "later pause, first hearing",
        "a shared job",
        "a shared job, again",
    ]


def test_a_place_kept_holds_across_pools() -> None:
    """The order is shared by every pool: work whose first job went to one pool keeps
    that place in another."""
    first, second = PriorityPool(1), PriorityPool(1)
    try:
        ran: list[str] = []
        older = Priority(Urgency.AHEAD, keeps_place=True)
        with priority(older):
            first.submit(ran.append, "older work, first job").result(5.0)
        release = block(second)
        with priority(Priority(Urgency.AHEAD, keeps_place=True)):
            newer = second.submit(ran.append, "newer work")
        with priority(older):
            again = second.submit(ran.append, "older work, next job")
        release.set()
        newer.result(5.0), again.result(5.0)
        assert ran == ["older work, first job", "older work, next job", "newer work"]
    finally:
        first.shutdown(cancel_futures=True)
        second.shutdown(cancel_futures=True)
