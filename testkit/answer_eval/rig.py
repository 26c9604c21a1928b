"""The pipeline under evaluation, in-process: Router -> Responder -> AnswerGuard -> a tap
(the turn's one decision, carried out).

The pieces are the bot's own, wired as a call session wires them (``bot.pipeline.session``)
with the packaged embedder and LLM, an intent cache over a ``MemoryStore`` as a node without
Redis builds it, and the knowledge index. Each case is a new conversation (its own
Responder history and guard memory), as a new call would be; the models, the cache and the
index are shared, as on a node. Transcripts go in as the Transcriber sends them; the texts
of what the speaker would say come out. No synthesis is needed: the cache's answer audio is
silence, since only its text is judged.

Spoken turns may come with the second recognizer's transcript of the same audio (the bot's
default recognizer has two passes; ``bot.pipeline.rehear``): the router then hears a turn
again as on a call, and gets that transcript, decoded ahead and cached like the first one
(``ReplayedSecondPass``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from bot.intents.cache import IntentCache
from bot.intents.store import MemoryStore
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.deciding.call_lookups import CallLookups
from bot.pipeline.deciding.decider import Decider
from bot.pipeline.frames import CallAction, DataFrame, Frame, PlayAudio, ResponseDone, Speak
from bot.pipeline.frames import Transcript as TranscriptFrame
from bot.pipeline.processor import Collector, Processor
from bot.pipeline.rehear import Rehearing
from bot.pipeline.stages.answer_guard import AnswerGuard
from bot.pipeline.stages.responder import Responder
from bot.pipeline.stages.router import Router
from bot.pipeline.turn import Turn
from bot.profile import BotProfile
from serve import LLM, TTS, ChatMessage, Embedder, StageTimings, Transcription
from serve.base import unhurried
from serve.registry import ModelSpec, embedder_backends, llm_backends
from telephony.config import SAMPLE_RATE
from testkit.answer_eval.questions import Case
from testkit.answer_eval.records import TEXT, Said, TurnRecord

#: Questions the caller answers in one turn at most (an intent's, then an entry's).
MAX_QUESTIONS = 2
#: Longest wait for one answer; past it the turn is recorded as failed, not waited on.
TURN_TIMEOUT_S = 300.0
#: A turn's embedding may take this long here (the node allows 2 s).
EVAL_TIMEOUT_S = 15.0


class SilentTTS(TTS):
    """The intent cache's answer audio: 10 ms of silence per answer, since only the answer's
    text is judged here."""

    name = "silent"

    def _load(self) -> None:
        pass

    async def warmup(self) -> None:
        pass

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        yield bytes(2 * sample_rate // 100)


#: A turn's audio where the second transcript is replayed: the router hears a turn again
#: only when it has audio; what that audio says is ``ReplayedSecondPass.text``.
STAND_IN_AUDIO = bytes(2 * SAMPLE_RATE // 100)


class ReplayedSecondPass:
    """The second recognizer of a two-pass ASR, replayed: its transcript of the turn being
    fed, decoded ahead from the same synthesized audio (``bench.answer_eval``)."""

    def __init__(self) -> None:
        self.text = ""
        self.asked = 0

    async def second_pass(
        self, pcm: bytes, sample_rate: int, *, timings: StageTimings | None = None
    ) -> Transcription:
        self.asked += 1
        return Transcription(text=self.text, confidence=1.0, audio_ms=0.0, no_speech_prob=0.0)


@dataclass(frozen=True)
class _Flushed(DataFrame):
    """Sent after a turn's transcript: every stage passes it on in order, so when it reaches
    the tap every frame of that turn's answer has."""

    turn: Turn


class _Tap(Collector):
    """The end of the pipeline: keeps the frames and notes when each answer ended."""

    name = "answer-eval-tap"

    def __init__(self) -> None:
        super().__init__()
        self.flushed: dict[int, asyncio.Event] = {}
        self.finished: dict[int, float] = {}

    async def put(self, frame: Frame) -> None:
        if isinstance(frame, _Flushed):
            self.flushed.setdefault(frame.turn.index, asyncio.Event()).set()
            return
        if isinstance(frame, ResponseDone):
            self.finished.setdefault(frame.turn.index, time.perf_counter())
        self.frames.append(frame)

    def of(self, turn: Turn) -> list[Frame]:
        return [f for f in self.frames if getattr(f, "turn", None) is turn]


