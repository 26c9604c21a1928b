"""A pass-through stage that tells the call log about barge-ins."""

from __future__ import annotations

from bot.calllog.calllog import CallLog
from bot.pipeline.frames import Frame, Interrupt
from bot.pipeline.processor import Processor


class EventTap(Processor):
    """Passes every frame on at once, unchanged; reports each ``Interrupt`` as a barge-in."""

    name = "calllog-tap"

    def __init__(self, call_log: CallLog, call_id: str) -> None:
        super().__init__()
        self._log = call_log
        self._call_id = call_id

    async def put(self, frame: Frame) -> None:
        if isinstance(frame, Interrupt):
            self._log.event(self._call_id, "barge_in", at=frame.at)
        await self.push(frame)
