"""Chooses who answers each transcript: the intent cache's ready audio, or the LLM."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from bot.intents.cache import IntentCache, Lookup
from bot.intents.confirm import KEY_ANSWERS, Answer, read_answer
from bot.intents.match import normalize
from bot.intents.store import CacheEntry
from bot.pipeline.end_of_turn import leads_with_answer
from bot.pipeline.follow_up import (
    about_last_answer,
    asks_again,
    follows_up,
    new_words,
    sentence_about,
)
from bot.pipeline.frames import (
    CallAction,
    DataFrame,
    Dtmf,
    Frame,
    IntentAsked,
    PlayAudio,
    QuestionWaiting,
    ResponseDone,
    Speak,
    SystemFrame,
    Transcript,
)
from bot.pipeline.processor import Processor
from bot.pipeline.rehear import Rehearing, leads_somewhere
from bot.pipeline.turn import Turn
from serve import ProviderError

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Asked:
    """A confirmation question the caller has not answered yet."""

    entry: CacheEntry
    #: What the caller said that the question was about.
    question: str
    score: float
    call_id: str
    #: Asked by the honest fallback's offer of a colleague, not about the caller's words:
    #: a "no" is passed on as said.
    offer: bool = False


class Router(Processor):
    """Answers a transcript from the intent cache when it matches, else passes it on.

    A hit plays the intent's pre-synthesized answer (no LLM, no TTS), followed by the
    intent's action (transfer, hang up) for the call control to carry out once the answer
    has been heard. A near miss the matcher is not sure of plays the intent's yes-or-no
    question instead (pre-synthesized too); on the next turn a "yes" plays the answer, a
    "no" sends the earlier question on to the Responder, and anything else is a new request.
    The question may also be answered on the keypad (``KEY_ANSWERS``: 1 yes, 2 no): the
    ``KeypadMenu`` passes those keys on while a question waits (``confirming``).
    A match held back only by one of its intent's negative examples (as sure as a hit, but
    as near to a near-miss the operator wrote) goes on to the Responder with the intent on
    the turn (``Turn.unsure_intent``): if the knowledge base has nothing either, the
    Responder asks the intent's question instead of saying it is not sure, and the reply
    comes back here like any other. An intent is asked about once in a call at most: asked
    again, the words go on as if nothing matched (a sentence the caller heard already).
    After the honest fallback (``offer``: "... I can put you through to a colleague if you
    like."), a "yes" is taken as yes to the profile's transfer intent, when the reply starts
    as one: words that go on with the caller's own sentence are a new request.
    Anything that goes wrong in the lookup (embedder failure, cache not loaded, shared store
    away too long) is a miss: the Responder answers as if there were no cache.
    """

    name = "router"

    def __init__(
        self, cache: IntentCache, offer: str | None = None, *, rehearing: Rehearing | None = None
    ) -> None:
        super().__init__()
        self._cache = cache
        self._offer = offer
        #: A second hearing of the turns that matched nothing (a two-pass recognizer).
        self._rehearing = rehearing
        self._asked: _Asked | None = None
        #: The intent handed to the responder to ask about if nothing else answers
        #: (``Turn.unsure_intent``), and whether the responder asked about it
        #: (``IntentAsked``, upstream).
        self._unsure: tuple[Turn, _Asked] | None = None
        self._unsure_asked = False
        self._previous: Turn | None = None
        #: Intents already asked about in this call: a question is never asked twice.
        self._questioned: set[str] = set()

    @classmethod
    def build(cls, ctx: CallContext) -> Router | None:
        if ctx.intent_cache is None:
            return None
        return cls(ctx.intent_cache, offer=ctx.profile.unsure, rehearing=ctx.rehearing)

    @property
    def previous_words(self) -> str | None:
        """The caller's words of the last turn this router saw: what a follow-up is joined
        to (None: no turn yet, or one without words, such as a key)."""
        previous = self._previous
        return previous.transcript if previous is not None and previous.transcript else None

    def acts_on_reply(self, text: str) -> bool:
        """Whether ``text``, said now, would be read as a yes to the question or offer
        waiting for an answer, and the yes would act (a transfer to a colleague, a
        hang-up). The speculative pass asks while the caller pauses: "Okay, okay." heard
        in "Right, okay, so | what time do you close today?" after the honest fallback's
        offer of a colleague transferred a caller who was going on."""
        asked = self._awaited(self._previous, text)
        return asked is not None and asked.entry.action is not None and read_answer(text) == "yes"

    def confirming(self) -> bool:
        """Whether a confirmation question about the caller's words waits for its answer."""
        asked = self._waiting()
        return asked is not None and not asked.offer

    def _awaited(self, previous: Turn | None, text: str) -> _Asked | None:
        """What ``text`` may answer: the question waiting for its answer, else the colleague
        the previous answer offered."""
        asked = self._waiting()
        if asked is None and previous is not None:
            asked = self._offered(previous, text)
        return asked

    def _waiting(self) -> _Asked | None:
        """The question asked on the last turn, by this router or by the responder."""
        if self._asked is not None:
            return self._asked
        if self._unsure is not None and self._unsure_asked:
            return self._unsure[1]
        return None

    async def process_upstream(self, frame: Frame) -> None:
        if isinstance(frame, IntentAsked):
            # The responder asked about the intent held back on the last turn.
            unsure = self._unsure
            self._unsure_asked = (
                unsure is not None
                and unsure[0] is frame.turn
                and unsure[1].entry.name == frame.intent
            )
            await self._tell_waiting()
            return
        await super().process_upstream(frame)

    async def _tell_waiting(self) -> None:
        """Tell the stages before whether a question waits for its answer (the keypad
        menu takes 1 and 2 as yes and no while one does)."""
        await self.push_upstream(QuestionWaiting(self.confirming()))

    async def process_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, Dtmf) and frame.digit in KEY_ANSWERS and self.confirming():
            await self._key(frame)
            return
        await super().process_system(frame)

    async def _key(self, frame: Dtmf) -> None:
        """The caller answered the question on the keypad: a turn of its own."""
        asked = self._waiting()
        self._asked = self._unsure = None
        self._unsure_asked = False
        assert asked is not None
        self._questioned.add(asked.entry.name)
        turn = Turn(call_id=asked.call_id, route="keypad")
        turn.mark("speech_end", frame.at)
        turn.mark("eot_decided", frame.at)
        self._previous = turn
        await self._reply(turn, KEY_ANSWERS[frame.digit], asked)
        await self._tell_waiting()

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, Transcript):
            await self.push(frame)
            return
        await self._route(frame)
        await self._tell_waiting()

    async def _route(self, frame: Transcript) -> None:
        turn = frame.turn
        previous, self._previous = self._previous, turn
        # The caller who went on with their request over the bot's question made no reply.
        asked = self._awaited(previous, frame.text) if turn.continues is None else None
        self._asked = self._unsure = None
        self._unsure_asked = False
        if asked is not None and not asked.offer:
            self._questioned.add(asked.entry.name)
        if asked is not None and await self._answered(turn, frame.text, asked):
            return
        spec = turn.speculation
        if spec is not None and spec.lookup is not None and spec.transcript == frame.text:
            found = spec.lookup  # looked up while the caller paused
        else:
            try:
                found = await self._cache.lookup(frame.text)
            except ProviderError as exc:
                log.warning(
                    "intent lookup failed on turn %d of %s: %s", turn.index, turn.call_id, exc
                )
                await self.push(frame)
                return
        turn.model_ms["intent_lookup"] = found.lookup_ms
        if not leads_somewhere(found.match) and turn.own_words:
            found, frame = await self._own_words(turn, frame, found)
        if found.match.route not in ("exact", "semantic"):
            found = await self._follow_up(previous, frame.text, found)
        if found.match.route == "none" and await self._from_last_answer(turn, previous, frame.text):
            return
        if self._rehearing is not None and not leads_somewhere(found.match):
            found, frame = await self._heard_again(turn, frame, found, self._rehearing)
        match, entry = found.match, found.entry
        again = entry is not None and entry.name in self._questioned
        if match.route == "confirm" and entry is not None and entry.confirm and not again:
            turn.route = "confirm"
            turn.intent = entry.name
            turn.intent_score = round(match.score, 4)
            turn.mark("route_decided")
            turn.answer = entry.confirm
            self._asked = _Asked(
                entry=entry, question=frame.text, score=match.score, call_id=turn.call_id
            )
            await self.push(PlayAudio(turn=turn, pcm=entry.confirm_audio, text=entry.confirm))
            await self.push(ResponseDone(turn=turn))
            return
        if match.intent is None or entry is None or match.route == "none":
            log.debug("turn %d: no intent (%s, %.3f)", turn.index, match.reason, match.score)
            if match.ask_if_unanswered and entry is not None and entry.confirm and not again:
                turn.unsure_intent = entry
                self._unsure = (
                    turn,
                    _Asked(
                        entry=entry, question=frame.text, score=match.score, call_id=turn.call_id
                    ),
                )
            await self.push(frame)
            return
        turn.route = match.route
        turn.intent = match.intent
        turn.intent_score = round(match.score, 4)
        turn.mark("route_decided")
        await self._play(turn, entry)

    async def _own_words(
        self, turn: Turn, frame: Transcript, found: Lookup
    ) -> tuple[Lookup, Transcript]:
        """A turn heard together with the one it went on with (``Turn.continues``) whose
        whole words lead nowhere: its own words alone, when they lead somewhere (a second
        request said over the bot's answer to the first: "Where is my order?" ... "And can
        I return it?"); else the whole, as it was."""
        words = turn.own_words
        if normalize(words) == normalize(frame.text):
            return found, frame
        return await self._instead(turn, frame, found, words, "its own words alone")

    async def _instead(
        self,
        turn: Turn,
        frame: Transcript,
        found: Lookup,
        words: str,
        why: str,
        *,
        known: Rehearing | None = None,
    ) -> tuple[Lookup, Transcript]:
        """``words`` and their lookup in place of the turn's transcript, when they lead
        somewhere (an answer, or a question about an intent), or, given ``known``, when its
        knowledge base has an entry for them; else as they were."""
        try:
            other = await self._cache.lookup(words)
        except ProviderError:
            return found, frame
        turn.model_ms["intent_lookup"] += other.lookup_ms
        if not leads_somewhere(other.match) and not (
            known is not None and await known.known(words)
        ):
            log.debug("turn %d: %s %r, no match either", turn.index, why, words)
            return found, frame
        log.info("turn %d of %s: %s %r", turn.index, turn.call_id, why, words)
        turn.transcript = words
        return other, Transcript(turn=turn, text=words)

    async def _follow_up(self, previous: Turn | None, text: str, found: Lookup) -> Lookup:
        """A short follow-up ("and the fast one?") to an answer this router gave is looked
        up again joined to the question answered: a hit on that same intent answers it
        (the intent's answer holds what the follow-up asks, or the match would miss);
        anything else leaves ``found`` as it was.

        Words asking for part of that answer again ("what was the normal price again?")
        may bring words of their own, and a joined lookup merely worth a question about
        that same intent answers them too: they ask for something the bot has just said,
        and its answer says it again. Not over a question about another intent that the
        words alone are worth, and not for an intent with an action."""
        if (
            previous is None
            or previous.intent is None
            or previous.route not in ("exact", "semantic", "confirmed")
            or not previous.transcript
        ):
            return found
        context = f"{previous.transcript} {previous.answer}"
        again = asks_again(text, context)
        # "and can I pay by card" after the order status is a request of its own.
        if not again and not follows_up(text, context):
            return found
        try:
            joined = await self._cache.lookup(f"{previous.transcript} {text}")
        except ProviderError:
            return found
        if joined.entry is None:
            return found
        if joined.match.route in ("exact", "semantic") and joined.match.intent == previous.intent:
            log.debug("follow-up to %s: %r", previous.intent, text)
            return joined
        elsewhere = found.match.route == "confirm" and found.match.best != previous.intent
        if (
            again
            and joined.match.route == "confirm"
            and joined.match.best == previous.intent
            and not elsewhere
            # An action (a transfer, a hang-up) is done on a sure match or a "yes" only.
            and joined.entry.action is None
        ):
            log.debug("asked again about %s: %r", previous.intent, text)
            return replace(
                joined, match=replace(joined.match, route="semantic", intent=previous.intent)
            )
        return found

    async def joins_last_answer(self, text: str, found: Lookup) -> bool:
        """Whether words looked up alone as ``found`` would be answered from this router's
        last answer: as a follow-up to it, or as words about part of it. The speculative
        pass asks while the caller pauses: such words lead on."""
        previous = self._previous
        followed = found.match.route not in ("exact", "semantic") and (
            await self._follow_up(previous, text, found) is not found
        )
        return followed or (
            found.match.route == "none" and _about_last_answer(previous, text) is not None
        )

    async def _from_last_answer(self, turn: Turn, previous: Turn | None, text: str) -> bool:
        """Short words about part of the answer this router just gave ("Is the label free?"
        after "... print the free return label.") that match nothing on their own or joined
        to the question: the sentence of that answer which says every one of their topic
        words, in the operator's words (route ``repeat``). False: not such words."""
        sentence = _about_last_answer(previous, text)
        if sentence is None or previous is None:
            return False
        log.debug("turn %d: about the last answer of %s: %r", turn.index, previous.intent, text)
        turn.route = "repeat"
        turn.intent = previous.intent
        turn.answer = sentence
        turn.mark("route_decided")
        await self.push(Speak(turn=turn, text=sentence))
        await self.push(ResponseDone(turn=turn))
        return True

    async def _heard_again(
        self, turn: Turn, frame: Transcript, found: Lookup, rehearing: Rehearing
    ) -> tuple[Lookup, Transcript]:
        """The turn's second transcript and its lookup, when the words the second recognizer
        heard match an intent (or are worth asking about), or the knowledge base has an
        entry for them (it has none for the first words, or they would not be heard again:
        "I like a refund." for "I like a reefer"); else the first, as they were."""
        spec = turn.speculation
        second = await rehearing.again(
            turn.audio,
            frame.text,
            heard=spec.second if spec is not None else None,
            model_ms=turn.model_ms,
        )
        if second is None:
            return found, frame
        return await self._instead(turn, frame, found, second, "heard again as", known=rehearing)

    def _offered(self, previous: Turn, text: str) -> _Asked | None:
        """The colleague the previous answer offered, as a question the caller may answer."""
        if not self._offer or not previous.answer.rstrip().endswith(self._offer.rstrip()):
            return None
        if not leads_with_answer(text):
            return None  # the caller going on with their own sentence is no reply
        entry = self._cache.transfer_entry()
        if entry is None:
            return None
        return _Asked(entry=entry, question=text, score=0.0, call_id=previous.call_id, offer=True)

    async def _answered(self, turn: Turn, text: str, asked: _Asked) -> bool:
        """Handle the caller's reply to a confirmation question; False: it was not a reply."""
        return await self._reply(turn, read_answer(text), asked)

    async def _reply(self, turn: Turn, answer: Answer, asked: _Asked) -> bool:
        if answer == "yes":
            turn.route = "confirmed"
            turn.intent = asked.entry.name
            turn.intent_score = round(asked.score, 4)
            turn.mark("route_decided")
            await self._play(turn, asked.entry)
            return True
        if answer == "no" and asked.offer:
            return False  # nothing was asked about the caller's words: answered as said
        if answer == "no":
            log.debug("turn %d: not %s; answering %r", turn.index, asked.entry.name, asked.question)
            await self.push(Transcript(turn=turn, text=asked.question))
            return True
        return False

    async def _play(self, turn: Turn, entry: CacheEntry) -> None:
        turn.answer = entry.answer
        await self.push(PlayAudio(turn=turn, pcm=entry.audio, text=entry.answer))
        await self.push(ResponseDone(turn=turn))
        if entry.action == "hangup":
            await self.push(CallAction(turn=turn, action="hangup"))
        elif entry.action == "transfer" and entry.transfer_to:
            await self.push(CallAction(turn=turn, action="transfer", target=entry.transfer_to))
        elif entry.action is not None:
            log.warning("intent %s: action %r cannot be carried out", entry.name, entry.action)


def _about_last_answer(previous: Turn | None, text: str) -> str | None:
    """The sentence of the answer given on ``previous`` that short words about part of it
    ask for (``Router._from_last_answer``); None: not such words."""
    if (
        previous is None
        or previous.intent is None
        or previous.route not in ("exact", "semantic", "confirmed")
        or not previous.answer
        or not about_last_answer(text, previous.answer)
        # The same request again ("where is my order" twice) is not about a detail.
        or not new_words(text, previous.transcript)
    ):
        return None
    return sentence_about(text, previous.answer)
