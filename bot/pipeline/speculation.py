"""Work started while the caller pauses, kept or thrown away when the turn ends.

When the caller has been silent for ``speculate_after_ms`` the endpointer hands the turn
so far to a ``Speculator``: it transcribes it and looks the words up in the intent cache
while the endpointer keeps listening. If the caller speaks again the result is dropped.
If the silence lasts, the result is used twice:

* the end of the turn comes early when the words are clearly a whole request: a cached
  intent matched them (the turn ends at once; after the shorter silence below when the
  intent hangs up or transfers), or the text reads as a finished sentence
  (``looks_complete``: the turn ends after a shorter silence than usual); words that read
  as an unfinished thought keep the turn open longer instead (``bot.pipeline.end_of_turn``);
* when the turn ends, the transcript and the lookup are already there, so neither sits on
  the path between the caller's last word and the bot's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from bot.answers.small_talk import is_small_talk
from bot.intents.cache import Lookup
from bot.pipeline.end_of_turn import judge
from bot.pipeline.follow_up import is_follow_up
from bot.pipeline.rehear import leads_somewhere, other_words
from serve import ASR, ProviderError, StageTimings
from serve.asr import Vocabulary
from serve.priority_pool import Priority, Urgency, priority

if TYPE_CHECKING:
    from bot.pipeline.rehear import Rehearing

log = logging.getLogger(__name__)


def looks_complete(text: str) -> bool:
    """True when ``text`` reads as a finished thought rather than a caller mid-sentence.

    Whisper punctuates any fragment it hears; ``bot.pipeline.end_of_turn.judge`` reads the
    words as well ("I'd like to change." dangles, "Where is my order?" does not).
    """
    return judge(text) == "finished"


class IntentLookup(Protocol):
    """What the speculator needs from the intent cache."""

    async def lookup(self, text: str) -> Lookup: ...


@dataclass
class Speculation:
    """One speculative pass over the turn so far (``audio_bytes`` long)."""

    pause_id: int
    audio_bytes: int
    started_at: float
    transcript: str = ""
    #: What the model heard, even when it doubted there was speech at all (a fragment cut
    #: at a pause often reads as noise to it): for the end of turn only, never answered.
    heard: str = ""
    #: What the second recognizer heard in the same audio (None: not heard again). Asked
    #: for words that read as finished, or say neither, but that no intent answers: a
    #: fragment the first recognizer misheard as a whole sentence ("Could you check if" as
    #: "Can you hack it?"). The end of turn reads these words too; the router reuses them.
    second: str | None = None
    #: Heard again, and neither hearing leads anywhere: no intent answers or asks about
    #: either, the knowledge base has nothing for them, and they are not small talk or a
    #: follow-up. The bot has nothing to say but "not sure", so the end of turn waits
    #: ``nowhere_silence_ms``: a caller pausing mid-request ("I think I was charged | twice
    #: for my order") may go on.
    nowhere: bool = False
    #: The words matched an intent held back by a negative (``Match.ask_if_unanswered``)
    #: and the knowledge base has nothing for them: the responder will ask about that
    #: intent, a question as ``doubtful`` says.
    asks_unanswered: bool = False
    #: The words lead to the responder, and it would only ask about a knowledge entry's
    #: topic for them ("Just to check, is this about ...?"): a question, as ``doubtful``
    #: says.
    asks_topic: bool = False
    #: The words would be read as a yes to a question or offer whose yes acts (a
    #: transfer, a hang-up): ``LastAnswer.acts_on_reply``. That cannot be taken back, and
    #: "Okay, okay." may start a request ("Right, okay, so | what time ..."): the end of
    #: turn waits as for a goodbye.
    acts_on_reply: bool = False
    no_speech_prob: float = 1.0
    #: Time inside each model call of the pass (``asr``...).
    model_ms: dict[str, float] = field(default_factory=dict)
    lookup: Lookup | None = None
    #: The lookup of ``second``, when the first words led nowhere and the second recognizer
    #: heard other words (the router goes on with those when they lead somewhere).
    second_lookup: Lookup | None = None
    finished_at: float | None = None
    failed: bool = False
    #: Where the pass's jobs stand in the shared pool's queue: behind turns that have
    #: ended, until this turn ends too; withdrawn when the caller speaks again.
    priority: Priority = field(default_factory=lambda: Priority(Urgency.AHEAD), repr=False)

    @property
    def acts(self) -> bool:
        """The matched intent ends or transfers the call after its answer."""
        return _acts(self.lookup, ("hangup", "transfer"))

    @property
    def hangs_up(self) -> bool:
        """The matched intent ends the call after its answer ("Bye bye."); so does the
        second recognizer's, where the first words led nowhere (the router goes on with
        those)."""
        return _acts(self.lookup, ("hangup",)) or _acts(self.second_lookup, ("hangup",))

    @property
    def doubtful(self) -> bool:
        """The intent cache would only ask about these words ("Just to check, ...?"), or
        the responder would (``asks_unanswered``, ``asks_topic``), or, where they led
        nowhere, about the second recognizer's words: a weak match, as often made on a
        fragment ("My parcel arrived and" heard as "My parcel arrived done") as on a whole
        request."""
        return (
            self.asks_unanswered
            or self.asks_topic
            or _asks(self.lookup)
            or _asks(self.second_lookup)
        )

    @property
    def hit(self) -> bool:
        """The intent cache would answer these words (not only ask about them)."""
        found = self.lookup
        return (
            found is not None
            and found.entry is not None
            and found.match.intent is not None
            and found.match.route not in ("none", "confirm")
        )


@runtime_checkable
class LastAnswer(Protocol):
    """The call's router, as the speculative pass asks it about the turn before."""

    @property
    def previous_words(self) -> str | None: ...

    async def joins_last_answer(self, text: str, found: Lookup) -> bool: ...

    def acts_on_reply(self, text: str) -> bool: ...


