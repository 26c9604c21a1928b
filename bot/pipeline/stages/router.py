"""Carries out each turn's decision where the intent cache's ready audio answers."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.intents.choice import KEY_CHOICES
from bot.intents.confirm import KEY_ANSWERS
from bot.intents.store import CacheEntry
from bot.pipeline.deciding.decider import Decider, Hearing
from bot.pipeline.deciding.decision import Decision
from bot.pipeline.frames import (
    CallAction,
    DataFrame,
    DtmfIn,
    PlayAudio,
    QuestionWaiting,
    ResponseDone,
    Speak,
    SystemFrame,
    Transcript,
)
from bot.pipeline.processor import Processor
from bot.pipeline.rehear import Rehearing
from bot.pipeline.turn import Turn
from serve import StageTimings

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext

#: How a stage says a phrase (``CallContext.say``): its ready audio, or text to synthesize.
Say = Callable[[Turn | None, str], DataFrame]

log = logging.getLogger(__name__)


def _synthesized(turn: Turn | None, text: str) -> DataFrame:
    return Speak(turn=turn, text=text)


class Router(Processor):
    """Carries out the turn's decision where the intent cache answers, else passes it on.

    Each transcript is decided once (``bot.pipeline.deciding.decider``; the decision made in the
    caller's pause is reused when neither the words nor the conversation changed since)
    and written into the call's conversation. An intent's answer plays from its
    pre-synthesized audio (no LLM, no TTS), followed by the intent's action (transfer, hang
    up) for the call control to carry out once the answer has been heard; so does an
    intent's yes-or-no question, and a sentence of the last answer asked about. Any other
    decision goes on to the Responder with the transcript (``Transcript.decision``).
    A question about an intent may also be answered on the keypad (``KEY_ANSWERS``: 1 yes,
    2 no), and a two-choice question (``KEY_CHOICES``: 1 the first, 2 the second): the
    ``KeypadMenu`` passes those keys on while one waits (``QuestionWaiting``).
    """

    name = "router"

    def __init__(
        self,
        decider: Decider,
        *,
        rehearing: Rehearing | None = None,
        say: Say | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._decider = decider
        self._conversation = decider.conversation
        #: A second hearing of the turns that matched nothing (a two-pass recognizer).
        self._rehearing = rehearing
        #: How words not of an intent's ready audio are said (``CallContext.say``: their
        #: ready audio when they were synthesized at start).
        self._say: Say = say if say is not None else _synthesized
        #: The call's clock (a key's turn is marked on it).
        self._clock = clock

    @classmethod
    def build(cls, ctx: CallContext) -> Router | None:
        if ctx.intent_cache is None:
            return None
        return cls(ctx.decider, rehearing=ctx.rehearing, say=ctx.say, clock=ctx.clock.now)

    def confirming(self) -> bool:
        """Whether a question the keypad answers waits for its answer (about an intent, or
        a choice of two)."""
        return self._conversation.confirming()

    async def _tell_waiting(self) -> None:
        """Tell the stages before whether a question waits for its answer (the keypad
        menu passes 1 and 2 on while one does: yes and no, or the first and the second)."""
        await self.push_upstream(QuestionWaiting(self.confirming()))

    async def process_system(self, frame: SystemFrame) -> None:
        keys = KEY_ANSWERS.keys() | KEY_CHOICES.keys()
        if isinstance(frame, DtmfIn) and frame.digit in keys and self.confirming():
            await self._key(frame)
            return
        await super().process_system(frame)

    async def _key(self, frame: DtmfIn) -> None:
        """The caller answered the question on the keypad: a turn of its own, decided as
        the words would be."""
        asked = self._conversation.waiting
        assert asked is not None
        turn = Turn(call_id=asked.call_id, route="keypad", clock=self._clock)
        turn.mark("speech_end", frame.at)
        turn.mark("eot_decided", frame.at)
        if asked.kind == "choice":
            words = frame.digit  # read_choice takes the key: 1 the first, 2 the second
        else:
            words = "yes" if KEY_ANSWERS.get(frame.digit) == "yes" else "no"
        decision = await self._decider.decide(words, call_id=turn.call_id)
        await self._carry_out(turn, decision)
        await self._tell_waiting()

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, Transcript):
            await self.push(frame)
            return
        turn = frame.turn
        decision = self._reused(turn, frame.text)
        if decision is None:
            decision = await self._decider.decide(
                frame.text,
                call_id=turn.call_id,
                own_words=turn.own_words,
                continues=turn.continues is not None,
                hear=self._hearing(turn),
                model_ms=turn.model_ms,
            )
        await self._carry_out(turn, decision)
        await self._tell_waiting()

    def _reused(self, turn: Turn, text: str) -> Decision | None:
        """The decision made in the caller's pause on these same words, while nothing in
        the conversation changed since (and it lacked no second hearing)."""
        spec = turn.speculation
        if (
            spec is None
            or spec.decision is None
            or spec.transcript != text
            or spec.version != self._conversation.version
            or spec.decision.unheard
            or turn.own_words
            or turn.continues is not None
        ):
            return None
        if spec.lookup is not None:
            turn.model_ms["intent_lookup"] = spec.lookup.lookup_ms
        return spec.decision

    def _hearing(self, turn: Turn) -> Hearing | None:
        """The second recognizer's words for the turn: heard in the pause already, or
        now (None: no second recognizer)."""
        rehearing = self._rehearing
        if rehearing is None:
            return None
        spec = turn.speculation
        heard = spec.second if spec is not None else None

        async def hear() -> str | None:
            if heard is not None:
                return heard
            if not turn.audio:
                return None
            timings = StageTimings()
            second = await rehearing.hear(turn.audio, timings=timings)
            turn.model_ms.update(timings.durations_ms)
            return second

        return hear

    async def _carry_out(self, turn: Turn, decision: Decision) -> None:
        self._conversation.commit(turn, decision)
        turn.decision = decision
        if decision.heard != "first" and not decision.said_again:
            log.info("turn %d of %s: %s words %r", turn.index, turn.call_id,
                     decision.heard, decision.words)  # fmt: skip
            turn.transcript = decision.words
        if not decision.from_intent:
            await self.push(Transcript(turn=turn, text=decision.words, decision=decision))
            return
        turn.route = decision.route
        turn.intent = decision.intent
        turn.intent_score = decision.score
        turn.mark("route_decided")
        turn.answer = decision.say or ""
        entry = decision.entry
        if entry is None:  # the last answer again, or a sentence of it
            await self.push(self._again(turn, turn.answer))
            await self.push(ResponseDone(turn=turn))
            return
        if decision.kind == "ask":
            await self.push(PlayAudio(turn=turn, pcm=entry.confirm_audio, text=entry.confirm))
            await self.push(ResponseDone(turn=turn))
            return
        await self._play(turn, entry, collect=decision.collect)

    def _again(self, turn: Turn, text: str) -> DataFrame:
        """``text`` said again: an intent's ready answer or question when it is one, else
        as the call says its phrases."""
        cache = self._decider.lookups.cache
        entry = cache.entry(turn.intent) if cache is not None and turn.intent else None
        if entry is not None and text == entry.answer:
            return PlayAudio(turn=turn, pcm=entry.audio, text=text)
        if entry is not None and text == entry.confirm:
            return PlayAudio(turn=turn, pcm=entry.confirm_audio, text=text)
        return self._say(turn, text)

    async def _play(self, turn: Turn, entry: CacheEntry, *, collect: str | None = None) -> None:
        await self.push(PlayAudio(turn=turn, pcm=entry.audio, text=entry.answer))
        await self.push(ResponseDone(turn=turn))
        if collect is not None:
            # A number the intent needs ("where is my order": the order number): its
            # collector's prompt follows the answer.
            await self.ask_for_number(collect)
        if entry.action == "hangup":
            await self.push(CallAction(turn=turn, action="hangup"))
        elif entry.action == "transfer" and entry.transfer_to:
            await self.push(CallAction(turn=turn, action="transfer", target=entry.transfer_to))
        elif entry.action is not None:
            log.warning("intent %s: action %r cannot be carried out", entry.name, entry.action)
