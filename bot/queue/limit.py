"""How many conversations the node can carry now: a limit that follows its model work's waits.

``SWITCHBOARD_QUEUE__MAX_ACTIVE`` is the most conversations a node holds; how many it can
serve at the turn gap depends on its CPU, which is not the same from machine to machine nor
from hour to hour (a shared host's neighbours). Past that point each further conversation
slows every other one: a 2-core node that took 16 calls while its recognizer ran at a third
of its usual speed decided turns 4-26 s after the callers stopped, and left most unanswered.
A caller in line, hearing where they are, is better served than sixteen callers talking over
a bot that answers none of them.

``step`` reads the shared model pool's counters (``PriorityPool.counts``) over one interval
and moves the limit as TCP moves its window (additive increase, multiplicative decrease):

- **busy**: the work of a turn that has ended (``now``) or of a caller's pause (``ahead``)
  waited ``busy_wait_ms`` or more for a worker on average, or a tenth or more of it
  (``BUSY_DROPPED_SHARE``) was a pause's work that waited past its budget and was dropped
  (those turns end on silence alone): the limit falls by a quarter of the conversations
  held (at least one), never below ``min_active``;
- **calm**: the waits were under a third of that and nothing was dropped, over the last
  reading and over all the work since the limit last moved, while the limit was reached
  (callers kept out by it): one more conversation, up to ``max_active``;
- **idle**: no model work in the last reading (callers between turns, at their greeting):
  a rise as when calm if the work since the limit last moved was calm, one more if there
  was none at all;
- otherwise: as it was.

A node starts at ``min_active`` and, until it is first behind, a rise on calm work doubles
the limit rather than adding one (TCP's slow start: 2, 4, 8, 16). A rise waits until every
conversation held has been heard (its first turn has ended, ``CallQueue.heard``), or for
``settle_s`` after the last rise when one has not: a conversation let in shows its load
only once its caller speaks (its greeting costs the models nothing). Without that, a burst
of 16 callers went 2, 3, 4, 6, 9, 13 in five readings of greetings, all before the first
question, and the 13 held then kept the node behind whatever the limit said; with a fixed
8 s between rises instead, a node with room to spare kept 6 of a burst of 8 in line for
half a minute. No conversation is ever cut off: a lower limit keeps new callers in line
until enough conversations end.

A pure function, tested as a table; ``LimitKeeper`` applies it to the queue every
``limit_interval_s`` and logs each change with the figures it was made on.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from bot.pipeline.clock import MONOTONIC, Clock
from bot.queue.line import CallQueue
from bot.tasks import cancel_and_wait

log = logging.getLogger("switchboard.queue.limit")

#: The pool's levels whose waits say the node is behind: a turn that has ended, a pause.
_LEVELS = ("now", "ahead")
#: The share of that work dropped over its budget at which the node is behind: one pass
#: dropped now and then is the budget doing its job, a tenth of them is a node that cannot
#: keep up.
BUSY_DROPPED_SHARE = 0.1

Counts = Mapping[str, Mapping[str, float]]
Load = Literal["busy", "calm", "steady", "idle"]


@dataclass(frozen=True, slots=True)
class Interval:
    """What the pool did between two readings of its counters."""

    started: float
    wait_s: float
    dropped: float

    @property
    def mean_wait_ms(self) -> float:
        return 1000.0 * self.wait_s / self.started if self.started else 0.0

    @property
    def dropped_share(self) -> float:
        """Of the work that started or was dropped, the share dropped."""
        total = self.started + self.dropped
        return self.dropped / total if total else 0.0

    @classmethod
    def between(cls, before: Counts, after: Counts) -> Interval:
        def delta(key: str) -> float:
            return sum(
                after.get(level, {}).get(key, 0.0) - before.get(level, {}).get(key, 0.0)
                for level in _LEVELS
            )

        return cls(started=delta("started"), wait_s=delta("wait_seconds"), dropped=delta("dropped"))


@dataclass(frozen=True, slots=True)
class LimitStep:
    """One reading: how loaded the node was, and the limit after it."""

    load: Load
    limit: int
    mean_wait_ms: float
    dropped: int


def step(
    limit: int,
    active: int,
    waiting: int,
    interval: Interval,
    *,
    min_active: int,
    max_active: int,
    busy_wait_ms: float,
    slow_start: bool = False,
    may_rise: bool = True,
    since_change: Interval | None = None,
) -> LimitStep:
    """The limit after ``interval``, with ``active`` conversations held and ``waiting``
    callers in line. A fall is read off ``interval`` alone; a rise off ``since_change``
    too (the pool's work since the limit last moved; ``interval`` when not given), which
    must be calm as well: one quiet reading between two callers' turns says nothing of
    what the conversations let in by the last rise cost. ``slow_start``: the node has not
    been behind yet, and a rise on calm work doubles the limit instead of adding one; a
    rise on no work at all is one, slow start or not. ``may_rise`` False: conversations
    held have not shown their load yet, so no rise yet."""
    wait = interval.mean_wait_ms
    dropped = int(interval.dropped)
    span = interval if since_change is None else since_change
    wanted = may_rise and (waiting > 0 or active >= limit) and limit < max_active
    # Slow start doubles on work that showed what the conversations cost; else one more.
    rise = limit if slow_start and span.started > 0 else 1
    if interval.started == 0 and dropped == 0:
        # No model work at all: as calm as it gets (callers in line still hearing the
        # welcome, conversations at their greeting).
        if wanted and _calm(span, busy_wait_ms):
            return LimitStep("idle", min(max_active, limit + rise), 0.0, 0)
        return LimitStep("idle", limit, 0.0, 0)
    if wait >= busy_wait_ms or interval.dropped_share >= BUSY_DROPPED_SHARE:
        held = min(limit, active)
        lower = max(min_active, held - max(1, math.ceil(held / 4)))
        return LimitStep("busy", min(limit, lower), wait, dropped)
    if wanted and _calm(interval, busy_wait_ms) and _calm(span, busy_wait_ms):
        return LimitStep("calm", min(max_active, limit + rise), wait, dropped)
    return LimitStep("steady", limit, wait, dropped)


def _calm(interval: Interval, busy_wait_ms: float) -> bool:
    """Work waited under a third of the busy mark on average, and none was dropped."""
    return interval.mean_wait_ms < busy_wait_ms / 3 and interval.dropped == 0


class LimitKeeper:
    """Moves ``queue``'s limit by ``step`` every ``interval_s``, reading ``counts`` (the
    shared pool's ``PriorityPool.counts``)."""

    def __init__(
        self,
        queue: CallQueue,
        counts: Callable[[], Counts],
        *,
        min_active: int,
        busy_wait_ms: float,
        interval_s: float,
        settle_s: float = 0.0,
        clock: Clock = MONOTONIC,
    ) -> None:
        self.queue = queue
        self._clock = clock
        self._counts = counts
        self.min_active = min(min_active, queue.max_active)
        # Slow start: a node starts at the fewest conversations and takes more as its
        # work stays calm, twice as many each time those held have all been heard, until
        # it is first behind; a burst of callers at the start is not all let in before
        # their load shows.
        queue.set_limit(self.min_active)
        self.slow_start = True
        self.busy_wait_ms = busy_wait_ms
        self.interval_s = interval_s
        #: The most time between two rises while a conversation held has not been heard:
        #: a conversation let in shows its load only once its caller's first turn ends (a
        #: greeting costs the models nothing); one whose caller says nothing holds a rise
        #: back no longer than this.
        self.settle_s = settle_s
        self._risen_at = -math.inf
        self._last = counts()
        #: The counters when the limit last moved: a rise is judged on all the work since.
        self._changed = self._last
        self._task: asyncio.Task[None] | None = None
        #: The last reading (None before the first).
        self.last: LimitStep | None = None

    def read(self) -> LimitStep:
        """One reading of the pool since the last; the queue's limit set from it."""
        now = self._counts()
        interval = Interval.between(self._last, now)
        since_change = Interval.between(self._changed, now)
        self._last = now
        q = self.queue
        before = q.limit
        result = step(
            before,
            q.active,
            q.waiting,
            interval,
            min_active=self.min_active,
            max_active=q.max_active,
            busy_wait_ms=self.busy_wait_ms,
            slow_start=self.slow_start,
            may_rise=q.unheard == 0 or self._clock.now() - self._risen_at >= self.settle_s,
            since_change=since_change,
        )
        if result.load == "busy":
            self.slow_start = False
        elif result.limit > before:
            self._risen_at = self._clock.now()
        self.last = result
        if result.limit != before:
            self._changed = now
            q.set_limit(result.limit)
            log.info(
                "conversations at once %d -> %d (%s: model work waited %.0f ms on average, "
                "%d dropped; %d held, %d in line)",
                before,
                result.limit,
                result.load,
                result.mean_wait_ms,
                result.dropped,
                q.active,
                q.waiting,
            )
        return result

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="queue-limit")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            await self._clock.sleep(self.interval_s)
            try:
                self.read()
            except Exception:  # a reading must never stop the keeper
                log.exception("reading the model pool's load failed")
