"""Asks for a number right after the intents that need one ("where is my order")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.callflow import CollectorConfig
from bot.pipeline.frames import DataFrame, ResponseDone
from bot.pipeline.keypad_menu import BeginCollect
from bot.pipeline.processor import Processor

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext


class CollectTrigger(Processor):
    """Starts a collector once a cached intent listed in its ``after_intents`` has been
    answered (the answer's ``ResponseDone`` passing by): its prompt follows the answer."""

    name = "collect-trigger"

    def __init__(
        self, collectors: Sequence[CollectorConfig], begin: BeginCollect | None = None
    ) -> None:
        super().__init__()
        self._after = {intent: c.name for c in collectors for intent in c.after_intents}
        #: How a number is asked for (default: upstream, to the digit collector).
        self._begin = begin if begin is not None else self.ask_for_number

    @classmethod
    def build(cls, ctx: CallContext) -> CollectTrigger | None:
        collectors = ctx.profile.collectors
        if ctx.intent_cache is None or not any(c.after_intents for c in collectors):
            return None  # no cached intents answered, or none needs a number after it
        return cls(collectors)

    async def process(self, frame: DataFrame) -> None:
        await self.push(frame)
        if not isinstance(frame, ResponseDone):
            return
        if frame.turn.route not in ("exact", "semantic", "confirmed"):
            return
        name = self._after.get(frame.turn.intent or "")
        if name is not None:
            await self._begin(name)
