"""cancel_and_wait: the task ends, its cancel is not an error, the waiter's own cancel is kept."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import pytest

from bot.tasks import cancel_and_wait


async def _forever(log: list[str]) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        log.append("ended")


async def test_cancels_and_waits_for_the_end() -> None:
    log: list[str] = []
    task = asyncio.create_task(_forever(log))
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    assert task.cancelled()
    assert log == ["ended"]


async def test_none_and_finished_tasks_are_fine() -> None:
    done = asyncio.create_task(asyncio.sleep(0, result=3))
    await done
    await cancel_and_wait(None, done)
    assert done.result() == 3


async def test_every_task_is_waited_for() -> None:
    log: list[str] = []
    tasks = [asyncio.create_task(_forever(log)) for _ in range(3)]
    await asyncio.sleep(0)
    await cancel_and_wait(*tasks)
    assert log == ["ended"] * 3
    assert all(t.cancelled() for t in tasks)


async def test_an_error_the_task_ended_with_is_raised() -> None:
    async def fails() -> None:
        raise ValueError("broken")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="broken"):
        await cancel_and_wait(task)


async def _winds_down(slow_end: asyncio.Event, log: list[str]) -> None:
    """A task whose clean-up, once cancelled, takes until ``slow_end`` is set."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        await slow_end.wait()
        log.append("wound down")
        raise


async def _stop_cancelled_meanwhile(stop: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
    """``stop()`` started, then cancelled while it waits; returned once it has ended."""
    stopper = asyncio.create_task(stop())
    await asyncio.sleep(0)
    stopper.cancel()
    await asyncio.sleep(0)
    assert not stopper.done()  # still waiting for the task it stops
    return stopper


async def test_the_waiters_own_cancel_is_kept_after_the_clean_up() -> None:
    """A stop() cancelled while its task winds down still ends that task, then is cancelled."""
    log: list[str] = []
    slow_end = asyncio.Event()
    inner = asyncio.create_task(_winds_down(slow_end, log))
    await asyncio.sleep(0)

    async def stop() -> None:
        await cancel_and_wait(inner)
        log.append("stop went on")  # must not happen: stop() itself was cancelled

    stopper = await _stop_cancelled_meanwhile(stop)
    slow_end.set()
    with pytest.raises(asyncio.CancelledError):
        await stopper
    assert stopper.cancelled()
    assert log == ["wound down"]
    assert inner.cancelled()


async def test_the_hand_written_form_loses_the_waiters_cancel() -> None:
    """What the helper replaces: the same sequence with suppress() lets stop() go on."""
    log: list[str] = []
    slow_end = asyncio.Event()
    inner = asyncio.create_task(_winds_down(slow_end, log))
    await asyncio.sleep(0)

    async def stop() -> None:
        inner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await inner
        log.append("stop went on")

    stopper = await _stop_cancelled_meanwhile(stop)
    slow_end.set()
    await stopper  # not cancelled: the cancellation was swallowed
    assert log[-1] == "stop went on"
