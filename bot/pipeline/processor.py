"""The processor base: one job per processor, frames in, frames out, interruptible work."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from bot.pipeline.frames import (
    Bridged,
    CallFinished,
    CollectNumber,
    DataFrame,
    Frame,
    Interrupt,
    LineHeld,
    SystemFrame,
)
from bot.pipeline.line_state import LineState
from bot.tasks import cancel_and_wait

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext
    from bot.profile import BotProfile

log = logging.getLogger(__name__)


class Processor:
    """A stage of the call pipeline.

    Data frames are queued and handled one at a time by ``process`` on the processor's
    own task, so a slow stage never blocks the ones before it. System frames are handled
    at once by ``process_system``. An ``Interrupt`` drops queued data frames and cancels
    the one being processed before it is passed on.

    A stage of a call's pipeline (``bot.pipeline.session.CALL_STAGES``) is made by ``build``
    from the call's ``CallContext``, and names in ``phrases`` the fixed words it may say,
    which the node synthesizes at start.

    A stage that has the line (speaking, answering, the caller on hold) says so upstream
    when that changes (``hold_line``); a stage whose rules wait while the bot talks keeps
    what it is told in ``line``.
    """

    name = "processor"
    #: Whether the bot has the line, as the stages after this one told it (``LineHeld``,
    #: upstream); None: this stage has no rule that waits on it.
    line: LineState | None = None

    @classmethod
    def build(cls, ctx: CallContext) -> Processor | None:
        """This stage for one call, or None when the call's profile (or the node) has its
        feature off."""
        raise NotImplementedError(f"{cls.__name__} is not a stage of the call pipeline")

    @classmethod
    def phrases(cls, profile: BotProfile) -> list[str]:
        """The fixed words this stage may say with ``profile``: synthesized at start, so
        that they play as fast as a cached answer."""
        return []

    def __init__(self) -> None:
        self._next: Processor | None = None
        self._prev: Processor | None = None
        self._queue: asyncio.Queue[DataFrame] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        #: What this stage last told of its hold on the line (``hold_line``).
        self._holds_line = False

    def link(self, nxt: Processor) -> Processor:
        """Send this processor's output to ``nxt``; returns ``nxt`` for chaining."""
        self._next = nxt
        nxt._prev = self
        return nxt

    def start(self) -> None:
        """Start the worker task (idempotent)."""
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._run(), name=f"{self.name}-worker")

    async def stop(self) -> None:
        """Cancel the worker and wait for it."""
        await cancel_and_wait(self._worker)
        self._worker = None

    async def put(self, frame: Frame) -> None:
        """Hand a frame to this processor."""
        if isinstance(frame, SystemFrame):
            if isinstance(frame, Interrupt):
                await self._interrupt()
            await self.process_system(frame)
        elif isinstance(frame, DataFrame):
            self._queue.put_nowait(frame)
        else:  # pragma: no cover - every frame is one or the other
            raise TypeError(f"not a system or data frame: {frame!r}")

    async def push(self, frame: Frame) -> None:
        """Pass a frame to the next processor."""
        if self._next is not None:
            await self._next.put(frame)

    async def push_upstream(self, frame: Frame) -> None:
        """Pass a frame to the previous processor, towards the caller's audio."""
        if self._prev is not None:
            await self._prev.put_upstream(frame)

    async def put_upstream(self, frame: Frame) -> None:
        """Hand this processor a frame coming upstream from the one after it."""
        if isinstance(frame, LineHeld) and self.line is not None:
            self.line.tell(frame)
        await self.process_upstream(frame)

    async def hold_line(self, held: bool) -> None:
        """Tell the stages before this one that it has the line, or has let go of it
        (``LineHeld``), when that changed since it last told them."""
        if held != self._holds_line:
            self._holds_line = held
            await self.push_upstream(LineHeld(held=held, by=self.name))

    async def process_upstream(self, frame: Frame) -> None:
        """Handle one upstream frame at once. The default passes it on (a ``Bridged``
        after ``on_bridged``); a stage that answers a kind of upstream frame stops it."""
        if isinstance(frame, Bridged):
            await self.on_bridged()
        await self.push_upstream(frame)

    async def ask_for_number(self, name: str) -> None:
        """Have the digit collector before this stage ask for collector ``name``'s number."""
        await self.push_upstream(CollectNumber(name))

    async def process(self, frame: DataFrame) -> None:
        """Handle one data frame. The default passes it on."""
        await self.push(frame)

    async def process_system(self, frame: SystemFrame) -> None:
        """Handle one system frame. The default passes it on."""
        await self.push(frame)
        if isinstance(frame, CallFinished):
            await self.stop()

    async def on_interrupt(self) -> None:
        """Hook: undo side effects of interrupted work (flush audio, reset state)."""

    async def on_bridged(self) -> None:
        """Hook: the caller has been put through to an agent (a bridged transfer) and the
        bot has left the call: stop what acts on the call by itself (clocks, prompts)."""

    async def _interrupt(self) -> None:
        dropped = 0
        while not self._queue.empty():
            self._queue.get_nowait()
            dropped += 1
        running = self._worker is not None and not self._worker.done()
        await self.stop()
        await self.on_interrupt()
        if running:
            self.start()
        if dropped:
            log.debug("%s dropped %d queued frames on interrupt", self.name, dropped)

    async def _run(self) -> None:
        while True:
            frame = await self._queue.get()
            try:
                await self.process(frame)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug in one stage must not end the call; the stage logs and moves on.
                log.exception("%s failed on %s", self.name, type(frame).__name__)


class Collector(Processor):
    """The end of a pipeline: keeps every frame it receives (tests, taps)."""

    name = "collector"

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[Frame] = []

    async def put(self, frame: Frame) -> None:
        self.frames.append(frame)
