"""The one place a turn is decided: from the words heard and the call's conversation to a
``Decision``.

``Decider.decide`` reads the conversation (``bot.pipeline.deciding.conversation``) and changes
nothing, so the caller's pause may call it early (``bot.pipeline.speculation``: how long the
turn waits follows from what it decides) and the end of the turn reuses that decision when
neither the words nor the conversation changed since. Its lookups go through the call's
``CallLookups``: each words are looked up once in a call.

The rule, in order (each step is the first that applies):

0. Words that only ask to hear the last answer again ("Sorry, what was that?", "Pardon?",
   ``bot.answers.repeat``) get it word for word (``said_again``: the conversation stays as
   it was, a question still waits for its reply); before any answer, the greeting.
1. A reply to the question waiting (``Conversation.waiting``): "yes" to a question about an
   intent plays its answer (and its action), "no" answers the words the question was about
   as if the intent had not matched; "yes" to a question about a knowledge entry's topic
   says the entry, "no" the honest "not sure"; "yes" to the honest fallback's offer of a
   colleague transfers; the one chosen of a two-choice question answers, "neither" gets a
   knowledge entry that answers the words as written (no second question), else the
   honest "not sure" (of two knowledge entries: "not sure", no third looked for), an
   unclear answer the question once more (``_chosen``).
   Anything else is a new request. A turn that went on with the one before, over the
   bot's answer (``continues``), is no reply.
2. The intent cache: a sure match answers, a near one is asked about (once a call), or,
   with another thing as near, offered with it in one question (``_choice``: the rule).
   A semantic match of an intent with an action (a transfer, a hang-up) on words a
   knowledge entry answers directly gets that entry, and no action (``_asked_not_acted``:
   "Can I talk to you over chat on the website?" asks about the chat).
   Words that match nothing are tried as a turn's own words (a second request said over
   the bot), as a follow-up joined to the question answered before ("and the fast one?",
   unless an answer before that one said the words it did not), as a detail of the last
   answer ("is the label free?"), and against the answers given earlier in the call
   (``_recall``: "can I get that for free?"). Words that match nothing surely and ask for
   part of an answer of the call again get the sentences of the latest answer that give
   it (``_asked_again``: "how long was it again?" after the warranty, a question about
   returns before), never a guess: when no answer said it, the decision goes on and
   answers with none of them. Words that still lead nowhere are tried, where worth it, in
   the second recognizer's words (``hear``: "I like a refund." for "I like a reefer").
3. The knowledge base, as the operator wrote it: an attempt at the bot's instructions is
   declined, small talk gets its fixed reply, an entry about the words is said as written
   (or asked about when it is less close, in extractive mode, or offered with the runner-up
   entry about the words when that is as near: ``_topic_choice``), an entry near in meaning but
   about another thing is asked about; nothing: an intent held back only by a negative
   example is asked about, else the honest "not sure". What is left goes to the model with
   the entries about the words.

Then the operator's lookups (``_lookups``): an intent's answer that a collector follows
(its ``after_intents``) asks for that number after it; any decision the intent cache's
audio does not carry out (steps 1 and 3, but a decline) on words that hold every word of a
lookup's ``purpose`` asks for the lookup's number instead (kind ``collect``): the model has
no access to the operator's systems and could only guess.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from bot.answers.injection import is_injection
from bot.answers.repeat import asks_to_repeat
from bot.answers.small_talk import is_small_talk, small_talk_kind
from bot.intents.choice import Choosable, choice_question, choice_topic, read_choice
from bot.intents.confirm import asks_for_more, goes_on, read_answer, read_more, says_done
from bot.intents.match import Match, normalize
from bot.knowledge.index import topic_question
from bot.pipeline.deciding.conversation import Answered, Conversation, Said
from bot.pipeline.deciding.decision import Asked, Decision, Heard, Option
from bot.pipeline.language.end_of_turn import leads_with_answer
from bot.pipeline.language.follow_up import (
    about_last_answer,
    asks_again,
    follows_up,
    new_words,
    sentence_about,
    sentences_asked,
    unsaid,
)
from bot.pipeline.rehear import (
    ends_call,
    leads_somewhere,
    other_words,
    same_answer,
    worth_hearing_again,
)
from bot.profile import IntentConfig
from serve import ProviderError

if TYPE_CHECKING:
    from bot.callflow import CollectorConfig
    from bot.intents.cache import Lookup
    from bot.intents.store import CacheEntry
    from bot.knowledge.index import Retrieved
    from bot.pipeline.deciding.call_lookups import CallLookups
    from bot.profile import BotProfile, KnowledgeEntry

log = logging.getLogger(__name__)

#: The second recognizer's words for the turn's audio, asked for only where the first
#: words lead nowhere (None: no second hearing to be had).
Hearing = Callable[[], Awaitable[str | None]]

#: Routes whose answer a follow-up may be joined to.
_ANSWERED = ("exact", "semantic", "confirmed")
#: The two-choice question (``Decider._choice``): the runner-up intent is offered with the
#: best when it scores within this of it...
CHOICE_LEAD = 0.1
#: ...and the matcher's reasons for not answering that leave both worth offering (not a
#: negative example's or a background line's veto: those say the words are about
#: something else).
_NEAR = ("below threshold", "margin too small")
#: The two-choice question between two knowledge entries (``Decider._topic_choice``): the
#: runner-up entry about the words is offered with the best when it scores within this of
#: it: the intents' lead (the answer evaluation's tuning split gave no reason for another).
TOPIC_CHOICE_LEAD = CHOICE_LEAD


class Decider:
    """Decides one call's turns."""

    def __init__(
        self,
        lookups: CallLookups,
        profile: BotProfile,
        conversation: Conversation | None = None,
    ) -> None:
        self.lookups = lookups
        self.conversation = conversation if conversation is not None else Conversation()
        self._profile = profile
        #: The collector asking for a number after an intent's answer.
        self._after = {i: c.name for c in profile.collectors for i in c.after_intents}
        feeding = {c.lookup: c for c in profile.collectors if c.lookup is not None}
        #: (lookup, purpose phrase, the collector feeding it), for each purpose.
        self._purposes = [
            (lookup.name, phrase, feeding[lookup.name])
            for lookup in profile.lookups
            for phrase in lookup.purpose
            if lookup.name in feeding
        ]

    async def decide(
        self,
        words: str,
        *,
        call_id: str,
        own_words: str = "",
        continues: bool = False,
        hear: Hearing | None = None,
        model_ms: dict[str, float] | None = None,
    ) -> Decision:
        """The decision for ``words`` in the conversation as it stands (nothing changes)."""
        again = self._said_again(words)
        if again is not None:
            return again
        decision = await self._decide(
            words,
            call_id=call_id,
            own_words=own_words,
            continues=continues,
            hear=hear,
            model_ms=model_ms,
        )
        return self._lookups(decision)

    def _said_again(self, words: str) -> Decision | None:
        """Step 0: the last answer (or question) again, when the words only ask for it;
        before any, the greeting ("Pardon?" from a caller who missed it)."""
        if not asks_to_repeat(words):
            return None
        previous = self.conversation.last
        if previous is None:
            greeting = self._profile.greeting
            if not greeting.strip():
                return None
            return Decision("answer", "repeat", words, "asked to hear the greeting again",
                            say=greeting, said_again=True)  # fmt: skip
        if not previous.answer.strip():
            return None
        return Decision(
            "answer",
            "repeat",
            words,
            "asked to hear the last answer again",
            intent=previous.intent,
            say=previous.answer,
            asks=self.conversation.waiting,
            said_again=True,
        )

    def _lookups(self, decision: Decision) -> Decision:
        """The operator's lookups after the rule: a number asked for after an intent's
        answer, or in place of a decision the lookup answers better (module docstring)."""
        if decision.kind == "answer" and decision.route in _ANSWERED:
            after = self._after.get(decision.intent or "")
            return decision if after is None else replace(decision, collect=after)
        if decision.from_intent or decision.kind == "decline" or not self._purposes:
            return decision
        found = _purpose(decision.words, self._purposes)
        if found is None:
            return decision
        lookup, phrase, collector = found
        return Decision(
            "collect",
            "ask",
            decision.words,
            f'{lookup}: "{phrase}"',
            heard=decision.heard,
            intent=lookup,
            say=collector.prompt,
            collect=collector.name,
        )

    async def _decide(
        self,
        words: str,
        *,
        call_id: str,
        own_words: str,
        continues: bool,
        hear: Hearing | None,
        model_ms: dict[str, float] | None,
    ) -> Decision:
        spent: dict[str, float] = {} if model_ms is None else model_ms
        previous = self.conversation.last
        waiting = None if continues else self._waiting(previous, words)
        if waiting is not None:
            reply = await self._reply(words, waiting)
            if reply is not None:
                return reply
        if self.lookups.cache is None:
            return await self._knowledge(words)
        try:
            found = await self.lookups.intent(words)
        except ProviderError as exc:
            log.warning("intent lookup failed for %s: %s", call_id, exc)
            return await self._knowledge(words, why="the intent lookup failed")
        spent["intent_lookup"] = found.lookup_ms
        heard: Heard = "first"
        #: The answers of the call that the words ask for part of again, and that did not
        #: say it: none of them is the answer (nor asked about) on these words.
        unsaid_by: set[str] = set()
        if not leads_somewhere(found.match) and own_words:
            found, words, heard = await self._instead(found, words, own_words, "own", heard)
        if found.match.route not in ("exact", "semantic"):
            found = await self._follow_up(previous, words, found)
        if found.match.route == "none":
            detail = _about_last_answer(previous, words, self.conversation.answered)
            if detail is not None and previous is not None:
                return Decision(
                    "answer",
                    "repeat",
                    words,
                    f"a detail of the last answer ({previous.intent})",
                    heard=heard,
                    intent=previous.intent,
                    say=detail,
                )
            recalled = await self._recall(previous, words, heard)
            if recalled is not None:
                return recalled
        if found.match.route not in ("exact", "semantic"):
            # Asked again for what an answer of the call said: that answer, not a question
            # about an intent the words are only near.
            again = self._asked_again(words, heard)
            if again is not None:
                return again
            unsaid_by = self._not_said(words)
        asked = words
        unheard = False
        if hear is not None and not leads_somewhere(found.match) and await self._worth(words):
            second = await hear()
            unheard = second is None
            other = other_words(words, second)
            if other is not None:
                found, words, heard = await self._instead(found, words, other, "second", heard)
        elif hear is not None and ends_call(found):
            found, words, heard = await self._ends_call_twice(found, words, heard, hear)
        decision = await self._from_intent(found, words, heard, call_id)
        if unsaid_by and decision.words == asked and _about(decision) in unsaid_by:
            why = f"asked again for what {_about(decision)} did not say"
            decision = self._unsure(decision.words, heard, why)
        return replace(decision, unheard=True) if unheard else decision

    async def _from_intent(self, found: Lookup, words: str, heard: Heard, call_id: str) -> Decision:
        match, entry = found.match, found.entry
        again = entry is not None and f"intent:{entry.name}" in self.conversation.asked
        score = round(match.score, 4)
        choice = await self._choice(match, words, heard, call_id)
        if choice is not None:
            return choice
        if match.route == "confirm" and entry is not None and entry.confirm and not again:
            why = f"near {entry.name}, not sure enough to answer{_by_clause(match)}"
            return _ask_intent(words, heard, entry, call_id, why, score=match.score)
        if match.intent is not None and entry is not None and match.route != "none":
            instead = await self._asked_not_acted(match, entry, words, heard)
            if instead is not None:
                return instead
            return Decision(
                "answer",
                match.route,
                words,
                f"{match.route} match of {entry.name}{_by_clause(match)}",
                heard=heard,
                intent=entry.name,
                score=score,
                say=entry.answer,
                entry=entry,
            )
        held = match.ask_if_unanswered and entry is not None and entry.confirm and not again
        return await self._knowledge(
            words, heard=heard, held=entry if held else None, call_id=call_id, score=match.score
        )

    async def _asked_not_acted(
        self, match: Match, entry: CacheEntry, words: str, heard: Heard
    ) -> Decision | None:
        """The knowledge entry in place of an intent's action (a transfer, a hang-up) on
        words the knowledge base answers directly: "Can I talk to you over chat on the
        website?" is a question about the chat, not a request for a person, though near
        enough to one to act on. Only on a semantic match: an example said as written acts.
        None: the intent answers."""
        index = self.lookups.knowledge
        if entry.action is None or match.route != "semantic" or index is None:
            return None
        near = await self._entry_about(words)
        if near is None or near.score < index.config.direct_score:
            return None
        why = f"knowledge entry {near.entry.topic} directly, not {entry.name}'s {entry.action}"
        return _entry_said(words, heard, near, (near,), f"{why} ({match.score:.2f})")

    async def _knowledge(
        self,
        words: str,
        *,
        why: str = "",
        heard: Heard = "first",
        held: CacheEntry | None = None,
        call_id: str = "",
        score: float = 0.0,
        after_question: bool = False,
    ) -> Decision:
        """Step 3: the operator's words for ``words``, or the model's; ``held``: an intent
        held back only by a negative example, asked about when nothing else answers."""
        profile = self._profile
        if is_injection(words):
            return Decision("decline", "fallback", words, "injection: the caller's words",
                            heard=heard, say=profile.decline)  # fmt: skip
        answered = self.conversation.last is not None
        done = self._done(words, heard, call_id)
        if done is not None:
            return done
        reply = profile.small_talk.reply(words, profile.name, answered=answered)
        if reply is not None:
            return Decision("answer", "small_talk", words, "small talk", heard=heard, say=reply)
        index = self.lookups.knowledge
        if index is None:
            return Decision("generate", "llm", words, why or "no knowledge base", heard=heard)
        # A "no" to a question (``after_question``) joins the words it was about to the
        # request before them, not to themselves.
        conversation = self.conversation
        before = (
            conversation.words_before_question if after_question else conversation.previous_words
        )
        try:
            found, asked = await self.lookups.following(words, before)
        except ProviderError as exc:
            # As if nothing were retrieved: the caller hears "not sure", never a guess.
            log.warning("knowledge lookup failed: %s", exc)
            found, asked = [], words
        if not found and not is_small_talk(words):
            if held is not None:
                why = f"no_entry: held back from {held.name} by a negative example"
                return _ask_intent(words, heard, held, call_id, why, score=score)
            return self._unsure(words, heard, "no_entry: nothing in the knowledge base")
        if found:
            about = index.about(asked, found)
            if not about:
                entry = found[0].entry
                return self._ask_topic(words, heard, entry, call_id, f"other_topic: {entry.topic}")
            best = about[0]
            if best.score >= index.config.direct_score:
                return _entry_said(
                    words, heard, best, tuple(about), f"knowledge entry {best.entry.topic}"
                )
            if index.config.extractive:
                choice = self._topic_choice(words, heard, about, call_id)
                if choice is not None:
                    return choice
                return self._ask_topic(
                    words, heard, best.entry, call_id, f"near {best.entry.topic}, not close enough"
                )
            return Decision("generate", "llm", words, "the model words the entries",
                            heard=heard, knowledge=tuple(about))  # fmt: skip
        return Decision("generate", "llm", words, why or "small talk without a fixed reply",
                        heard=heard)  # fmt: skip

    async def _choice(
        self, match: Match, words: str, heard: Heard, call_id: str
    ) -> Decision | None:
        """The two-choice question ("Is this about X, or about Y?") in place of one question
        or of none, when the best intent is near but not sure (a score of at least the
        rule's ``confirm_threshold``, refused only for its score or its lead, not vetoed by
        a negative example or a background line) and another thing is as near:

        - the runner-up intent, scoring at least ``confirm_threshold`` too and within
          ``CHOICE_LEAD`` of the best (a question about the best alone was a coin toss, or
          not asked at all when the two were within ``confirm_margin``); else
        - a knowledge entry about the words (retrieved and on topic), when the best intent
          is worth a question by itself (route ``confirm``).

        Never when either was offered or asked about already in the call. None: no choice.
        """
        cache = self.lookups.cache
        # The live rule as fitted at load (a cache standing in without one: no choice).
        fitted = getattr(cache, "fitted", None)
        if cache is None or fitted is None or match.best is None or match.reason not in _NEAR:
            return None
        rule = fitted.rule
        best = cache.entry(match.best)
        if best is None or match.score < rule.confirm_threshold:
            return None
        if match.route != "confirm" and (
            match.score < rule.threshold or await self._entry_about(words) is not None
        ):
            # No question about the best alone (the two were too near for one): a choice
            # is one more question, asked only of a score that would answer, with no entry
            # of the knowledge base about the words (which would answer them).
            return None
        runner = cache.entry(match.runner_up) if match.runner_up is not None else None
        second: Option | None = None
        if (
            runner is not None
            and match.runner_up_score >= rule.confirm_threshold
            and match.score - match.runner_up_score < CHOICE_LEAD
        ):
            second = Option(entry=runner, score=match.runner_up_score)
            why = (
                f"choice: {best.name} and {runner.name} both near "
                f"({match.score:.2f}, {match.runner_up_score:.2f}), neither sure"
            )
        elif match.route == "confirm":
            near = await self._entry_about(words)
            if near is not None:
                second = Option(topic=near.entry, score=near.score)
                why = (
                    f"choice: {best.name} near ({match.score:.2f}) and knowledge entry "
                    f"{near.entry.topic} about the words ({near.score:.2f})"
                )
        if second is None:
            return None
        options = (Option(entry=best, score=match.score), second)
        return self._offer(words, heard, options, why, call_id)

    async def _entry_about(self, words: str) -> Retrieved | None:
        """The best knowledge entry retrieved for ``words`` and about them (a failure:
        none)."""
        index = self.lookups.knowledge
        if index is None or not words.strip() or is_small_talk(words):
            return None
        try:
            found = await self.lookups.entries(words)
        except ProviderError:
            return None
        about = index.about(words, found)
        return about[0] if about else None

    def _choosable(self, option: Option) -> Choosable:
        """What ``read_choice`` and the question read of an option: the intent as the
        profile writes it (one published since: its name and examples), or the entry."""
        if option.topic is not None:
            return option.topic
        entry = option.entry
        assert entry is not None
        intent = next((i for i in self._profile.intents if i.name == entry.name), None)
        if intent is not None:
            return intent
        return IntentConfig.model_construct(
            name=entry.name, examples=list(entry.examples), negatives=[],
            answer=entry.answer, action=None, transfer_to=None, confirm=None, topic=None,
        )  # fmt: skip

    def _choice_question(self, options: tuple[Option, ...]) -> str:
        first, second = (choice_topic(self._choosable(option)) for option in options)
        return choice_question(first, second)

    async def _chosen(self, words: str, asked: Asked) -> Decision | None:
        """Step 1 for a two-choice question: the chosen one's answer; "neither" (or a second
        answer that chooses neither clearly) the honest "not sure", never a guess at a third;
        an unclear answer the question once more; None: a new request."""
        first, second = asked.options
        said = read_choice(words, self._choosable(first), self._choosable(second))
        if said is None:
            return None
        names = f"{first.name} or {second.name}"
        # A reply is decided on the words asked about (what a follow-up joins to).
        asked_words = asked.question
        if said == "ambiguous" and not asked.again:
            why = f"chose neither clearly of {names}: asked again"
            return Decision("ask", "confirm", asked_words, why, intent=first.name,
                            say=self._choice_question(asked.options),
                            asks=replace(asked, again=True))  # fmt: skip
        if said in ("neither", "ambiguous"):
            if all(option.topic is not None for option in asked.options):
                # Two knowledge entries, the two nearest the words: no third is looked for.
                return self._unsure(asked_words, "first", f"neither of {names}")
            # Neither: an entry of the knowledge base the operator wrote for the words, when
            # one answers them as written (as a "no" to a one-intent question would find);
            # never a second question, never a guess: else the honest "not sure".
            offered = {option.name for option in asked.options}
            known = await self._knowledge(asked_words, after_question=True)
            if known.route == "knowledge" and known.intent not in offered:
                return replace(known, why=f"neither of {names}: {known.why}")
            return self._unsure(asked_words, "first", f"neither of {names}")
        option = first if said == "first" else second
        why = f"chose {option.name} of {names}"
        if option.entry is not None:
            intent = option.entry
            score = round(option.score, 4)
            return Decision("answer", "confirmed", asked_words, why, intent=intent.name,
                            score=score, say=intent.answer, entry=intent)  # fmt: skip
        entry = option.topic
        assert entry is not None
        return Decision("answer", "confirmed", asked_words, why, intent=entry.topic,
                        score=round(option.score, 4), say=entry.answer)  # fmt: skip

    def _ask_topic(
        self, words: str, heard: Heard, entry: KnowledgeEntry, call_id: str, why: str
    ) -> Decision:
        """A question about ``entry``'s topic, once a call; asked again: "not sure"."""
        asks = Asked("topic", words, call_id, topic=entry)
        if asks.key in self.conversation.asked:
            return self._unsure(words, heard, f"asked about {entry.topic} already")
        return Decision("ask", "confirm", words, why, heard=heard, intent=entry.topic,
                        say=topic_question(entry), asks=asks)  # fmt: skip

    def _topic_choice(
        self, words: str, heard: Heard, about: list[Retrieved], call_id: str
    ) -> Decision | None:
        """The two-choice question between the two knowledge entries about ``words`` (best
        first, the best below ``direct_score``), in place of a question about the best
        alone, when the runner-up scores within ``TOPIC_CHOICE_LEAD`` of it (a "no" to the
        best alone would leave the caller who meant the runner-up with "not sure"). Never
        when either was offered or asked about already in the call. None: no choice."""
        if len(about) < 2:
            return None
        best, runner = about[0], about[1]
        if best.entry is runner.entry or best.score - runner.score >= TOPIC_CHOICE_LEAD:
            return None
        options = (
            Option(topic=best.entry, score=best.score),
            Option(topic=runner.entry, score=runner.score),
        )
        why = (
            f"choice: knowledge entries {best.entry.topic} and {runner.entry.topic} both near "
            f"({best.score:.2f}, {runner.score:.2f}), neither close enough"
        )
        return self._offer(words, heard, options, why, call_id)

    def _offer(
        self, words: str, heard: Heard, options: tuple[Option, Option], why: str, call_id: str
    ) -> Decision | None:
        """The two-choice question offering ``options`` (the best first), unless either was
        offered or asked about already in the call (None)."""
        if any(option.key in self.conversation.asked for option in options):
            return None
        best = options[0]
        return Decision(
            "ask",
            "confirm",
            words,
            why,
            heard=heard,
            intent=best.name,
            score=round(best.score, 4),
            say=self._choice_question(options),
            asks=Asked("choice", words, call_id, score=best.score, options=options),
        )

    def _unsure(self, words: str, heard: Heard, why: str) -> Decision:
        return Decision("unsure", "fallback", words, why, heard=heard, say=self._profile.unsure)

    def _waiting(self, previous: Said | None, words: str) -> Asked | None:
        """What ``words`` may answer: the question waiting, else the colleague offered by
        the last answer (the honest fallback), when the words start as a reply."""
        waiting = self.conversation.waiting
        if waiting is not None:
            return waiting
        if (
            previous is not None
            and asks_for_more(previous.answer)
            and (more := read_more(words)) is not None
        ):
            # "Is there anything else I can help with?" and a yes or a no to it: a reply,
            # not a request (the model's free answer to "No thank you." before).
            cache = self.lookups.cache
            ends = cache.acting_entry("hangup") if cache is not None else None
            return Asked("more", words, previous.call_id, entry=ends, reply=more)
        offer = self._profile.unsure
        cache = self.lookups.cache
        if previous is None or cache is None or not offer:
            return None
        if not previous.answer.rstrip().endswith(offer.rstrip()) or not leads_with_answer(words):
            return None
        entry = cache.acting_entry("transfer")
        if entry is None:
            return None
        return Asked("offer", words, previous.call_id, entry=entry)

    async def _reply(self, words: str, asked: Asked) -> Decision | None:
        """Step 1; None: the words are no reply (a new request)."""
        if asked.kind == "choice":
            return await self._chosen(words, asked)
        if asked.kind == "more":
            return self._more(words, asked)
        ends = asked.entry if asked.kind == "intent" else None
        if ends is not None and ends.action == "hangup" and goes_on(words):
            # "Are you ready to end the call?" "Yes, one more thing.": not a yes.
            return self._goes_on(words, ends.name)
        answer = read_answer(words)
        if answer is None or (answer == "no" and asked.kind == "offer"):
            return None
        if asked.kind == "topic":
            entry = asked.topic
            assert entry is not None
            # A reply is decided on the words asked about (what a follow-up joins to).
            if answer == "no":
                why = f"no to the question about {entry.topic}"
                return self._unsure(asked.question, "first", why)
            return Decision("answer", "confirmed", asked.question, f"yes to {entry.topic}",
                            intent=entry.topic, say=entry.answer)  # fmt: skip
        intent = asked.entry
        assert intent is not None
        if answer == "yes":
            return Decision(
                "answer",
                "confirmed",
                asked.question,
                f"yes to the question about {intent.name}",
                intent=intent.name,
                score=round(asked.score, 4),
                say=intent.answer,
                entry=intent,
            )
        if intent.action == "hangup":
            # "Are you ready to end the call?" "No.": the call goes on, on what the caller
            # wants next (the goodbye's words hold no other request to look up).
            return self._goes_on(words, intent.name)
        log.debug("not %s; answering %r", intent.name, asked.question)
        return await self._knowledge(
            asked.question,
            why=f"no to {intent.name}",
            after_question=True,
        )

    def _done(self, words: str, heard: Heard, call_id: str) -> Decision | None:
        """Words that only say the caller is done ("That's it for now, thanks.", "No,
        that's all.": ``says_done``), or small talk that says goodbye ("Okay goodbye
        then.": held back from the goodbye intent by its negative "Okay then."), that no
        intent answered and nothing asked for: the question of the profile's goodbye intent
        ("Are you ready to end the call?"), once a call, else its small-talk goodbye. Not
        "not sure" to a caller who is leaving, a goodbye said on a line left open, nor a
        hang-up on words heard once. None: other words (or asked already: small talk)."""
        goodbye = small_talk_kind(words) == "goodbye"
        if not goodbye and (is_small_talk(words) or not says_done(words)):
            return None
        cache = self.lookups.cache
        ends = cache.acting_entry("hangup") if cache is not None else None
        if ends is not None:
            if not ends.confirm or f"intent:{ends.name}" in self.conversation.asked:
                return None
            return _ask_intent(words, heard, ends, call_id, f"the caller is done: {ends.name}?")
        said = self._profile.small_talk.goodbye
        if goodbye or not said:
            return None  # small talk's own reply
        return Decision("answer", "small_talk", words, "the caller is done", heard=heard,
                        say=said.replace("{name}", self._profile.name))  # fmt: skip

    def _goes_on(self, words: str, ends: str) -> Decision:
        """The call goes on after a question about ending it: asked what else (the
        profile's words for it, else its greeting's)."""
        replies = self._profile.small_talk
        say = replies.more or replies.greeting.replace("{name}", self._profile.name)
        return Decision("answer", "small_talk", words, f"no to {ends}: goes on", say=say)

    def _more(self, words: str, asked: Asked) -> Decision | None:
        """A yes or a no to "anything else?": asked what else on a yes; on a no, the
        profile's goodbye intent (its answer, and its hang-up: the end of turn waits for a
        caller who goes on, as for any reply that acts), or its small-talk goodbye. None
        (decided as a request) where the profile has no words for it."""
        replies = self._profile.small_talk
        if asked.reply == "yes":
            if not replies.more:
                return None
            return Decision("answer", "small_talk", words, "yes to anything else",
                            say=replies.more)  # fmt: skip
        ends = asked.entry
        if ends is not None:
            return Decision(
                "answer",
                "confirmed",
                words,
                f"no to anything else: {ends.name}",
                intent=ends.name,
                say=ends.answer,
                entry=ends,
            )
        if not replies.goodbye:
            return None
        return Decision("answer", "small_talk", words, "no to anything else",
                        say=replies.goodbye.replace("{name}", self._profile.name))  # fmt: skip

    async def _ends_call_twice(
        self, found: Lookup, words: str, heard: Heard, hear: Hearing
    ) -> tuple[Lookup, str, Heard]:
        """Words an intent would hang up on, heard again (``ends_call``): they stand where
        the second recognizer heard the same words, words that the same intent answers, or
        nothing (its pass failed: as before there was a second hearing); else the second
        words are decided in their place, wherever they lead ("Hi there." for "Bye there.":
        small talk), and the call goes on. Where the second words lead nowhere but are
        nearest that same intent ("Okay That everything Thanks a lot buy" for "Okay, that's
        everything, thanks a lot, bye."), the caller is asked (its ``confirm``: "Are you
        ready to end the call?"), as a person would, rather than told "not sure"."""
        other = other_words(words, await hear())
        if other is None:
            return found, words, heard
        try:
            looked = await self.lookups.intent(other)
        except ProviderError:
            return found, words, heard
        if same_answer(found, looked):
            return found, words, heard
        log.info("words that would end the call heard otherwise: %r for %r", other, words)
        if await self._nearly_the_same_end(found, looked, other):
            ask = replace(found.match, route="confirm", intent=None, runner_up=None)
            return replace(found, match=ask), words, heard
        return looked, other, "second"

    async def _nearly_the_same_end(self, found: Lookup, looked: Lookup, other: str) -> bool:
        """The second words of words that would end the call lead nowhere of their own (no
        intent, small talk or knowledge entry), and the intent nearest them is the one
        that would end it."""
        return (
            not leads_somewhere(looked.match)
            and looked.match.best == found.match.intent
            and not is_small_talk(other)
            and not await self._known(other)
        )

    async def _instead(
        self, found: Lookup, words: str, other: str, heard: Heard, was: Heard
    ) -> tuple[Lookup, str, Heard]:
        """``other`` words and their lookup in place of ``words``, when they lead somewhere
        (an answer, or a question about an intent), or, for the second recognizer's words,
        when the knowledge base has an entry for them; else as they were."""
        if normalize(other) == normalize(words):
            return found, words, was
        try:
            looked = await self.lookups.intent(other)
        except ProviderError:
            return found, words, was
        if leads_somewhere(looked.match) or (heard == "second" and await self._known(other)):
            return looked, other, heard
        return found, words, was

    async def _follow_up(self, previous: Said | None, text: str, found: Lookup) -> Lookup:
        """A short follow-up ("and the fast one?") to an intent's answer, looked up joined
        to the question answered: a hit on that same intent answers it. Words asking for
        part of that answer again ("what was the normal price again?") are answered by
        that intent on a joined question about it too, unless the words alone are worth a
        question about another intent, or the intent acts (a transfer, a hang-up is done on
        a sure match or a "yes" only), or the answer did not say what they ask for
        (``sentences_asked``: "how long was it again?" after the delivery prices). Not when
        an answer given before it says the words of the follow-up's own that this one does
        not (``_said_before``)."""
        if (
            previous is None
            or previous.intent is None
            or previous.route not in _ANSWERED
            or not previous.transcript
        ):
            return found
        context = f"{previous.transcript} {previous.answer}"
        again = asks_again(text, context)
        if again and sentences_asked(text, previous.answer, previous.transcript) is None:
            return found  # asked again for what it did not say
        if not again and not follows_up(text, context):
            return found
        if self._said_before(text, context, previous.intent):
            return found
        try:
            joined = await self.lookups.intent(f"{previous.transcript} {text}")
        except ProviderError:
            return found
        if joined.entry is None:
            return found
        if joined.match.route in ("exact", "semantic") and joined.match.intent == previous.intent:
            return joined
        elsewhere = found.match.route == "confirm" and found.match.best != previous.intent
        if (
            again
            and joined.match.route == "confirm"
            and joined.match.best == previous.intent
            and not elsewhere
            and joined.entry.action is None
        ):
            # Answered: no reason left for a question (a choice of two) in its place.
            match = replace(joined.match, route="semantic", intent=previous.intent, reason="")
            return replace(joined, match=match)
        return found

    async def _recall(self, previous: Said | None, words: str, heard: Heard) -> Decision | None:
        """Words that match no intent, asking about an answer given earlier in the call
        (``Conversation.answered``, the latest first; the last turn's own is the follow-up
        steps before this): a detail of that answer ("Is the label free?": its sentence),
        part of it asked for again ("What was the standard price again?": the sentences
        that give it, ``sentences_asked``; none: not that answer), or a follow-up that,
        joined to the words that asked for it, finds that same intent or entry again ("Can
        I get that for free?"). Only what was answered: a follow-up that none of them
        answers goes on to the knowledge base, and with nothing there, to the honest "not
        sure". Words that retrieve an entry alone are a request of their own."""
        answered = list(self.conversation.answered)
        if answered and previous is not None and previous.intent == answered[-1].name:
            answered.pop()
        if not answered or await self._known(words):
            return None
        for earlier in reversed(answered):
            decision = await self._recalled(earlier, words, heard)
            if decision is not None:
                return decision
        return None

    async def _recalled(self, earlier: Answered, words: str, heard: Heard) -> Decision | None:
        context = f"{earlier.words} {earlier.answer}"
        why = f"a follow-up to {earlier.name}, answered earlier in the call"
        if about_last_answer(words, earlier.answer) and new_words(words, earlier.words):
            detail = sentence_about(words, earlier.answer)
            if detail is not None:
                return Decision("answer", "repeat", words, f"a detail of {earlier.name}, "
                                "answered earlier in the call", heard=heard,
                                intent=earlier.name, say=detail)  # fmt: skip
        if asks_again(words, context):
            # Part of it asked for again: the sentences that give it, or, when it gave
            # nothing of the kind, not this answer.
            return _part_again(earlier, words, heard)
        if not follows_up(words, context):
            return None
        joined = f"{earlier.words} {words}"
        if not earlier.intent:
            index = self.lookups.knowledge
            try:
                found = await self.lookups.entries(joined)
            except ProviderError:
                return None
            about = [] if index is None else index.about(joined, found)
            if not about or about[0].entry.topic != earlier.name:
                return None
            fact = about[0].entry
            return Decision("answer", "knowledge", words, why, heard=heard, intent=fact.topic,
                            score=round(about[0].score, 4), say=fact.answer,
                            knowledge=tuple(about[:1]))  # fmt: skip
        try:
            looked = await self.lookups.intent(joined)
        except ProviderError:
            return None
        match, entry = looked.match, looked.entry
        if entry is None or entry.name != earlier.name:
            return None
        if match.route not in ("exact", "semantic") or match.intent != earlier.name:
            return None
        return Decision("answer", match.route, words, why, heard=heard, intent=entry.name,
                        score=round(match.score, 4), say=entry.answer, entry=entry)  # fmt: skip

    def _said_before(self, text: str, context: str, last: str) -> bool:
        """Whether the follow-up ``text`` is about an answer given before the last one
        (``last``: its intent or entry; ``context``: its question and answer): the last
        one says not every word of the follow-up's own, an earlier one says them all ("And
        the fast one?" after the delivery prices, then the opening hours)."""
        if not unsaid(text, context):
            return False
        return any(
            not unsaid(text, f"{earlier.words} {earlier.answer}")
            for earlier in self.conversation.answered
            if earlier.name != last
        )

    def _asked_again(self, words: str, heard: Heard) -> Decision | None:
        """Words asking for part of an answer given in the call again ("Remind me what the
        regular one costs?", "How long was it again?") that no follow-up step before
        answered: the sentences of the latest such answer that give what they ask for
        (``sentences_asked``), the operator's words as said, never a guess. None: no answer
        of the call gives it (the decision goes on, and answers none of those that did not
        say it: ``_not_said``)."""
        for earlier in reversed(self.conversation.answered):
            if asks_again(words, f"{earlier.words} {earlier.answer}"):
                decision = _part_again(earlier, words, heard)
                if decision is not None:
                    return decision
        return None

    def _not_said(self, words: str) -> set[str]:
        """The intents and entries answered in the call that ``words`` ask for part of
        again (``asks_again``) and that did not say it (``sentences_asked``)."""
        return {
            earlier.name
            for earlier in self.conversation.answered
            if asks_again(words, f"{earlier.words} {earlier.answer}")
            and sentences_asked(words, earlier.answer, earlier.words) is None
        }

    async def _worth(self, words: str) -> bool:
        """Words that matched no intent are worth a second hearing: not small talk, and no
        knowledge entry for them (a failed retrieval: not worth it either)."""
        return await worth_hearing_again(words, self.lookups.entries)

    async def _known(self, words: str) -> bool:
        """The knowledge base has an entry for ``words`` as said (a failure: no)."""
        if not words.strip() or is_small_talk(words):
            return False
        try:
            return bool(await self.lookups.entries(words))
        except ProviderError:
            return False


