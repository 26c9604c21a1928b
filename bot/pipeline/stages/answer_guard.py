"""Between the language model and the speaker: only what the bot may say is spoken."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.answers.guard import Refusal, check, recap, recaps, unsaid
from bot.pipeline.frames import DataFrame, PlayAudio, ResponseDone, Speak
from bot.pipeline.processor import Processor
from bot.pipeline.turn import Turn

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext
    from bot.profile import BotProfile

log = logging.getLogger(__name__)

#: Told of each refused clause: the turn, the refusal.
RefusalSink = Callable[[Turn, Refusal], None]


class AnswerGuard(Processor):
    """Checks each generated clause (``bot.answers.guard``) before the speaker says it.

    A refused clause and the rest of its answer are dropped; the caller hears the best
    retrieved knowledge-base entry as the operator wrote it instead (less what the caller
    heard already) or, with none, the honest fallback ("I am not sure..."): never a guess
    and never silence. An unfinished last clause after a spoken one is only dropped.
    Operator-written speech (cached answers, entries, prompts) passes unchecked, except
    that an entry the caller heard already in this call is said again as a repeat of its
    sentence nearest to the question ("As I said, ...": ``recap``).
    """

    name = "answer-guard"

    def __init__(
        self,
        *,
        unsure: str,
        unsure_pcm: bytes | None = None,
        known_names: tuple[str, ...] = (),
        private: tuple[str, ...] = (),
        on_refusal: RefusalSink | None = None,
        say: Callable[[Turn | None, str], DataFrame] | None = None,
    ) -> None:
        super().__init__()
        #: How the call says a phrase: its audio when synthesized at start (the recaps,
        #: ``phrases``), else synthesized (``CallContext.say``).
        self._say = say if say is not None else lambda turn, text: Speak(turn=turn, text=text)
        self._unsure = unsure
        self._unsure_pcm = unsure_pcm
        self._names = known_names
        self._private = private
        self._on_refusal = on_refusal
        #: What the caller has heard in this call, the operator's words and the model's: a
        #: generated clause repeating it is refused, and an entry is not said twice.
        self._said: list[str] = []
        self._spoken: dict[int, list[str]] = {}
        self._closed: set[int] = set()

    @classmethod
    def build(cls, ctx: CallContext) -> AnswerGuard:
        profile = ctx.profile
        return cls(
            unsure=profile.unsure,
            unsure_pcm=ctx.prompts.find(profile.unsure),
            known_names=(profile.name,),
            private=(profile.system_prompt,),
            on_refusal=lambda turn, refusal: ctx.log_event("guard_refused", str(refusal)),
            say=ctx.say,
        )

    @classmethod
    def phrases(cls, profile: BotProfile) -> list[str]:
        """The honest fallback, and every recap of every knowledge entry (``recaps``): a
        recap synthesized when it is said came 0.6-2.4 s after the turn's decision at 8
        and 16 calls (docs/benchmarks.md)."""
        names = (profile.name,)
        return [profile.unsure, *(r for e in profile.knowledge for r in recaps(e.answer, names))]

    async def process(self, frame: DataFrame) -> None:
        if isinstance(frame, Speak) and frame.generated and frame.turn is not None:
            await self._clause(frame, frame.turn)
        elif isinstance(frame, Speak | PlayAudio) and frame.turn is not None:
            turn = frame.turn
            entry = turn.route == "knowledge" or frame.text in turn.knowledge
            if entry and frame.text in self._said:
                # The caller asks again about an entry they heard in this call: its sentence
                # nearest to the question, said as a repeat, not the whole entry as if new.
                turn.answer = recap(frame.text, turn.transcript, self._names)
                said = self._say(turn, turn.answer)
                assert isinstance(said, Speak | PlayAudio)
                frame = said
            self._said.append(frame.text)  # an answer the operator wrote
            await self.push(frame)
        elif isinstance(frame, ResponseDone):
            spoken = self._spoken.pop(frame.turn.index, None)
            if spoken is not None:
                frame.turn.answer = " ".join(spoken)
            self._closed.discard(frame.turn.index)
            await self.push(frame)
        else:
            await self.push(frame)

    async def on_interrupt(self) -> None:
        # The answer being spoken was cut off: its ``ResponseDone`` will not come.
        self._spoken.clear()
        self._closed.clear()

    async def _clause(self, frame: Speak, turn: Turn) -> None:
        if turn.index in self._closed:
            return
        spoken = self._spoken.setdefault(turn.index, [])
        refusal = check(
            frame.text,
            sources=turn.knowledge,
            caller=turn.transcript,
            said=self._said,
            final=frame.final,
            known_names=self._names,
            strict=not turn.knowledge,
            private=self._private,
            stock=(self._unsure,),
        )
        if refusal is None:
            spoken.append(frame.text)
            self._said.append(frame.text)
            await self.push(frame)
            return
        self._closed.add(turn.index)
        turn.refusals.append(str(refusal))
        log.info("turn %d of %s: clause not spoken (%s)", turn.index, turn.call_id, refusal)
        if self._on_refusal is not None:
            self._on_refusal(turn, refusal)
        if spoken and refusal.reason == "unfinished":
            return  # the answer ends at its last whole sentence
        entry = turn.knowledge[0] if turn.knowledge else None
        # The entry as the operator wrote it, less any sentence of it the caller has heard
        # already (the model may have said one before its refused clause).
        rest = "" if entry is None or entry in self._said else unsaid(entry, self._said)
        if rest:
            spoken.append(rest)
            self._said.append(entry or rest)  # the entry counts as heard
            await self.push(Speak(turn=turn, text=rest))
        else:
            spoken.append(self._unsure)
            if self._unsure_pcm is None:  # not synthesized ahead
                await self.push(Speak(turn=turn, text=self._unsure))
            else:
                await self.push(PlayAudio(turn=turn, pcm=self._unsure_pcm, text=self._unsure))
