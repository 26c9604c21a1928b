"""Answers each transcript with the language model, clause by clause."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import aclosing
from typing import TYPE_CHECKING

from bot.intents.choice import all_choice_halves
from bot.knowledge.index import topic_question
from bot.pipeline.deciding.decider import Decider
from bot.pipeline.deciding.decision import Decision, Route
from bot.pipeline.frames import (
    AnswerPending,
    DataFrame,
    PlayAudio,
    ResponseDone,
    Speak,
    StageFailed,
    Transcript,
)
from bot.pipeline.language.clauses import ClauseSplitter
from bot.pipeline.processor import Processor
from bot.pipeline.turn import Turn
from bot.profile import BotProfile
from bot.tasks import cancel_and_wait
from serve import LLM, ChatMessage, ProviderError, StageTimings

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext

log = logging.getLogger(__name__)

#: Put after the caller's words when entries were retrieved for them.
FACTS_INTRO = (
    "Answer only from these facts. If they do not answer the question, say you are not "
    "sure and offer to put the caller through to a colleague."
)


#: The decisions that refuse the caller's words, as the turn's refusals record them.
REFUSED = ("no_entry", "other_topic", "injection")


class Responder(Processor):
    """Carries out the turn's decision in the operator's words, or with the LLM clause by
    clause.

    The transcript comes decided by the router (``Transcript.decision``); without an
    intent cache there is no router, and it decides here, with the same ``Decider``. The
    operator's words (a knowledge entry, small talk, a question about a topic, the honest
    "not sure", the decline) are spoken as written, from their ready audio when there is
    some. Otherwise the LLM answers with the entries retrieved for the words in front of it,
    and its clauses go out marked as generated, for the answer guard to check.

    A failing model, or one that says nothing, turns into the profile's spoken apology:
    the caller never meets silence. The history the model reads holds the caller's words
    and the operator's answers (cached intents, entries), never the model's own earlier
    answers: a small model copies them, and one wrong answer became every answer after it.
    """

    name = "responder"

    def __init__(
        self,
        llm: LLM,
        profile: BotProfile,
        *,
        apology_pcm: bytes,
        decider: Decider,
        ready: Callable[[str], bytes | None] = lambda text: None,
        on_event: Callable[[str, str], None] | None = None,
    ) -> None:
        """``ready``: the audio of an operator-written text synthesized ahead, if it was;
        ``on_event``: a call event (``lookup_asked``)."""
        super().__init__()
        self._ready = ready
        self._on_event = on_event
        self._decider = decider
        self._llm = llm
        self._profile = profile
        self._apology = apology_pcm
        self._history: list[ChatMessage] = []
        #: The turns the history holds: the caller's words and the operator's answer.
        self._turns: list[tuple[str, str | None]] = []
        self._current: Turn | None = None
        self._partial: list[str] = []
        self._prefilling: asyncio.Task[bool] | None = None
        self._open = False  # counted among the model's conversations

    @classmethod
    def build(cls, ctx: CallContext) -> Responder:
        profile = ctx.profile
        return cls(
            ctx.models.llm,
            profile,
            apology_pcm=ctx.prompts.get(profile.apology),
            decider=ctx.decider,
            # The words it declares (``phrases``) were synthesized at start: played from there.
            ready=ctx.prompts.find,
            on_event=ctx.event,
        )

    @classmethod
    def phrases(cls, profile: BotProfile) -> list[str]:
        """The operator's words it answers with: the apology, the honest fallback, the
        decline, small talk's replies, and the knowledge base's answers and topic questions
        (spoken as written, they start like a cached one: a topic question synthesized in
        the turn cost ~1.1 s at ten calls), and the halves of every two-choice question
        (a question that was synthesized in the caller's pause waited up to 0.7 s more at 16
        calls; its halves are 2 phrases a topic where its questions are a square)."""
        return [
            profile.apology,
            profile.unsure,
            profile.decline,
            *profile.small_talk.phrases(profile.name),
            *(entry.answer for entry in profile.knowledge),
            *(topic_question(entry) for entry in profile.knowledge),
            *all_choice_halves(profile),
        ]

    @property
    def busy(self) -> bool:
        """True while an answer is being generated: the responder has the line."""
        return self._current is not None

    async def process(self, frame: DataFrame) -> None:
        if isinstance(frame, Transcript):
            await self._carry_out(frame.turn, frame.decision or await self._decide(frame))
            await self.hold_line(self.busy)
        elif isinstance(frame, StageFailed):
            await self._apologise(frame.turn)
        elif isinstance(frame, ResponseDone):
            # Answered before it reached the model (a cached answer): the model must still
            # know what was said, or a follow-up question loses its context.
            self._remember(frame.turn.transcript, frame.turn.answer)
            self._prefill()
            await self.push(frame)
        else:
            await self.push(frame)

    async def _decide(self, frame: Transcript) -> Decision:
        """The decision for a transcript no router decided (no intent cache)."""
        turn = frame.turn
        decision = await self._decider.decide(
            frame.text,
            call_id=turn.call_id,
            own_words=turn.own_words,
            continues=turn.continues is not None,
            model_ms=turn.model_ms,
        )
        self._decider.conversation.commit(turn, decision)
        turn.decision = decision
        return decision

    def start(self) -> None:
        if not self._open:
            self._open = True
            self._llm.conversation_opened()
        super().start()

    async def stop(self) -> None:
        if self._open:
            self._open = False
            self._llm.conversation_closed()
        await cancel_and_wait(self._prefilling)
        await super().stop()

    def _prefill(self) -> None:
        """While the caller hears a cached answer, let the model read the conversation so
        far, so that an LLM answer to the next question starts from its new words only."""
        if self._prefilling is not None and not self._prefilling.done():
            return
        self._prefilling = asyncio.create_task(
            self._llm.prefill(self._prompt()), name="llm-prefill"
        )

    def _prompt(self, *new: ChatMessage) -> list[ChatMessage]:
        """The system prompt, the conversation so far, then ``new``."""
        system = ChatMessage(role="system", content=self._profile.system_prompt)
        return [system, *self._history, *new]

    async def on_interrupt(self) -> None:
        turn = self._current
        if turn is not None:
            turn.barged_in = True
            self._remember(turn.transcript, None)
            self._current = None
        await self.hold_line(self.busy)

    async def _carry_out(self, turn: Turn, decision: Decision) -> None:
        text = decision.words
        self._current = turn
        await self.hold_line(self.busy)
        self._partial = []
        turn.knowledge = tuple(r.entry.answer for r in decision.knowledge)
        if decision.why.startswith(REFUSED):
            turn.refusals.append(decision.why)
        if decision.kind == "generate":
            await self._answer(turn, text)
            return
        turn.intent, turn.intent_score = decision.intent, decision.score
        if decision.kind == "collect":
            await self._collect(turn, decision)
            return
        if decision.route == "confirmed":
            turn.knowledge = (decision.say or "",)
        await self._operator_answer(turn, text, decision.say or "", route=decision.route)
        if decision.collect is not None:
            await self.ask_for_number(decision.collect)

    async def _collect(self, turn: Turn, decision: Decision) -> None:
        """A request for what a lookup is for: its collector asks for the number (its
        prompt is the turn's answer), and the lookup answers after it, not the model."""
        assert decision.collect is not None
        turn.route = decision.route
        turn.answer = decision.say or ""
        turn.mark("route_decided")
        log.info("call %s: request for lookup %s, asking for %s",
                 turn.call_id, decision.intent, decision.collect)  # fmt: skip
        if self._on_event is not None:
            self._on_event("lookup_asked", decision.why)
        self._current = None
        await self.push(ResponseDone(turn=turn))
        await self.ask_for_number(decision.collect)

    async def _answer(self, turn: Turn, text: str) -> None:
        """The model's answer, clause by clause, from the entries retrieved (if any)."""
        turn.route = "llm"
        turn.mark("route_decided")
        await self.push(AnswerPending(turn=turn))  # the speaker fills a long wait
        question = text
        if turn.knowledge:
            facts = "\n".join(f"- {answer}" for answer in turn.knowledge)
            question = f"{text}\n\n{FACTS_INTRO}\n{facts}"
        messages = self._prompt(ChatMessage(role="user", content=question))
        splitter = ClauseSplitter()
        timings = StageTimings()
        spoke = False
        try:
            stream = self._llm.stream(
                messages,
                max_tokens=self._profile.llm.max_tokens,
                temperature=self._profile.llm.temperature,
                timings=timings,
            )
            async with aclosing(stream) as pieces:
                async for piece in pieces:
                    turn.mark("first_token")
                    self._partial.append(piece)
                    for clause in splitter.feed(piece):
                        spoke = True
                        await self.push(Speak(turn=turn, text=clause, generated=True))
            tail = splitter.flush()
            if tail:
                spoke = True
                await self.push(Speak(turn=turn, text=tail, generated=True, final=True))
        except ProviderError as exc:
            turn.error = f"llm: {exc}"
            log.warning("llm failed on turn %d of %s: %s", turn.index, turn.call_id, exc)
        finally:
            turn.model_ms.update(timings.durations_ms)
        answer = "".join(self._partial).strip()
        if not spoke:
            turn.route = "fallback"
            await self.push(PlayAudio(turn=turn, pcm=self._apology, text=self._profile.apology))
            answer = self._profile.apology
        turn.answer = answer
        self._remember(text, None)
        self._current = None
        await self.push(ResponseDone(turn=turn))

    async def _operator_answer(self, turn: Turn, text: str, answer: str, *, route: Route) -> None:
        """Answer with words the operator wrote: their ready audio when there is some."""
        turn.route = route
        turn.mark("route_decided")
        turn.answer = answer
        pcm = self._ready(answer)
        if pcm is None:
            await self.push(Speak(turn=turn, text=answer))
        else:
            await self.push(PlayAudio(turn=turn, pcm=pcm, text=answer))
        # An entry joins the history (a follow-up needs it); the fallbacks say nothing new.
        self._remember(text, answer if route in ("knowledge", "confirmed") else None)
        self._current = None
        await self.push(ResponseDone(turn=turn))

    async def _apologise(self, turn: Turn) -> None:
        turn.route = "fallback"
        turn.mark("route_decided")
        turn.answer = self._profile.apology
        await self.push(PlayAudio(turn=turn, pcm=self._apology, text=self._profile.apology))
        await self.push(ResponseDone(turn=turn))

    def _remember(self, user: str, answer: str | None) -> None:
        """Add a turn to the history: the caller's words, and the answer when the
        operator wrote it (``None`` for the model's own, which it must not read back)."""
        if not user:
            return
        self._turns.append((user, answer))
        turns = self._profile.llm.history_turns
        if len(self._turns) > turns:
            # Trim to half in one go rather than one turn per answer: the prompt's prefix
            # then stays the same for several turns, and llama.cpp reuses its KV cache for
            # it instead of evaluating the whole history again on every answer.
            keep = (turns + 1) // 2
            self._turns = self._turns[-keep:] if keep else []
        self._history = [
            message
            for said, answered in self._turns
            for message in (
                ChatMessage(role="user", content=said),
                *([ChatMessage(role="assistant", content=answered)] if answered else []),
            )
        ]