def _ask_intent(
    words: str, heard: Heard, entry: CacheEntry, call_id: str, why: str, *, score: float = 0.0
) -> Decision:
    """The question about one intent (its ``confirm``), left waiting for the reply."""
    return Decision(
        "ask",
        "confirm",
        words,
        why,
        heard=heard,
        intent=entry.name,
        score=round(score, 4),
        say=entry.confirm,
        entry=entry,
        asks=Asked("intent", words, call_id, entry=entry, score=score),
    )


def _purpose(
    text: str, purposes: Sequence[tuple[str, str, CollectorConfig]]
) -> tuple[str, str, CollectorConfig] | None:
    """The first ``(lookup, phrase, collector)`` whose phrase's words are all in ``text``."""
    words = set(normalize(text).split())
    for lookup, phrase, collector in purposes:
        needed = normalize(phrase).split()
        if needed and all(w in words for w in needed):
            return lookup, phrase, collector
    return None


def _about(decision: Decision) -> str | None:
    """The intent or knowledge entry a decision answers, asks about or words."""
    if decision.intent is None and decision.knowledge:
        return decision.knowledge[0].entry.topic
    return decision.intent


def _part_again(earlier: Answered, words: str, heard: Heard) -> Decision | None:
    """The sentences of ``earlier``'s answer that ``words``, asking for part of it again,
    ask for (``sentences_asked``), said as the operator wrote them; None: that answer gave
    nothing of the kind."""
    said = sentences_asked(words, earlier.answer, earlier.words)
    if said is None:
        return None
    why = f"asked again for {earlier.name}, answered earlier in the call"
    return Decision("answer", "repeat", words, why, heard=heard, intent=earlier.name, say=said)


