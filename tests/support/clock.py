"""A clock the test moves: a stage's time and its waits without waiting."""

from __future__ import annotations

import asyncio
import heapq

#: Loop turns given to the tasks after each step of the clock: a stage woken from its
#: sleep runs to its next one in a turn or two (frames to a ``Collector`` are kept at once).
_TURNS = 20


async def settle() -> None:
    """Let every task that can run, run (no time passes)."""
    for _ in range(_TURNS):
        await asyncio.sleep(0)


class FakeClock:
    """The time is ``clock()``; ``sleep`` waits until ``advance`` has moved the time past the
    sleep's end. Pass ``clock`` and ``clock.sleep`` to a stage that takes them."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._made = 0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, self._made, done))
        self._made += 1
        await done

    async def advance(self, seconds: float) -> None:
        """Move the time on by ``seconds``, waking each sleeper at its own time, in order,
        and letting it run before the next one."""
        end = self.now + seconds
        await settle()
        while self._sleepers and self._sleepers[0][0] <= end:
            due, _, done = heapq.heappop(self._sleepers)
            if done.done():  # its task was cancelled
                continue
            self.now = max(self.now, due)
            done.set_result(None)
            await settle()
        self.now = end
        await settle()
