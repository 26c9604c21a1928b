"""Runs the business lookup a collected number asks for, with a preamble over its wait."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.lookups.webhook import Webhooks
from bot.pipeline.frames import Collected, DataFrame, ResponseDone
from bot.pipeline.processor import Processor
from bot.pipeline.stages.digit_collector import EventSink, Say

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext
    from bot.profile import BotProfile

log = logging.getLogger(__name__)


class LookupRunner(Processor):
    """On a ``Collected`` number with a lookup: the preamble at once, then the answer.

    The preamble ("Let me look that up") goes to the speaker before the request is made,
    so the caller hears the bot while the service works; the result follows as the
    lookup's template filled from the returned fields, or its ``not_found`` / ``failed``
    words (a timeout is spoken within the lookup's ``timeout_s``). Each lookup is a
    ``lookup`` call event with its outcome and status, never the values. A barge-in or
    the caller hanging up cancels the request.
    """

    name = "lookup-runner"

    def __init__(self, webhooks: Webhooks, *, say: Say, on_event: EventSink | None = None) -> None:
        super().__init__()
        self._webhooks = webhooks
        self._say = say
        self._on_event = on_event

    @classmethod
    def build(cls, ctx: CallContext) -> LookupRunner | None:
        if ctx.webhooks is None or not ctx.profile.lookups:
            return None
        return cls(ctx.webhooks, say=ctx.say, on_event=ctx.event)

    @classmethod
    def phrases(cls, profile: BotProfile) -> list[str]:
        return [t for lk in profile.lookups for t in (lk.preamble, lk.not_found, lk.failed)]

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, Collected) or frame.lookup is None:
            await self.push(frame)
            return
        turn = frame.turn
        cfg = self._webhooks.config(frame.lookup)
        turn.route = "lookup"
        turn.mark("route_decided")
        await self.push(self._say(turn, cfg.preamble))
        result = await self._webhooks.run(frame.lookup, {frame.param: frame.value})
        turn.model_ms["lookup"] = result.elapsed_ms
        if result.kind != "found":
            turn.error = f"lookup: {result.kind} {result.detail}"
        if self._on_event is not None:
            self._on_event("lookup", f"{frame.lookup}: {result.kind} {result.detail}")
        turn.answer = f"{cfg.preamble} {result.text}"
        await self.push(self._say(turn, result.text))
        await self.push(ResponseDone(turn=turn))
