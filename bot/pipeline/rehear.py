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
``other_words``): the decider applies them to a call's words (``bot.pipeline.deciding.decider``,
through the call's lookups), and ``bench.intent_eval --second-pass`` to cached
transcripts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from bot.answers.small_talk import is_small_talk
from bot.intents.match import Match, normalize
from serve import ASR, ProviderError, StageTimings, Transcription
from serve.errors import WorkDropped

if TYPE_CHECKING:
    from bot.intents.cache import Lookup

log = logging.getLogger(__name__)

#: The match routes of an intent's answer (not a question about it).
_ANSWER_ROUTES = ("exact", "semantic")


def leads_somewhere(match: Match) -> bool:
    """Whether a transcript's match leads somewhere (an answer, or a question about an
    intent): a first transcript that leads nowhere may be heard again, and second words
    are taken only when they lead somewhere."""
    return match.route != "none"


async def worth_hearing_again(
    text: str, retrieve: Callable[[str], Awaitable[Sequence[object]]] | None
) -> bool:
    """Whether words that matched no intent are worth a second hearing: not small talk,
    and no knowledge entry for them (``retrieve``: the knowledge base's retrieval, or the
    call's lookups of it; None: no knowledge base). A failed retrieval: not worth it
    either."""
    if not text.strip() or is_small_talk(text):
        return False
    if retrieve is not None:
        try:
            if await retrieve(text):
                return False
        except ProviderError:
            return False
    return True


def ends_call(found: Lookup | None) -> bool:
    """Whether a lookup answers with an intent that hangs up after its answer (a goodbye).
    A call ended on a misheard caller cannot be taken back ("Hi there." heard as "Bye
    there.", "Where can I find" as "Bye bye."), so such words are heard again, whatever
    they read as, and the call ends only where the second recognizer's words end it too
    (``same_answer``)."""
    if found is None or found.entry is None:
        return False
    return (
        found.entry.action == "hangup"
        and found.match.route in _ANSWER_ROUTES
        and found.match.intent == found.entry.name
    )


def same_answer(first: Lookup, second: Lookup) -> bool:
    """Whether two lookups answer with the same intent."""
    return (
        second.match.route in _ANSWER_ROUTES
        and second.match.intent is not None
        and second.match.intent == first.match.intent
    )


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
    """Decodes a turn again with the second recognizer (when to: ``bot.pipeline.deciding.decider``
    at the end of the turn, ``bot.pipeline.speculation`` in the caller's pause)."""

    def __init__(self, asr: SecondPassASR, *, sample_rate: int, early: bool = False) -> None:
        self._asr = asr
        self._rate = sample_rate
        #: The caller's pause begins this hearing with the first one, as spare work
        #: (``bot.pipeline.speculation``), instead of after the first one's lookup.
        self.early = early

    @classmethod
    def of(cls, asr: ASR, *, sample_rate: int) -> Rehearing | None:
        """One for ``asr`` when it has a second pass; None otherwise (no cost, no change)."""
        if not isinstance(asr, SecondPassASR):
            return None
        return cls(asr, sample_rate=sample_rate, early=bool(getattr(asr, "early", False)))

    async def hear(self, pcm: bytes, *, timings: StageTimings | None = None) -> str | None:
        """What the second recognizer makes of ``pcm`` (None: the pass failed)."""
        try:
            result = await self._asr.second_pass(pcm, self._rate, timings=timings)
        except WorkDropped as exc:
            log.debug("second pass dropped: %s", exc)  # spare work no worker was free for
            return None
        except ProviderError as exc:
            log.warning("second pass failed: %s", exc)
            return None
        return result.text.strip()