def _about_last_answer(
    previous: Said | None, text: str, answered: Sequence[Answered] = ()
) -> str | None:
    """The sentence of the answer given on ``previous`` (an intent's, or a knowledge
    entry's as the call remembers it in ``answered``: the operator's words) that short
    words about part of it ask for ("Is the label free?" after "... print the free return
    label."; "Where do I start a claim?" after the warranty entry); None: not such words.
    The same request again is not about a detail."""
    if previous is None or previous.intent is None:
        return None
    answer, asked = previous.answer, previous.transcript
    if previous.route == "knowledge":
        entry = next((a for a in answered if a.name == previous.intent), None)
        if entry is None:
            return None
        answer, asked = entry.answer, entry.words
    elif previous.route not in _ANSWERED:
        return None
    if not answer or not about_last_answer(text, answer) or not new_words(text, asked):
        return None
    return sentence_about(text, answer)


def _entry_said(
    words: str, heard: Heard, entry: Retrieved, about: tuple[Retrieved, ...], why: str
) -> Decision:
    """A knowledge entry's answer said as the operator wrote it (route ``knowledge``)."""
    return Decision(
        "answer",
        "knowledge",
        words,
        why,
        heard=heard,
        intent=entry.entry.topic,
        score=round(entry.score, 4),
        say=entry.entry.answer,
        knowledge=about,
    )


def _by_clause(match: Match) -> str:
    """What the decision's reason adds when one clause of the words decided the match."""
    return "" if match.clause is None else f" by its clause {match.clause!r}"
