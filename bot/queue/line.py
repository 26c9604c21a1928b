"""``CallQueue``: conversation slots, and the callers waiting for one, first come first served.

Pure asyncio, no audio: ``enter`` gives a caller a slot or a place in line (or nothing when
the line is full); ``wait`` returns once the caller holds a slot or their time is up;
``leave`` gives the slot (or the place in line) back, and a freed slot goes to the caller
first in line at once. ``limit`` is how many slots there are now, at most ``max_active``:
``set_limit`` lowers it (no one holding a slot loses it; new callers wait) or raises it
(callers in line get the new slots at once), as ``bot.queue.limit`` reads the node's load.
Its time is ``clock`` (seconds on a monotonic scale: a ``bot.pipeline.clock.Clock``'s
``now``, the lobby's own).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from bot.pipeline.clock import MONOTONIC

TicketState = Literal["waiting", "active", "left"]


@dataclass(eq=False)
class Ticket:
    """One caller's claim: waiting in line, holding a slot, or gone."""

    call_id: str
    arrived_at: float
    state: TicketState = "waiting"
    #: When the caller got a slot (``arrived_at`` for one who never waited).
    admitted_at: float | None = None
    #: The conversation's first turn has ended: its cost is in the models' work by now
    #: (until then it is a greeting, which costs the models nothing).
    heard: bool = False
    _granted: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def queued(self) -> bool:
        """True when the caller had to wait (or still does)."""
        return self.admitted_at is None or self.admitted_at > self.arrived_at


class CallQueue:
    """``limit`` slots (at most ``max_active``) and a line of at most ``max_waiting``
    callers."""

    def __init__(
        self,
        max_active: int,
        max_waiting: int,
        *,
        clock: Callable[[], float] = MONOTONIC.now,
    ) -> None:
        if max_active < 1 or max_waiting < 0:
            raise ValueError("max_active must be at least 1 and max_waiting at least 0")
        self.max_active = max_active
        #: Slots now (``set_limit``); ``max_active`` until the node's load says otherwise.
        self.limit = max_active
        self.max_waiting = max_waiting
        self._clock = clock
        self._active: set[Ticket] = set()
        self._line: deque[Ticket] = deque()
        #: Closed (the node is stopping): a freed slot goes to nobody in line.
        self.closed = False

    @property
    def active(self) -> int:
        """Callers holding a slot."""
        return len(self._active)

    @property
    def waiting(self) -> int:
        """Callers in line (the queue depth)."""
        return len(self._line)

    @property
    def unheard(self) -> int:
        """Callers holding a slot whose first turn has not ended yet."""
        return sum(1 for t in self._active if not t.heard)

    def heard(self, ticket: Ticket) -> None:
        """``ticket``'s conversation has had its first turn."""
        ticket.heard = True

    def longest_wait(self) -> float:
        """Seconds the first caller in line has waited so far; 0.0 when nobody waits."""
        return self._clock() - self._line[0].arrived_at if self._line else 0.0

    def enter(self, call_id: str) -> Ticket | None:
        """A slot now, a place at the end of the line, or None when the line is full."""
        now = self._clock()
        ticket = Ticket(call_id=call_id, arrived_at=now)
        if not self.closed and not self._line and len(self._active) < self.limit:
            self._admit(ticket, now)
            return ticket
        if len(self._line) >= self.max_waiting:
            return None
        self._line.append(ticket)
        return ticket

    def position(self, ticket: Ticket) -> int:
        """The caller's place in line (1: next), 0 when not waiting."""
        if ticket.state != "waiting":
            return 0
        for n, t in enumerate(self._line, start=1):
            if t is ticket:
                return n
        return 0

    async def wait(self, ticket: Ticket, timeout_s: float | None = None) -> bool:
        """True once ``ticket`` holds a slot; False when ``timeout_s`` passed first (the
        caller is still in line: ``leave`` takes them out) or it left the line.
        ``timeout_s`` is real time; the lobby waits without one, its limits on its clock."""
        if ticket.state == "waiting":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ticket._granted.wait(), timeout_s)
        return ticket.state == "active"

    def leave(self, ticket: Ticket) -> None:
        """The caller is gone: out of the line, or their slot to the next in line."""
        if ticket.state == "waiting":
            with contextlib.suppress(ValueError):
                self._line.remove(ticket)
        elif ticket.state == "active":
            self._active.discard(ticket)
            self._grant()
        ticket.state = "left"
        ticket._granted.set()  # wakes a ``wait`` in progress

    def set_limit(self, limit: int) -> None:
        """``limit`` slots from now on (1 to ``max_active``): callers in line get any new
        slot at once; a lower limit takes no slot away, it admits nobody until callers
        holding slots leave below it."""
        if not 1 <= limit <= self.max_active:
            raise ValueError(f"a limit of 1 to {self.max_active} slots, not {limit}")
        self.limit = limit
        self._grant()

    def close(self) -> None:
        """No more slots for the callers in line (they are dismissed instead)."""
        self.closed = True

    def _admit(self, ticket: Ticket, now: float) -> None:
        ticket.state = "active"
        ticket.admitted_at = now
        self._active.add(ticket)
        ticket._granted.set()

    def _grant(self) -> None:
        now = self._clock()
        while not self.closed and self._line and len(self._active) < self.limit:
            self._admit(self._line.popleft(), now)
