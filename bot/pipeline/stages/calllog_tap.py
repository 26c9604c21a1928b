"""A pass-through stage that tells the call log about barge-ins."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.calllog.calllog import CallLog
from bot.pipeline.frames import Frame, Interrupt
from bot.pipeline.processor import Processor

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext


class EventTap(Processor):
    """Passes every frame on at once, unchanged; reports each ``Interrupt`` as a barge-in."""

    name = "calllog-tap"

    def __init__(self, call_log: CallLog, call_id: str) -> None:
        super().__init__()
        self._log = call_log
        self._call_id = call_id

    @classmethod
    def build(cls, ctx: CallContext) -> EventTap | None:
        return None if ctx.call_log is None else cls(ctx.call_log, ctx.call_id)

    def start(self) -> None:
        """Nothing to start: every frame is passed on as it is put."""

    async def put(self, frame: Frame) -> None:
        if isinstance(frame, Interrupt):
            self._log.event(self._call_id, "barge_in", at=frame.at)
        await self.push(frame)
