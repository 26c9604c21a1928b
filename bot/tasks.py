"""Ending background tasks: cancel them, wait until they have ended, keep our own cancel.

A stage, a writer or a monitor that owns a task ends it in ``stop()`` by cancelling it and
waiting for it, so nothing it does outlives its owner. The task ends with its
``CancelledError``, which is the answer asked for, not an error. Written out by hand
(``task.cancel()``, then ``await`` it under ``suppress(CancelledError)``) it also swallows a
cancellation of the *waiting* task that arrives meanwhile: a call torn down while one of its
stages stops would go on as if nothing had asked it to end. ``cancel_and_wait`` waits with
``asyncio.wait``, which never raises the task's own ``CancelledError``, so the two are told
apart.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel every task given (``None`` is skipped), then wait for each to end.

    Every task is waited for, even when the caller is cancelled meanwhile or a task ends in
    an error; then the caller's own cancellation is raised, or else the first task's error
    (one a task ended with before it could be cancelled), so a clean-up is never left half
    done and nothing is lost silently.
    """
    owned = [t for t in tasks if t is not None]
    for task in owned:
        task.cancel()
    cancelled_meanwhile = False
    for task in owned:
        while not task.done():
            try:
                # wait() reports the task's end without raising its CancelledError, so a
                # CancelledError here can only be a request to end the waiting task.
                await asyncio.wait([task])
            except asyncio.CancelledError:
                cancelled_meanwhile = True
    if cancelled_meanwhile:
        raise asyncio.CancelledError
    for task in owned:
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error
