"""A second hearing of a turn whose transcript matched nothing.

With a two-pass recognizer (``SWITCHBOARD_MODELS__ASR=whisper-window+base``: tiny.en on every
turn, Whisper base on request), a turn whose first transcript matched no intent and retrieved
no knowledge entry is decoded again, and the router goes on with the second transcript when
it matches an intent (or is worth asking about), or, since 2026-11-28, when the knowledge
base has an entry for it ("I like a refund." for "I like a reefer": the responder answers
or asks about the entry instead of saying "not sure"); otherwise the first stands. The second
recognizer was better on as many utterances as it was worse, so it is asked only where the
first one led nowhere, and its words are taken only where they lead somewhere.

Measured (``python -m bench.intent_eval --asr --second-pass whisper-base-window``, default
profile, tuning split, flite voices at 8 kHz): right directly or after one question 77.8% ->
84.3%, 0 false accepts, a second pass on 87 of 207 utterances (most of them requests the
profile does not cover) at ~150-200 ms each.

The rule is the three functions below (``leads_somewhere``, ``worth_hearing_again``,
``other_words``): ``Rehearing`` and the router apply them to a call's audio, and
``bench.intent_eval --second-pass`` to cached transcripts, so both read the same rule.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from bot.answers.injection import is_injection
from bot.answers.small_talk import is_small_talk
from bot.answers.text import sentences
from bot.intents.match import Match, normalize
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.follow_up import retrieve_following
from serve import ASR, ProviderError, StageTimings, Transcription

log = logging.getLogger(__name__)


def leads_somewhere(match: Match) -> bool:
    """Whether a transcript's match leads somewhere (an answer, or a question about an
    intent): a first transcript that leads nowhere may be heard again, and second words
    are taken only when they lead somewhere."""
    return match.route != "none"


async def worth_hearing_again(text: str, knowledge: KnowledgeIndex | None) -> bool:
    """Whether words that matched no intent are worth a second hearing: not small talk,
    and no knowledge entry for them (the responder has one). A failed retrieval: not worth
    it either."""
    if not text.strip() or is_small_talk(text):
        return False
    if knowledge is not None:
        try:
            if await knowledge.retrieve(text):
                return False
        except ProviderError:
            return False
    return True


def other_words(first: str, second: str | None) -> str | None:
    """``second`` when the second recognizer heard other words than ``first``; None when it
    heard nothing, failed (None) or heard the same words (after normalization)."""
    if not second or normalize(second) == normalize(first):
        return None
    return second


@runtime_checkable
class SecondPassASR(Protocol):
    """A recognizer that can decode a turn again with a second model (``TwoPassASR``)."""

    async def second_pass(
        self, pcm: bytes, sample_rate: int, *, timings: StageTimings | None = None
    ) -> Transcription: ...


class Rehearing:
    """Decodes again, when worth it, a turn whose transcript matched no intent."""

    def __init__(
        self, asr: SecondPassASR, *, sample_rate: int, knowledge: KnowledgeIndex | None = None
    ) -> None:
        self._asr = asr
        self._rate = sample_rate
        self._knowledge = knowledge

    @classmethod
    def of(
        cls, asr: ASR, *, sample_rate: int, knowledge: KnowledgeIndex | None = None
    ) -> Rehearing | None:
        """One for ``asr`` when it has a second pass; None otherwise (no cost, no change)."""
        if not isinstance(asr, SecondPassASR):
            return None
        return cls(asr, sample_rate=sample_rate, knowledge=knowledge)

    async def worth(self, text: str) -> bool:
        """``worth_hearing_again`` with this call's knowledge base."""
        return await worth_hearing_again(text, self._knowledge)

    async def nothing_for(self, text: str, previous: str | None = None) -> bool:
        """Whether the responder would have nothing but "not sure" for ``text``: a
        knowledge base that retrieves nothing for it, retrieving as the responder does (the
        words alone, or joined to ``previous``, the caller's words before, when they read
        as a follow-up), and words that are no small talk or attempt at the bot's
        instructions. Without a knowledge base the model answers: False. Nor words that end
        in small talk ("... Hello?"): a caller who finished and heard nothing yet. A failed
        retrieval: False. (The intent cache is the caller's to ask.)"""
        index = self._knowledge
        if index is None or is_injection(text) or not text.strip() or is_small_talk(text):
            return False
        said = sentences(text)
        if len(said) > 1 and is_small_talk(said[-1]):
            return False  # "... Hello? Are you there?": the caller is waiting for an answer
        try:
            found, _ = await retrieve_following(index, text, previous)
        except ProviderError:
            return False
        return not found

    async def known(self, text: str) -> bool:
        """Whether the knowledge base retrieves an entry for ``text`` as said (no follow-up
        joined to words before; not small talk). A failed retrieval: False."""
        if self._knowledge is None or not text.strip() or is_small_talk(text):
            return False
        try:
            return bool(await self._knowledge.retrieve(text))
        except ProviderError:
            return False

    async def only_asks(self, text: str, previous: str | None = None) -> bool:
        """Whether the responder would only ask about a knowledge entry's topic for
        ``text`` ("Just to check, is this about ...?"; ``KnowledgeIndex.only_asks``),
        retrieving as it does (``retrieve_following``). Small talk, an attempt at the bot's
        instructions, a failed retrieval or no knowledge base: False."""
        index = self._knowledge
        if index is None or is_injection(text) or is_small_talk(text):
            return False
        try:
            found, asked = await retrieve_following(index, text, previous)
        except ProviderError:
            return False
        return index.only_asks(asked, found)

    async def hear(self, pcm: bytes, *, timings: StageTimings | None = None) -> str | None:
        """What the second recognizer makes of ``pcm`` (None: the pass failed)."""
        try:
            result = await self._asr.second_pass(pcm, self._rate, timings=timings)
        except ProviderError as exc:
            log.warning("second pass failed: %s", exc)
            return None
        return result.text.strip()

    async def again(
        self, audio: bytes, text: str, *, heard: str | None, model_ms: dict[str, float]
    ) -> str | None:
        """A turn's second transcript (``audio``, first heard as ``text``), when the first
        leads nowhere and the second says other words; None otherwise (small talk, a
        knowledge entry for the first words, no audio, the same words, or a failed second
        pass: the first transcript stands).

        A turn heard again while the caller paused (``heard``: ``Speculation.second``, the
        same audio) is not decoded a third time; a decoding's model time goes to
        ``model_ms``."""
        if not audio or not await self.worth(text):
            return None
        if heard is not None:
            second: str | None = heard
        else:
            timings = StageTimings()
            second = await self.hear(audio, timings=timings)
            model_ms.update(timings.durations_ms)
        return other_words(text, second)
