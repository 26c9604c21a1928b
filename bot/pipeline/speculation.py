"""Work started while the caller pauses, kept or thrown away when the turn ends.

When the caller has been silent for ``speculate_after_ms`` the endpointer hands the turn
so far to a ``Speculator``: it transcribes it, hears it again where worth it, and decides
it (``bot.pipeline.deciding.decider``, the same decision the end of the turn makes) while the
endpointer keeps listening. If the caller speaks again the result is dropped. If the
silence lasts, the result is used twice:

* how long the turn waits follows from the decision (``bot.pipeline.pause_reading``): an
  intent's answer to a finished request ends it at once, a question or "not sure" waits
  longer for a caller who was only pausing, words that read as an unfinished thought keep
  the turn open (``bot.pipeline.language.end_of_turn``);
* when the turn ends, the transcript and the decision are already there (reused while the
  words and the conversation are unchanged), so neither sits on the path between the
  caller's last word and the bot's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.answers.small_talk import is_small_talk, small_talk_kind
from bot.answers.text import sentences
from bot.pipeline.clock import MONOTONIC, Clock
from bot.pipeline.language.end_of_turn import judge, whole_question
from bot.pipeline.language.intonation import Intonation, read_intonation
from bot.pipeline.rehear import ends_call
from bot.pipeline.said_ahead import live_words
from serve import ASR, ProviderError, StageTimings
from serve.asr import Vocabulary
from serve.priority_pool import Priority, Urgency, priority

if TYPE_CHECKING:
    from bot.intents.cache import Lookup
    from bot.pipeline.deciding.decider import Decider
    from bot.pipeline.deciding.decision import Decision
    from bot.pipeline.rehear import Rehearing

log = logging.getLogger(__name__)


def looks_complete(text: str) -> bool:
    """True when ``text`` reads as a finished thought rather than a caller mid-sentence.

    Whisper punctuates any fragment it hears; ``bot.pipeline.language.end_of_turn.judge`` reads the
    words as well ("I'd like to change." dangles, "Where is my order?" does not).
    """
    return judge(text) == "finished"


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
    #: "Can you hack it?"). The end of turn reads these words too; the decision takes them
    #: where they lead somewhere.
    second: str | None = None
    no_speech_prob: float = 1.0
    #: Time inside each model call of the pass (``asr``...).
    model_ms: dict[str, float] = field(default_factory=dict)
    #: The intent cache's lookup of the words heard (the turn log's ``route``).
    lookup: Lookup | None = None
    #: What the bot would do with the words (``bot.pipeline.deciding.decider``), decided in the
    #: conversation as it stood (``version``): the end of the turn reuses it while neither
    #: changed. None: no words, or the pass failed.
    decision: Decision | None = None
    version: int = -1
    finished_at: float | None = None
    failed: bool = False
    #: How the voice ended (``bot.pipeline.language.intonation``), read where the turn
    #: may wait on it (a question or "not sure" would follow: ``_WAITS_ON_INTONATION``);
    #: None: not read, or too little voice.
    intonation: Intonation | None = None
    #: Where the pass's jobs stand in the shared pool's queue: behind turns that have
    #: ended, until this turn ends too; withdrawn when the caller speaks again. Each of its
    #: jobs (the first hearing, the lookup, the second hearing) keeps the place of the
    #: first: a caller who paused earlier is heard again before a later one is heard once.
    priority: Priority = field(
        default_factory=lambda: Priority(Urgency.AHEAD, keeps_place=True), repr=False
    )
    #: The second hearing begun beside the first (``Rehearing.early``), at
    #: ``Urgency.SPARE`` until the first hearing's lookup says it is needed (raised to the
    #: pass's level) or not (withdrawn); None: none begun.
    spare: Priority | None = field(default=None, repr=False)
    spare_needed: bool = False

    @property
    def hit(self) -> bool:
        """An intent's answer to the words as first heard, alone (not joined to the turn
        before, not heard again): a whole request."""
        d, found = self.decision, self.lookup
        return (
            d is not None
            and d.kind == "answer"
            and d.route in ("exact", "semantic")
            and found is not None
            and found.match.route in ("exact", "semantic")
            and found.match.intent == d.intent
        )

    @property
    def answers(self) -> bool:
        """The operator's own words answer the words as first heard: an intent's answer
        (``hit``) or a knowledge entry said as written. Such a turn ends as soon as a cached
        intent's does (``TurnDetector``): the answer is as sure, and the pass has already
        heard the words twice where they needed it. Not small talk: "Hello," is as often
        the start of a request ("Hello, | is anyone there?", a 200-300 ms comma pause) as
        all of it; small talk waits the finished sentence's silence, a greeting longer
        (``greets``)."""
        if self.hit:
            return True
        d = self.decision
        return (
            d is not None and d.kind == "answer" and d.route == "knowledge" and d.heard == "first"
        )

    @property
    def greets(self) -> bool:
        """The bot would answer the words as a greeting ("Hello?", "Hi there."): small
        talk of that kind only (not "Is anyone there?", a question the caller waits on).
        As often the start of a request as all of it."""
        return self._small_talk_of_kind("greeting")

    @property
    def acknowledges(self) -> bool:
        """The bot would answer the words as a bare yes, no or okay with nothing asked
        ("Yes.", "Okay."): as often the start of a request as all of it."""
        return self._small_talk_of_kind("acknowledgement")

    def _small_talk_of_kind(self, kind: str) -> bool:
        d = self.decision
        return (
            d is not None
            and d.kind == "answer"
            and d.route == "small_talk"
            and small_talk_kind(d.words) == kind
        )

    @property
    def acts(self) -> bool:
        """The answer ends or transfers the call."""
        return self.decision is not None and self.decision.action in ("hangup", "transfer")

    @property
    def hangs_up(self) -> bool:
        """The answer ends the call ("Bye bye.")."""
        return self.decision is not None and self.decision.action == "hangup"

    @property
    def acts_on_reply(self) -> bool:
        """The words are a yes to a question or offer whose yes acts (a transfer, a
        hang-up): that cannot be taken back, and "Okay, okay." may start a request
        ("Right, okay, so | what time ..."): the end of turn waits as for a goodbye."""
        d = self.decision
        return d is not None and d.route == "confirmed" and d.action is not None

    @property
    def doubtful(self) -> bool:
        """The bot would only ask about the words ("Is this about ...?", or a lookup's
        number): a weak match, as often made on a fragment ("My parcel arrived and" heard
        as "My parcel arrived done") as on a whole request."""
        return self.decision is not None and self.decision.kind in ("ask", "collect")

    @property
    def nowhere(self) -> bool:
        """Heard again, and the bot has nothing to say but "not sure": the end of turn
        waits ``nowhere_silence_ms``, since a caller pausing mid-request ("I think I was
        charged | twice for my order") may go on."""
        d = self.decision
        if self.second is None or d is None or d.kind != "unsure":
            return False
        # "... Hello?": a caller who finished and heard nothing yet, waiting for an answer.
        said = sentences(self.transcript)
        return not (len(said) > 1 and is_small_talk(said[-1]))


#: The decisions whose wait a fallen voice may shorten (``bot.pipeline.pause_reading``):
#: a question about an intent or a number, or "not sure". Only their passes read the pitch.
_WAITS_ON_INTONATION = frozenset({"ask", "collect", "unsure"})


class Speculator:
    """Runs one call's speculative transcription and decision, one pass at a time."""

    def __init__(
        self,
        asr: ASR,
        *,
        sample_rate: int,
        decider: Decider | None = None,
        call_id: str = "",
        max_no_speech_prob: float = 0.8,
        rehearing: Rehearing | None = None,
        vocabulary: Vocabulary | None = None,
        clock: Clock = MONOTONIC,
        say_ahead: Callable[[str], None] | None = None,
        read_intonation: bool = True,
    ) -> None:
        self._asr = asr
        #: Whether the pass reads how the voice ended where the turn would wait long.
        self._read_intonation = read_intonation
        #: Words the decision will say that have no ready audio, handed over to be
        #: synthesized in the pause (``bot.pipeline.said_ahead``).
        self._say_ahead = say_ahead
        #: The call's clock: when each pass starts and finishes.
        self._clock = clock
        #: The profile's words, heard by as at the end of the turn (bot/vocabulary.py).
        self._vocabulary = vocabulary
        self._rehearing = rehearing
        #: The call's decider (None: the words are heard, not decided).
        self._decider = decider
        self._call_id = call_id
        self._rate = sample_rate
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
        spec = Speculation(pause_id=pause_id, audio_bytes=len(audio), started_at=self._clock.now())
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
        if spec.spare is not None and spec.spare_needed:
            spec.spare.raise_to(Urgency.NOW)
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
            if self._current.spare is not None:
                self._current.spare.withdraw()
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
        early = self._hear_early(spec, audio, timings)
        try:
            result = await self._asr.transcribe(
                audio, self._rate, vocabulary=self._vocabulary, timings=timings
            )
            spec.no_speech_prob = result.no_speech_prob
            text = result.text.strip()
            spec.heard = text
            if text and result.no_speech_prob <= self._max_no_speech:
                spec.transcript = text
                await self._decide(spec, audio, text, timings, early)
        except ProviderError as exc:
            log.debug("speculative transcription failed: %s", exc)
            spec.failed = True
        finally:
            if early is not None and (not spec.spare_needed or not early.done()):
                # Not needed (an intent answered, the first hearing failed) or the pass
                # was cancelled while waiting for it: withdrawn, never left running.
                await _dropped(spec, early)
            spec.model_ms = dict(timings.durations_ms)
            spec.finished_at = self._clock.now()
        return spec

    def _hear_early(
        self, spec: Speculation, audio: bytes, timings: StageTimings
    ) -> asyncio.Task[str | None] | None:
        """The second hearing, begun beside the first at ``Urgency.SPARE`` (one core hears
        a turn while the other is free, so a turn that needs both hearings has them ~110 ms
        sooner); None: not wanted here (no second recognizer, or not asked for)."""
        if self._rehearing is None or not self._rehearing.early:
            return None
        spec.spare = Priority.of(Urgency.SPARE, keeps_place=True)  # at once, or dropped
        with priority(spec.spare):  # the task's jobs carry it (the context is copied)
            return asyncio.create_task(
                self._rehearing.hear(audio, timings=timings), name="second hearing"
            )

    async def _hear_again(
        self,
        spec: Speculation,
        audio: bytes,
        timings: StageTimings,
        early: asyncio.Task[str | None] | None,
    ) -> str | None:
        """The second recognizer's words: the hearing begun with the first, raised to the
        pass's level now that it is needed, or one begun now (none was, or it was dropped:
        no worker was free for it)."""
        assert self._rehearing is not None
        if early is not None and spec.spare is not None:
            spec.spare_needed = True
            spec.spare.raise_to(spec.priority.level, budget_s=spec.priority.budget_s)
            try:
                heard = await early
            except asyncio.CancelledError:
                if self._current is spec:
                    raise  # the pass itself was cancelled
                return None  # withdrawn: the caller spoke again
            if heard is not None or self._current is not spec:
                return heard
        return await self._rehearing.hear(audio, timings=timings)

    async def _decide(
        self,
        spec: Speculation,
        audio: bytes,
        text: str,
        timings: StageTimings,
        early: asyncio.Task[str | None] | None = None,
    ) -> None:
        """Look the words up, decide them, and hear them again where worth it: when the
        decision asks for the second words (the first lead nowhere), or for the pause's
        reading, unless the operator's words answer a whole question as first heard
        (``_sure_as_heard``)."""
        decider = self._decider
        if decider is not None and decider.lookups.cache is not None:
            try:
                spec.lookup = await decider.lookups.intent(text)
            except ProviderError as exc:
                log.debug("speculative lookup failed: %s", exc)
        worth = self._worth_hearing_again(spec, text)
        asked = False

        async def heard_again() -> str | None:
            """The second words, heard once, when asked for (None: not worth hearing
            again here, or the second hearing failed)."""
            nonlocal asked
            if worth and not asked:
                asked = True
                spec.second = await self._hear_again(spec, audio, timings, early)
            return spec.second

        if decider is None or self._current is not spec:
            if worth and decider is None:
                await heard_again()  # the words are heard, not decided: for the reading
            return  # nothing to decide, or the caller spoke again
        spec.version = decider.conversation.version
        spec.decision = await decider.decide(text, call_id=self._call_id, hear=heard_again)
        # What the decision says is made from here, beside the rest of the pass: the
        # second hearing for the reading alone (200-400 ms at 16 calls) no longer delays it.
        words = live_words(spec.decision)
        if words is not None and self._say_ahead is not None and self._current is spec:
            self._say_ahead(words)
        if worth and not asked and not _sure_as_heard(spec.decision, text):
            await heard_again()  # for the pause's reading only: the decision is made
        if self._read_intonation and spec.decision.kind in _WAITS_ON_INTONATION:
            # ~6 ms of numpy on a few seconds of voice, off the event loop.
            spec.intonation = await asyncio.to_thread(read_intonation, audio, self._rate)

    def _worth_hearing_again(self, spec: Speculation, text: str) -> bool:
        """Words that read as finished (or say neither) that no intent answers, and no
        small talk, are heard again by the second recognizer, if there is one: a fragment
        the first recognizer made a sentence of ("Could you check if" heard as "Can you
        hack it?", "Do you deliver to" as "You believe her too"). The end of turn reads
        the second words too (``bot.pipeline.pause_reading``), and the decision takes
        them where they lead somewhere. A pass the caller has spoken over is not."""
        found = spec.lookup
        if self._rehearing is None or self._current is not spec:
            return False
        if ends_call(found):
            return True  # a hang-up on misheard words cannot be taken back: heard twice
        answered = (
            found is not None
            and found.entry is not None
            and found.match.intent is not None
            and found.match.route not in ("none", "confirm")
        )
        return not answered and judge(text) in ("finished", "open") and not is_small_talk(text)


def _sure_as_heard(decision: Decision, text: str) -> bool:
    """A knowledge entry answers the words as first heard, said as written, and they are a
    question asked whole (``whole_question``): the answer needs no second hearing, and
    neither does the pause's reading. A second recognizer is what tells half a request
    heard as a sentence ("I got an email." of "I got an email | saying my order was
    cancelled", which the order confirmation's entry answers); such halves are statements
    or short questions. A whole question the second recognizer mishears no longer waits
    the unsure silence for it."""
    return (
        decision.kind == "answer"
        and decision.route == "knowledge"
        and decision.heard == "first"
        and whole_question(text)
    )


async def _dropped(spec: Speculation, early: asyncio.Task[str | None]) -> None:
    """A second hearing begun beside the first that is not needed: its job is withdrawn
    if it has not started (one already running finishes in the background, unread)."""
    if spec.spare is not None:
        spec.spare.withdraw()
    if not early.done():
        early.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await early
