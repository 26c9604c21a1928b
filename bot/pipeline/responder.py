"""Answers each transcript with the language model, clause by clause."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import aclosing
from typing import TYPE_CHECKING

from bot.answers.injection import is_injection
from bot.answers.small_talk import is_small_talk
from bot.intents.confirm import read_answer
from bot.knowledge.index import KnowledgeIndex, Retrieved, topic_question
from bot.pipeline.clauses import ClauseSplitter
from bot.pipeline.follow_up import retrieve_following
from bot.pipeline.frames import (
    AnswerPending,
    DataFrame,
    IntentAsked,
    PlayAudio,
    ResponseDone,
    Speak,
    StageFailed,
    Transcript,
)
from bot.pipeline.processor import Processor
from bot.pipeline.turn import Route, Turn
from bot.profile import BotProfile, KnowledgeEntry
from serve import LLM, ChatMessage, ProviderError, StageTimings

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext

log = logging.getLogger(__name__)

#: Put after the caller's words when entries were retrieved for them.
FACTS_INTRO = (
    "Answer only from these facts. If they do not answer the question, say you are not "
    "sure and offer to put the caller through to a colleague."
)


class Responder(Processor):
    """Answers each transcript from the knowledge base, or with the LLM clause by clause.

    The entries retrieved for the caller's words (``bot.knowledge``) are what an answer may
    state: the best one is spoken as written when it is close enough
    (``knowledge_matching.direct_score``); otherwise the LLM answers with them in front of
    it, and its clauses go out marked as generated, for the answer guard to check.

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
        knowledge: KnowledgeIndex | None = None,
        ready: Callable[[str], bytes | None] = lambda text: None,
    ) -> None:
        """``ready``: the audio of an operator-written text synthesized ahead, if it was."""
        super().__init__()
        self._ready = ready
        #: The caller's words of the turn before, for a follow-up's retrieval.
        self._previous = ""
        self._llm = llm
        self._knowledge = knowledge
        self._profile = profile
        self._apology = apology_pcm
        self._history: list[ChatMessage] = []
        #: The turns the history holds: the caller's words and the operator's answer.
        self._turns: list[tuple[str, str | None]] = []
        self._current: Turn | None = None
        self._partial: list[str] = []
        self._prefilling: asyncio.Task[bool] | None = None
        self._open = False  # counted among the model's conversations
        #: The entry a topic question asked about on the last turn, awaiting a yes or no.
        self._topic_asked: KnowledgeEntry | None = None
        #: Topics asked about in this call: a question is never asked twice.
        self._topics_asked: set[str] = set()

    @classmethod
    def build(cls, ctx: CallContext) -> Responder:
        profile = ctx.profile
        return cls(
            ctx.models.llm,
            profile,
            apology_pcm=ctx.prompts.get(profile.apology),
            knowledge=ctx.knowledge,
            # The words it declares (``phrases``) were synthesized at start: played from there.
            ready=ctx.prompts.find,
        )

    @classmethod
    def phrases(cls, profile: BotProfile) -> list[str]:
        """The operator's words it answers with: the apology, the honest fallback, the
        decline, small talk's replies, and the knowledge base's answers and topic questions
        (spoken as written, they start like a cached one: a topic question synthesized in
        the turn cost ~1.1 s at ten calls)."""
        return [
            profile.apology,
            profile.unsure,
            profile.decline,
            *profile.small_talk.phrases(profile.name),
            *(entry.answer for entry in profile.knowledge),
            *(topic_question(entry) for entry in profile.knowledge),
        ]

    @property
    def busy(self) -> bool:
        """True while an answer is being generated."""
        return self._current is not None

    def holds_line(self) -> bool:
        return self.busy

    async def process(self, frame: DataFrame) -> None:
        if isinstance(frame, Transcript):
            if not await self._topic_reply(frame.turn, frame.text):
                await self._answer(frame.turn, frame.text)
        elif isinstance(frame, StageFailed):
            await self._apologise(frame.turn)
        elif isinstance(frame, ResponseDone):
            # Answered before it reached the model (a cached answer): the model must still
            # know what was said, or a follow-up question loses its context. A topic
            # question asked before it is no longer the one the caller would answer.
            self._topic_asked = None
            self._remember(frame.turn.transcript, frame.turn.answer)
            self._prefill()
            await self.push(frame)
        else:
            await self.push(frame)

    def start(self) -> None:
        if not self._open:
            self._open = True
            self._llm.conversation_opened()
        super().start()

    async def stop(self) -> None:
        if self._open:
            self._open = False
            self._llm.conversation_closed()
        if self._prefilling is not None:
            self._prefilling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._prefilling
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

    async def _retrieve(self, turn: Turn, text: str) -> tuple[list[Retrieved], str]:
        """The entries for ``text`` and the words they were retrieved for: the words
        alone, or joined to the words before when they read as a follow-up ("and to a PO
        box?" names its topic in the turn before; words with a request of their own are
        never joined to it)."""
        if self._knowledge is None:
            return [], text
        timings = StageTimings()
        try:
            found, asked = await retrieve_following(
                self._knowledge, text, self._previous, timings=timings
            )
        except ProviderError as exc:
            # As if nothing were retrieved: the caller hears "not sure", never a guess.
            log.warning("knowledge lookup failed on turn %d: %s", turn.index, exc)
            return [], text
        finally:
            turn.model_ms.update({f"knowledge_{k}": v for k, v in timings.durations_ms.items()})
        turn.knowledge = tuple(r.entry.answer for r in found)
        return found, asked

    async def _answer(self, turn: Turn, text: str) -> None:
        self._current = turn
        self._partial = []
        if is_injection(text):
            await self._decline(turn, text)
            return
        reply = self._profile.small_talk.reply(text, self._profile.name)
        if reply is not None:  # "Hi there.", "Thanks, bye.": the operator's fixed words
            await self._operator_answer(turn, text, reply, route="small_talk")
            return
        found, asked = await self._retrieve(turn, text)
        self._previous = text
        if self._knowledge is not None and not found and not is_small_talk(text):
            # Nothing the operator wrote covers it: say so, do not let the model guess.
            await self._unsure(turn, text)
            return
        if (
            found
            and self._knowledge is not None
            and await self._from_entries(turn, text, asked, found, self._knowledge)
        ):
            return
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

    async def _from_entries(
        self, turn: Turn, text: str, asked: str, found: list[Retrieved], index: KnowledgeIndex
    ) -> bool:
        """Answer from the retrieved entries without the model when the rules say so; False
        leaves the answer to the model, with the entries about the question only.

        An entry is given or spoken only when it is about what was asked (``on_topic``:
        "gift wrapping" is not gift cards); when none is, the caller is asked about the
        best one. The best entry at ``direct_score`` is spoken as written. In extractive
        mode (``knowledge_matching.extractive``) the model never words an answer: an entry
        below ``direct_score`` is asked about, and said on a yes."""
        about = index.about(asked, found)
        turn.knowledge = tuple(r.entry.answer for r in about)
        if not about:
            turn.refusals.append(f"other_topic: {found[0].entry.topic}")
            await self._ask_topic(turn, text, found[0].entry)
            return True
        best = about[0]
        if best.score >= index.config.direct_score:
            await self._say_entry(turn, text, best)
            return True
        if index.config.extractive:
            await self._ask_topic(turn, text, best.entry)
            return True
        return False

    async def _ask_topic(self, turn: Turn, text: str, entry: KnowledgeEntry) -> None:
        """Ask whether the caller means ``entry``'s topic ("Do you want to know about our
        gift cards?"): a yes gets the entry. Asked once a topic in a call; asked again,
        the caller hears the honest fallback."""
        if entry.topic in self._topics_asked:
            await self._operator_answer(turn, text, self._profile.unsure, route="fallback")
            return
        self._topics_asked.add(entry.topic)
        self._topic_asked = entry
        turn.intent = entry.topic
        turn.knowledge = ()
        await self._operator_answer(turn, text, topic_question(entry), route="confirm")

    async def _topic_reply(self, turn: Turn, text: str) -> bool:
        """The caller's reply to a topic question: a yes gets the entry, a no the honest
        fallback; False when the words are no reply (a new request, answered as such)."""
        entry, self._topic_asked = self._topic_asked, None
        if entry is None:
            return False
        reply = read_answer(text)
        if reply is None:
            return False
        self._current = turn
        turn.intent = entry.topic
        if reply == "yes":
            turn.knowledge = (entry.answer,)
            await self._operator_answer(turn, text, entry.answer, route="confirmed")
        else:
            await self._operator_answer(turn, text, self._profile.unsure, route="fallback")
        return True

    async def _say_entry(self, turn: Turn, text: str, best: Retrieved) -> None:
        """The operator's own words for the question: no model, nothing to check."""
        turn.intent, turn.intent_score = best.entry.topic, round(best.score, 4)
        await self._operator_answer(turn, text, best.entry.answer, route="knowledge")

    async def _unsure(self, turn: Turn, text: str) -> None:
        turn.refusals.append("no_entry: nothing in the knowledge base")
        entry = turn.unsure_intent
        if entry is not None and entry.confirm:
            # The intent the router held back: ask about it (the router reads the reply)
            # rather than say "not sure"; a "no" comes back here as the question again.
            turn.route = "confirm"
            turn.intent = entry.name
            turn.mark("route_decided")
            turn.answer = entry.confirm
            await self.push_upstream(IntentAsked(turn, entry.name))
            await self.push(PlayAudio(turn=turn, pcm=entry.confirm_audio, text=entry.confirm))
            self._current = None
            await self.push(ResponseDone(turn=turn))
            return
        await self._operator_answer(turn, text, self._profile.unsure, route="fallback")

    async def _decline(self, turn: Turn, text: str) -> None:
        """A caller trying to change the bot's instructions: a polite no, no model."""
        turn.refusals.append("injection: the caller's words")
        await self._operator_answer(turn, text, self._profile.decline, route="fallback")

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