@dataclass
class Rig:
    """The loaded models and the profile's cache and index, ready for conversations."""

    profile: BotProfile
    embedder: Embedder
    llm: LLM
    cache: IntentCache
    knowledge: KnowledgeIndex
    #: Turns the router heard again (a second transcript asked for), over all conversations.
    second_passes: int = 0

    @classmethod
    async def load(
        cls,
        profile: BotProfile,
        spec: ModelSpec | None = None,
        *,
        llm_timeout_s: float | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> Rig:
        """Load and warm the embedder and the LLM ``spec`` names (the bot's defaults), then
        build the intent cache and the knowledge index as a node does."""
        spec = spec or ModelSpec()
        embedder = embedder_backends.create(spec.embedder or "minilm", spec)
        llm = llm_backends.create(spec.llm, spec)
        for provider in (embedder, llm):
            started = time.monotonic()
            await provider.load()
            await provider.warm()
            if progress is not None:
                elapsed = time.monotonic() - started
                progress(f"loaded {provider.description} in {elapsed:.1f}s")
        if llm_timeout_s is not None:
            llm.timeout_s = llm_timeout_s
        tts = SilentTTS()
        await tts.load()
        cache = IntentCache(MemoryStore(), embedder, tts, voice="silent", sample_rate=SAMPLE_RATE)
        # What is evaluated is what the bot says; a turn's time limit (2 s for an
        # embedding) is the node's business, and a loaded machine passed it.
        embedder.timeout_s = max(embedder.timeout_s, EVAL_TIMEOUT_S)
        with unhurried():  # as the node's start-up: no caller waits for it
            await cache.publish(profile.intents, profile.intent_matching)
            knowledge = await KnowledgeIndex.build(
                profile.knowledge, embedder, profile.knowledge_matching
            )
            rig = cls(profile, embedder, llm, cache, knowledge)
            await rig._warm_system_prompt()
        return rig

    async def _warm_system_prompt(self) -> None:
        # As the node does: the first answer should not pay for the system prompt.
        warm = [
            ChatMessage(role="system", content=self.profile.system_prompt),
            ChatMessage(role="user", content="Hello"),
        ]
        async with aclosing(self.llm.stream(warm, max_tokens=1)) as pieces:
            async for _ in pieces:
                pass

    async def converse(
        self,
        case: Case,
        heard: Sequence[str],
        input: str = TEXT,
        second: Sequence[str] | None = None,
    ) -> list[TurnRecord]:
        """Feed ``heard`` (one transcript per ask of ``case``) as one call's turns, each after
        the last one's answer ended; one record per turn. ``second``: the second
        recognizer's transcript of each ask, for the turns the router hears again."""
        profile = self.profile
        replay = ReplayedSecondPass() if second is not None else None
        rehearing = Rehearing(replay, sample_rate=SAMPLE_RATE) if replay is not None else None
        # One call's decider, as a node builds it (``CallContext``).
        decider = Decider(CallLookups(self.cache, self.knowledge), profile)
        router = Router(decider, rehearing=rehearing)
        responder = Responder(self.llm, profile, apology_pcm=b"", decider=decider)
        guard = AnswerGuard(
            unsure=profile.unsure,
            unsure_pcm=b"",  # synthesized ahead on a node: a PlayAudio with its text
            known_names=(profile.name,),
            private=(profile.system_prompt,),
        )
        tap = _Tap()
        router.link(responder).link(guard).link(tap)
        stages: list[Processor] = [router, responder, guard]
        for stage in stages:
            stage.start()
        try:
            records = []
            for n, text in enumerate(heard):
                if replay is not None and second is not None:
                    replay.text = second[n]
                records.append(
                    await self._turn(router, tap, case, n, text, input=input, again=replay)
                )
            return records
        finally:
            for stage in stages:
                await stage.stop()
            if replay is not None:
                self.second_passes += replay.asked

    async def _turn(
        self,
        first: Processor,
        tap: _Tap,
        case: Case,
        n: int,
        text: str,
        *,
        input: str,
        again: ReplayedSecondPass | None = None,
    ) -> TurnRecord:
        text = text.strip()
        if not text:  # the Transcriber drops a turn without words
            return TurnRecord(case, n, text, (), "none", input=input)
        started = time.perf_counter()
        turn, frames, error = await self._feed(first, tap, case, text, again=again)
        asked = None
        for _ in range(MAX_QUESTIONS):
            if turn.route != "confirm" or error is not None:
                break
            # The caller answers the question: yes when it is about what they asked, the
            # one they meant of a two-choice question (else neither). A "no" to an intent's
            # question may bring a question about a knowledge entry.
            asked = turn.intent
            reply = _reply(turn, case.asks[n].expect)
            turn, more, error = await self._feed(first, tap, case, reply)
            frames = frames + more
        ended = tap.finished.get(turn.index, time.perf_counter())
        topics = {e.answer: e.topic for e in self.profile.knowledge}
        return TurnRecord(
            case=case,
            turn=n,
            heard=text,
            said=tuple(
                Said(f.text, generated=isinstance(f, Speak) and f.generated)
                for f in frames
                if isinstance(f, Speak | PlayAudio)
            ),
            route=turn.route,
            intent=turn.intent,
            retrieved=tuple(topics.get(a, "?") for a in turn.knowledge),
            refusals=tuple(turn.refusals),
            actions=tuple(f.action for f in frames if isinstance(f, CallAction)),
            ms=(ended - started) * 1000.0,
            input=input,
            error=error or turn.error,
            asked=asked,
        )

    async def _feed(
        self,
        first: Processor,
        tap: _Tap,
        case: Case,
        text: str,
        *,
        again: ReplayedSecondPass | None = None,
    ) -> tuple[Turn, list[Frame], str | None]:
        """One transcript through the stages, until its answer is flushed; ``again``: the
        second recognizer, set to what it heard in the same audio (None: no second hearing,
        as for the caller's yes or no to a question, which are written, not spoken)."""
        turn = Turn(call_id=f"answer-eval-{case.id}", transcript=text)
        if again is not None:
            turn.audio = STAND_IN_AUDIO
        turn.mark("transcript_ready")
        flushed = tap.flushed.setdefault(turn.index, asyncio.Event())
        await first.put(TranscriptFrame(turn=turn, text=text))
        await first.put(_Flushed(turn=turn))
        error = None
        try:
            await asyncio.wait_for(flushed.wait(), TURN_TIMEOUT_S)
        except TimeoutError:
            error = f"no answer in {TURN_TIMEOUT_S:.0f} s"
        return turn, tap.of(turn), error


def _reply(turn: Turn, meant: str | None) -> str:
    """What a caller who meant ``meant`` (an intent or a knowledge entry's topic id)
    answers to the question the bot asked on ``turn``."""
    decision = turn.decision
    options = decision.asks.options if decision is not None and decision.asks else ()
    if options:
        names = [option.name for option in options]
        if meant in names:
            return "The first one." if names.index(meant) == 0 else "The second one."
        return "Neither."
    return "Yes." if turn.intent == meant else "No."