class Speculator:
    """Runs one call's speculative transcription and lookup, one pass at a time."""

    def __init__(
        self,
        asr: ASR,
        *,
        sample_rate: int,
        cache: IntentLookup | None = None,
        max_no_speech_prob: float = 0.8,
        rehearing: Rehearing | None = None,
        last_answer: Callable[[], LastAnswer | None] = lambda: None,
        vocabulary: Vocabulary | None = None,
    ) -> None:
        self._asr = asr
        #: The profile's words, heard by as at the end of the turn (bot/vocabulary.py).
        self._vocabulary = vocabulary
        self._rehearing = rehearing
        #: The call's router: what a follow-up would be joined to (None: no router).
        self._last_answer = last_answer
        self._rate = sample_rate
        self._cache = cache
        self._max_no_speech = max_no_speech_prob
        self._task: asyncio.Task[Speculation] | None = None
        self._current: Speculation | None = None
        self.started = 0
        self.discarded = 0

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, pause_id: int, audio: bytes) -> bool:
        """Begin a pass over ``audio``; refused (False) while another pass is running."""
        if self.busy:
            return False
        spec = Speculation(pause_id=pause_id, audio_bytes=len(audio), started_at=time.monotonic())
        self._current = spec
        self._task = asyncio.create_task(self._run(spec, audio), name="speculation")
        self.started += 1
        return True

    def ready(self, pause_id: int) -> Speculation | None:
        """The finished pass for this pause, if there is one."""
        spec = self._current
        if spec is None or spec.pause_id != pause_id or spec.finished_at is None:
            return None
        return spec

    async def result_for(self, pause_id: int, audio_bytes: int) -> Speculation | None:
        """The pass that covered exactly this turn (waiting for it if it is still running).

        ``None`` when the caller spoke after the pass began (another pause, more audio) or
        the pass failed: the turn is then transcribed as usual.
        """
        spec, task = self._current, self._task
        if spec is None or task is None or spec.pause_id != pause_id:
            return None
        if audio_bytes < spec.audio_bytes:
            return None
        spec.priority.raise_to(Urgency.NOW)  # the caller is now waiting for it
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(task)
        if spec.failed or spec.finished_at is None:
            return None
        return spec

    async def settle(self) -> None:
        """Wait for the running pass, if any, to finish."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(self._task)

    def discard(self) -> None:
        """The caller spoke again: whatever the running pass finds is not used."""
        if self._current is not None:
            self.discarded += 1
            # A pass still waiting for a worker never runs (and the next one can start);
            # an ASR call already running cannot be stopped midway: the pass finishes in
            # the background and its result is ignored.
            self._current.priority.withdraw()
        self._current = None

    async def close(self) -> None:
        task, self._task, self._current = self._task, None, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self, spec: Speculation, audio: bytes) -> Speculation:
        # This task's jobs (ASR, then the lookup's embedding) carry the pass's priority.
        with priority(spec.priority):
            return await self._pass(spec, audio)

    async def _pass(self, spec: Speculation, audio: bytes) -> Speculation:
        timings = StageTimings()
        try:
            result = await self._asr.transcribe(
                audio, self._rate, vocabulary=self._vocabulary, timings=timings
            )
            spec.no_speech_prob = result.no_speech_prob
            text = result.text.strip()
            spec.heard = text
            if text and result.no_speech_prob <= self._max_no_speech:
                spec.transcript = text
                last = self._last_answer()
                spec.acts_on_reply = last is not None and last.acts_on_reply(text)
                if self._cache is not None:
                    try:
                        spec.lookup = await self._cache.lookup(text)
                    except ProviderError as exc:
                        log.debug("speculative lookup failed: %s", exc)
                # Words an intent would answer are not heard again; words it would only
                # ask about (``doubtful``) are, as are words that lead nowhere.
                if judge(text) in ("finished", "open") and not spec.hit:
                    await self._hear_again(spec, audio, text, timings)
        except ProviderError as exc:
            log.debug("speculative transcription failed: %s", exc)
            spec.failed = True
        finally:
            spec.model_ms = dict(timings.durations_ms)
            spec.finished_at = time.monotonic()
        return spec

    async def _hear_again(
        self, spec: Speculation, audio: bytes, text: str, timings: StageTimings
    ) -> None:
        """Hear the pause's audio again with the second recognizer (a two-pass ASR), when
        words that read as finished (or say neither) lead to no cached answer and are not
        small talk, or say neither and lead only to a question about an intent
        (``doubtful``): a fragment the first recognizer made a sentence of ("Could you check
        if" heard as "Can you hack it?", "Do you deliver to" as "You believe her too"). The
        end of turn reads the second words too, and the router reuses them. A pass the
        caller has spoken over is not heard again."""
        rehearing = self._rehearing
        if rehearing is None or self._current is not spec or is_small_talk(text):
            return
        spec.second = await rehearing.hear(audio, timings=timings)
        if spec.second is not None and self._current is spec:
            await self._look_up_second(spec, text, rehearing)
            spec.nowhere = await self._leads_nowhere(spec, text, rehearing)

    async def _look_up_second(self, spec: Speculation, text: str, rehearing: Rehearing) -> None:
        """Look up the second recognizer's words where the router would go on with them:
        the first words lead nowhere, are worth hearing again (``Rehearing.again``), and
        the second hearing says other words. A failed lookup leaves ``second_lookup`` None."""
        found = spec.lookup
        second = other_words(text, spec.second)
        if self._cache is None or found is None or leads_somewhere(found.match) or second is None:
            return
        if not await rehearing.worth(text):
            return
        try:
            spec.second_lookup = await self._cache.lookup(second)
        except ProviderError as exc:
            log.debug("speculative lookup of the second words failed: %s", exc)

    async def _leads_nowhere(self, spec: Speculation, text: str, rehearing: Rehearing) -> bool:
        """Whether neither hearing of the pause leads to anything but "not sure", as the
        router and the responder would decide on the turn. The router takes the second
        words where they lead somewhere (an answer or a question about an intent) or the
        knowledge base has an entry for them, and goes on with the first otherwise. The
        responder then says or asks about an entry for the words it gets (``asks_topic``
        when it would only ask), asks about an intent the first words matched but a
        negative held back when the knowledge base has nothing for them
        (``asks_unanswered``), and says "not sure" to words nothing answers. Anything
        failing: False."""
        found = spec.lookup
        if found is None and self._cache is not None:
            return False  # the lookup failed: the router's may not
        if found is not None and leads_somewhere(found.match):
            return False
        second = other_words(text, spec.second)
        if second is not None and self._cache is not None and await rehearing.worth(text):
            again = spec.second_lookup
            if again is None or leads_somewhere(again.match):
                return False  # its lookup failed, or the router takes the second words
            if await rehearing.known(second):
                # The router takes them for the knowledge base's entry: an answer, or a
                # question about its topic.
                spec.asks_topic = await self._only_asks(second, rehearing, None)
                return False
        if not await self._nothing_for(text, rehearing, found):
            # An entry for them (or a question about its topic), or an answer the router
            # gives from its last one.
            spec.asks_topic = await self._only_asks(text, rehearing, found)
            return False
        if found is not None and found.entry is not None and found.match.ask_if_unanswered:
            spec.asks_unanswered = True  # no entry: the responder asks about the intent
            return False
        if second is not None and self._cache is None:
            # No intent cache: the responder has the words, whichever it is given.
            return await self._nothing_for(second, rehearing, None)
        return True

    async def _only_asks(self, text: str, rehearing: Rehearing, found: Lookup | None) -> bool:
        """``Rehearing.only_asks`` for words the router passes on: not when it answers them
        from its last answer."""
        last = self._last_answer()
        if last is not None and found is not None and await last.joins_last_answer(text, found):
            return False
        return await rehearing.only_asks(text, None if last is None else last.previous_words)

    async def _nothing_for(self, text: str, rehearing: Rehearing, found: Lookup | None) -> bool:
        """``Rehearing.nothing_for`` with the turn before, as the router and the responder
        will read it: words that read as a follow-up lead on only when the router would
        answer them from its last answer, or the knowledge base has an entry for them
        joined to the caller's words before. "And the fast one?" after "How much is
        express shipping?" leads on (the router answers it); as a call's first words it
        leads nowhere: nothing is there to join it to."""
        last = self._last_answer()
        if last is None:  # no router: the responder may still join it to words before
            return not is_follow_up(text) and await rehearing.nothing_for(text)
        if found is not None and await last.joins_last_answer(text, found):
            return False
        return await rehearing.nothing_for(text, last.previous_words)


def _acts(found: Lookup | None, actions: tuple[str, ...]) -> bool:
    """The lookup answers with an intent whose action is one of ``actions``."""
    return (
        found is not None
        and found.match.intent is not None
        and found.match.route not in ("none", "confirm")
        and found.entry is not None
        and found.entry.action in actions
    )


def _asks(found: Lookup | None) -> bool:
    """The lookup leads only to a question about an intent (a ``confirm`` match)."""
    return found is not None and found.entry is not None and found.match.route == "confirm"
