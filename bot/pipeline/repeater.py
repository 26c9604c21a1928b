"""Says the last answer again when the caller asks to hear it ("Could you repeat that?")."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.answers.repeat import asks_to_repeat
from bot.pipeline.frames import DataFrame, ResponseDone, Transcript
from bot.pipeline.processor import Processor
from bot.pipeline.turn import Turn

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext

log = logging.getLogger(__name__)

#: How a stage says a phrase (``CallContext.say``): its ready audio, or text to synthesize.
Say = Callable[[Turn | None, str], DataFrame]


class Repeater(Processor):
    """A turn that only asks to hear the last answer again ("Sorry, what was that?",
    "Pardon?") is answered with that answer, word for word, from its ready audio when it has
    one: an intent's or an entry's answer, a confirmation question, an LLM answer. The turn
    goes no further (a question the router asked still waits for its reply); with nothing
    said yet, it goes on like any other turn.

    Before, such a turn matched no intent, retrieved the entry just answered and was refused
    as a repeat ("I am not sure..."), or was answered freely by the model as small talk.
    """

    name = "repeater"

    def __init__(self, say: Say) -> None:
        super().__init__()
        self._say = say
        #: The last turn passed on: the answer it got is set on it downstream.
        self._last: Turn | None = None

    @classmethod
    def build(cls, ctx: CallContext) -> Repeater:
        return cls(ctx.say)

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, Transcript):
            await self.push(frame)
            return
        last = self._last
        if last is not None and last.answer.strip() and asks_to_repeat(frame.text):
            turn = frame.turn
            turn.route = "repeat"
            turn.answer = last.answer
            turn.intent = last.intent
            turn.mark("route_decided")
            log.debug("turn %d of %s: said again", turn.index, turn.call_id)
            await self.push(self._say(turn, last.answer))
            await self.push(ResponseDone(turn=turn))
            return
        self._last = frame.turn
        await self.push(frame)
