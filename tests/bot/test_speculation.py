"""Transcription and intent lookup during the caller's pause, and the early end of a turn."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from typing import Literal

import numpy as np
import pytest

from bot.intents.cache import Lookup
from bot.intents.match import Match
from bot.intents.store import CacheEntry
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.deciding.decider import Decider
from bot.pipeline.deciding.decision import Decision
from bot.pipeline.frames import AudioIn, EndOfTurn, Transcript
from bot.pipeline.pause_reading import PauseReading
from bot.pipeline.processor import Collector
from bot.pipeline.rehear import Rehearing
from bot.pipeline.speculation import Speculation, Speculator, looks_complete
from bot.pipeline.stages.transcriber import Transcriber
from bot.pipeline.stages.turn_detector import TurnDetector
from bot.pipeline.turn import Turn
from bot.pipeline.turnlog import turn_record
from bot.profile import EndpointingConfig
from serve import ASR, Transcription, TwoPassASR
from serve.base import SHARED_WORKERS, shared_executor
from serve.errors import WorkDropped
from serve.priority_pool import Urgency
from tests.bot.deciding import decider_for, router_for
from tests.bot.fakes import FRAME_BYTES, EnergyStream, ScriptedASR, glide, silence, tone, voice

CFG = EndpointingConfig(
    min_speech_ms=100,
    end_silence_ms=500,
    speculate_after_ms=160,
    sentence_end_silence_ms=300,
    unfinished_silence_ms=1500,
    unsure_silence_ms=1200,
    nowhere_silence_ms=1100,
    question_silence_ms=1000,
    hangup_silence_ms=900,
    barge_in_ms=200,
)


class FakeLookup:
    """The intent cache's answer for one phrase (the boundary the call's lookups call)."""

    #: As a cache whose copy is trusted, at one configuration.
    fresh = True
    version = "v1"

    def __init__(
        self,
        hit_text: str | None,
        route: Literal["semantic", "confirm"] = "semantic",
        action: Literal["hangup", "transfer"] | None = None,
    ) -> None:
        self.hit_text = hit_text
        self.route = route
        self.action = action
        self.calls: list[str] = []

    async def lookup(self, text: str) -> Lookup:
        self.calls.append(text)
        if text != self.hit_text:
            return Lookup(
                match=Match(route="none", intent=None, score=0.2), entry=None, lookup_ms=1
            )
        entry = CacheEntry(
            key="k",
            name="order_status",
            answer="It ships tomorrow.",
            action=self.action,
            examples=(text,),
            negatives=(),
            example_vectors=None,  # type: ignore[arg-type]
            negative_vectors=None,  # type: ignore[arg-type]
            audio=b"\x00\x00" * 160,
            sample_rate=8000,
            confirm="Do you want to know where your order is?",
        )
        # As the intent cache does: a question names the intent it asks about as ``best``.
        asking = self.route == "confirm"
        match = Match(
            route=self.route,
            intent=None if asking else "order_status",
            score=0.8,
            best="order_status",
        )
        return Lookup(match=match, entry=entry, lookup_ms=1)


async def drive(
    pcm: bytes,
    asr: ASR,
    lookup: object | None,
    cfg: EndpointingConfig = CFG,
    *,
    rehearing: Rehearing | None = None,
    knowledge: KnowledgeIndex | None = None,
    decider: Decider | None = None,
) -> tuple[list[object], int | None, Speculator]:
    """Feed 20 ms frames; return the frames out and the silence (ms) at the end of turn.
    ``lookup``: the intent cache (or a fake of it) the call's decider reads, unless a
    ``decider`` is given (one a router shares: the conversation before)."""
    await asr.load()
    if decider is None:
        decider = decider_for(lookup, knowledge=knowledge)  # type: ignore[arg-type]
    spec = Speculator(asr, sample_rate=8000, decider=decider, rehearing=rehearing)
    ep = TurnDetector(EnergyStream(), cfg, call_id="c", speculator=spec)
    sink = Collector()
    ep.link(sink)
    ended_at_ms: int | None = None
    silent_ms = 0
    for i in range(0, len(pcm), FRAME_BYTES):
        frame = pcm[i : i + FRAME_BYTES]
        silent_ms = silent_ms + 20 if not any(frame) else 0
        await ep.process(AudioIn(pcm=frame, at=10.0 + i / 16000))
        await spec.settle()  # the pass finishes within the frame (a fast model)
        if ended_at_ms is None and any(isinstance(f, EndOfTurn) for f in sink.frames):
            ended_at_ms = silent_ms
    return sink.frames, ended_at_ms, spec


def turn_of(frames: list[object]) -> EndOfTurn:
    ends = [f for f in frames if isinstance(f, EndOfTurn)]
    assert len(ends) == 1, frames
    return ends[0]


@pytest.mark.parametrize(
    ("text", "complete"),
    [
        ("Where is my order?", True),
        ("I'd like to speak to someone.", True),
        ("Yes.", True),
        ("I want to.", False),
        ("Where is my order and", False),
        ("Can you tell me, um.", False),
        ("So I was wondering...", False),
        ("I placed it last week,", False),
        ("", False),
    ],
)
def test_looks_complete(text: str, complete: bool) -> None:
    assert looks_complete(text) is complete


async def test_a_cached_intent_ends_the_turn_without_waiting_out_the_silence() -> None:
    asr = ScriptedASR("Where's my parcel?")
    frames, ended_at, _ = await drive(
        tone(600) + silence(600), asr, FakeLookup("Where's my parcel?")
    )
    end = turn_of(frames)
    assert end.turn.eot_reason == "early"
    assert ended_at is not None and ended_at <= 200, ended_at  # not 500 ms
    assert end.turn.pause_id is not None


def hiss(ms: int, rms: int = 300) -> bytes:
    """A fricative: a sound the VAD does not call speech (the fake's bar is rms 500), above
    the energy floor (-50 dBFS is rms ~100)."""
    rng = np.random.default_rng(ms)
    return (rng.standard_normal(8000 * ms // 1000) * rms).astype("<i2").tobytes()


async def test_a_cached_intent_ends_the_turn_on_quiet_not_on_a_fricative() -> None:
    # "I've been waiting two weeks | for my parcel": the VAD took the "s f" of "weeks for"
    # for 200 ms of silence, and the cached intent the pass heard ended the turn in it.
    words = "I've been waiting two weeks."
    pcm = tone(600) + hiss(240) + tone(400) + silence(600)
    frames, _, spec = await drive(pcm, ScriptedASR(words), FakeLookup(words))
    end = turn_of(frames)  # one turn: the caller's words on both sides of the hiss
    assert len(end.turn.audio) >= len(tone(600) + hiss(240) + tone(400))
    assert spec.started == 2 and spec.discarded == 1
    # After a fricative that ends the words, the turn ends as soon as the line is quiet.
    frames, ended_at, _ = await drive(
        tone(600) + hiss(120) + silence(600), ScriptedASR(words), FakeLookup(words)
    )
    assert turn_of(frames).turn.eot_reason == "early"
    assert ended_at is not None and ended_at <= 60, ended_at
    # A line never that quiet: the wait of a finished sentence.
    frames, ended_at, _ = await drive(tone(600) + hiss(1000), ScriptedASR(words), FakeLookup(words))
    assert turn_of(frames).turn.eot_reason == "early"


async def test_a_cached_intent_in_words_that_trail_off_is_not_answered_in_the_pause() -> None:
    # "Do you ship to" is close to "Do you ship to Canada?": the caller is mid-sentence
    # ("...to PO boxes?"), so the hit does not end the turn: it waits for the longer silence.
    asr = ScriptedASR("Do you ship to")
    frames, ended_at, _ = await drive(tone(600) + silence(1700), asr, FakeLookup("Do you ship to"))
    assert turn_of(frames).turn.eot_reason == "silence"
    assert ended_at == 1500


async def test_a_finished_sentence_ends_after_the_shorter_silence() -> None:
    asr = ScriptedASR("I have a question about my bill.")
    frames, ended_at, _ = await drive(tone(600) + silence(600), asr, FakeLookup(None))
    assert turn_of(frames).turn.eot_reason == "early"
    assert ended_at == 300


async def test_an_unfinished_sentence_waits_for_the_longer_silence() -> None:
    asr = ScriptedASR("I want to")
    frames, ended_at, _ = await drive(tone(600) + silence(1700), asr, FakeLookup(None))
    assert turn_of(frames).turn.eot_reason == "silence"
    assert ended_at == 1500


def two_pass(
    first: str, second: str, *, early: bool = False
) -> tuple[TwoPassASR, ScriptedASR, Rehearing]:
    """A two-pass recognizer whose first pass hears ``first`` and second ``second``
    (``early``: the pause begins the second hearing with the first)."""
    again = ScriptedASR(second)
    asr = TwoPassASR(ScriptedASR(first), again, early=early)
    rehearing = Rehearing.of(asr, sample_rate=8000)
    assert rehearing is not None
    return asr, again, rehearing


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # "Could you check if | my refund has gone through yet?": tiny.en made a whole
        # question of the first half; the second recognizer hears the sentence still going.
        ("Can you hack it?", "Could you check if"),
        # Words with no final punctuation say neither (they would wait the usual silence).
        ("You believe her too", "Do you deliver to"),
    ],
)
@pytest.mark.parametrize("early", [False, True])
async def test_a_fragment_misheard_as_a_sentence_is_heard_again_and_waited_for(
    first: str, second: str, early: bool
) -> None:
    asr, again, rehearing = two_pass(first, second, early=early)
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, FakeLookup(None), rehearing=rehearing
    )
    assert again.calls == 1
    assert turn_of(frames).turn.eot_reason == "silence"
    assert ended_at == 1500  # not 300: the unfinished limit


@pytest.mark.parametrize(
    ("first", "second", "ends_at"),
    [
        # neither recognizer heard an end: misheard fragments, and some whole requests
        ("Come you packet", "C'mon you package", 1200),
        ("Can you hack it?", "Cognus Packet", 1200),
        ("Can you hack it?", "", 1200),
        # two different sentences of the same audio: "What time does your | customer
        # service open?" said with a pause, both recognizers guessing at the fragment
        ("What can not you", "What time do you have?", 1200),
        ("You will be my group.", "Do you believe in me?", 1200),
        # the second heard a finished sentence where the first put no full stop
        ("Where is my parcel", "Where is my parcel?", 300),
        # ... but in words of its own: only a guess heard an end ("I'd like a refund |
        # for the kettle ...")
        ("I like a reefer", "I'd like a refund.", 1200),
        # much the same sentence, a word or two apart: the words are trusted
        ("Can I pay with people?", "Can I pay with PayPal?", 300),
        (
            "I need to make the phone number on my account.",
            "I need to update the phone number on my account.",
            300,
        ),
    ],
)
async def test_words_heard_again_without_an_end_or_unlike_the_first_wait_a_little_longer(
    first: str, second: str, ends_at: int
) -> None:
    asr, again, rehearing = two_pass(first, second)
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, FakeLookup(None), rehearing=rehearing
    )
    assert again.calls == 1
    assert ended_at == ends_at
    assert turn_of(frames).turn.eot_reason == ("early" if ends_at == 300 else "silence")


@pytest.mark.parametrize(
    ("second", "ends_at", "reason"),
    [
        # "My parcel arrived and | the box was crushed": the fragment, heard with no end,
        # is only close to an intent (a question would be asked): heard again
        ("My parcel arrived and", 1500, "silence"),  # unfinished: the longer limit
        ("My parcel arrived done", 1200, "silence"),  # still no end: a little longer
        # a finished sentence, but the cache would only ask about it: the question waits
        ("My parcel arrived damaged.", 1000, "silence"),
    ],
)
async def test_words_with_no_end_that_an_intent_only_asks_about_are_heard_again(
    second: str, ends_at: int, reason: str
) -> None:
    first = "My parcel arrived damaged"
    asr, again, rehearing = two_pass(first, second)
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, FakeLookup(first, route="confirm"), rehearing=rehearing
    )
    assert again.calls == 1
    assert turn_of(frames).turn.eot_reason == reason
    if ends_at:
        assert ended_at == ends_at
    else:
        assert ended_at is not None and ended_at < 300


async def test_words_with_no_end_that_an_intent_answers_are_not_heard_again() -> None:
    asr, again, rehearing = two_pass("Where is my parcel", "Where is my parcel?")
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, FakeLookup("Where is my parcel"), rehearing=rehearing
    )
    assert again.calls == 0
    assert turn_of(frames).turn.eot_reason == "early"
    assert ended_at == 300


async def test_a_finished_sentence_heard_again_the_same_ends_early_and_is_not_heard_thrice() -> (
    None
):
    asr, again, rehearing = two_pass("What is your fax number?", "What is your fax number?")
    frames, ended_at, spec = await drive(
        tone(600) + silence(600), asr, FakeLookup(None), rehearing=rehearing
    )
    end = turn_of(frames)
    assert end.turn.eot_reason == "early"
    assert ended_at == 300
    assert again.calls == 1
    # The router's second hearing of the ended turn reuses the pause's: same audio.
    result = await spec.result_for(end.turn.pause_id or 0, len(end.turn.audio))
    assert result is not None and result.second == "What is your fax number?"
    other = "Where is your fax number?"
    for second, heard in ((result.second, "What is your fax number?"), (other, other)):
        router = router_for(FakeLookup(other), rehearing=rehearing)  # type: ignore[arg-type]
        router.link(Collector())
        turn = Turn(
            call_id="c",
            audio=end.turn.audio,
            transcript="What is your fax number?",
            speculation=dataclasses.replace(result, second=second, decision=None),
        )
        await router.process(Transcript(turn=turn, text=turn.transcript))
        assert turn.transcript == heard
    assert again.calls == 1


async def heard_twice_alike(
    words: str, knowledge: KnowledgeIndex
) -> tuple[EndOfTurn, int | None, Speculation, int]:
    """A turn of ``words`` (600 ms, then silence) that both recognizers hear alike, on the
    default profile's knowledge base and no intent: its end, the silence (ms) it ended at,
    the pause's pass over it, and how often the second recognizer ran."""
    asr, again, rehearing = two_pass(words, words)
    frames, ended_at, spec = await drive(
        tone(600) + silence(1700), asr, FakeLookup(None), rehearing=rehearing, knowledge=knowledge
    )
    end = turn_of(frames)
    result = await spec.result_for(end.turn.pause_id or 0, len(end.turn.audio))
    assert result is not None and result.decision is not None
    return end, ended_at, result, again.calls


@pytest.mark.parametrize(
    ("words", "entry"),
    [("I got an email.", "order_confirmation"), ("Do you take PayPal?", "payment_methods")],
)
async def test_words_a_knowledge_entry_answers_are_heard_again_in_the_pause(
    knowledge: KnowledgeIndex, words: str, entry: str
) -> None:
    # An entry retrieved for finished words may be retrieved for a fragment as well ("I got
    # an email." of "I got an email | saying my order was cancelled"): unless the words
    # are a question asked whole, the two hearings are compared before the turn ends.
    # Skipping the second hearing for every entry sped knowledge turns under load but cut 2
    # of 42 paused requests of a held-out set (docs/benchmarks.md).
    end, ended_at, result, heard_again = await heard_twice_alike(words, knowledge)
    assert heard_again == 1
    assert result.second == words
    # Heard alike, and the entry answers them as written: as soon as a cached intent's
    # turn would end (the pass ready, the line quiet), not after the finished sentence's
    # 300 ms.
    assert end.turn.eot_reason == "early" and ended_at is not None and ended_at <= 200, ended_at
    assert result.decision is not None
    assert (result.decision.kind, result.decision.intent) == ("answer", entry)
    assert result.answers and not result.hit


async def test_a_whole_question_a_knowledge_entry_answers_is_heard_once(
    knowledge: KnowledgeIndex,
) -> None:
    # A question of five words or more, heard as one finished sentence, that an entry
    # answers as written: no half of the paused sets was heard so, and the second hearing
    # would only delay the answer by a decode (and, where it mishears the question, by the
    # unsure wait of 2 s).
    end, ended_at, result, heard_again = await heard_twice_alike(
        "Can I pay with PayPal?", knowledge
    )
    assert heard_again == 0 and result.second is None
    assert end.turn.eot_reason == "early" and ended_at is not None and ended_at <= 200, ended_at
    assert result.decision is not None
    assert (result.decision.kind, result.decision.intent) == ("answer", "payment_methods")
    assert result.answers


async def test_small_talk_waits_the_finished_sentence_silence(
    knowledge: KnowledgeIndex,
) -> None:
    # "Hello, | is anyone there?": a flite caller paused 200-300 ms at the comma, and an
    # early end at once cut it (tests/calllog/test_call_row.py). Small talk that asks
    # something keeps the finished sentence's 300 ms.
    end, ended_at, result, _ = await heard_twice_alike("Is anyone there?", knowledge)
    assert end.turn.eot_reason == "early" and ended_at == 300, ended_at
    assert result.decision is not None
    assert (result.decision.kind, result.decision.route) == ("answer", "small_talk")
    assert not result.answers and not result.greets


async def test_a_greeting_waits_for_a_caller_who_goes_on(knowledge: KnowledgeIndex) -> None:
    # "Hello?" alone: at 300 ms of a ~300 ms comma pause the bot's own greeting started over
    # a caller's "Hello, | can you hear me?" (the load mix, 1 caller in 8). Its reply says
    # nothing the caller waits for: it waits ``greeting_silence_ms``.
    end, ended_at, result, _ = await heard_twice_alike("Hello?", knowledge)
    assert result.greets
    assert end.turn.pause_reading == PauseReading("finished", "greeting")
    assert end.turn.eot_reason == "silence"
    assert ended_at == EndpointingConfig().greeting_silence_ms == 700, ended_at


@pytest.mark.parametrize("words", ["Yes, yes, yes.", "Okay."])
async def test_a_bare_yes_with_nothing_asked_waits_for_a_caller_who_goes_on(
    knowledge: KnowledgeIndex, words: str
) -> None:
    # "Do you | sell gift cards?" heard as "Yes, yes, yes." (a paused set, the Scottish
    # voice, a 0.7 s pause): with nothing asked, a bare yes or okay starts a request as
    # often as it is all of it, and its reply says nothing the caller waits for. The
    # greeting's 700 ms was as long as that pause; it waits as a yes that acts does.
    end, ended_at, result, _ = await heard_twice_alike(words, knowledge)
    assert result.acknowledges and not result.greets
    assert end.turn.pause_reading == PauseReading("finished", "acknowledgement")
    assert ended_at == EndpointingConfig().acknowledgement_silence_ms == 1500, ended_at


async def test_an_entry_found_in_words_that_trail_off_does_not_end_the_turn_early(
    knowledge: KnowledgeIndex,
) -> None:
    # "Can I pay with PayPal or" ...: an entry about the words so far, but the caller is
    # mid-sentence; the turn waits for the fragment's silence, as for a cached intent.
    end, ended_at, _, _ = await heard_twice_alike("Can I pay with PayPal or", knowledge)
    assert end.turn.eot_reason == "silence"
    assert ended_at == 1500


async def test_words_the_bot_would_only_ask_or_be_unsure_about_are_heard_again_in_the_pause(
    knowledge: KnowledgeIndex,
) -> None:
    # Not an answer: the pause's reading compares the two hearings, as before.
    for first, lookup in (
        ("My parcel arrived damaged.", FakeLookup("My parcel arrived damaged.", route="confirm")),
        ("What is your fax number?", FakeLookup(None)),
    ):
        asr, again, rehearing = two_pass(first, first)
        await drive(
            tone(600) + silence(1700), asr, lookup, rehearing=rehearing, knowledge=knowledge
        )
        assert again.calls == 1, first


async def test_words_an_intent_answers_or_that_dangle_are_not_heard_again() -> None:
    asr, again, rehearing = two_pass("Where's my parcel?", "Where is my parcel?")
    frames, _, _ = await drive(
        tone(600) + silence(600), asr, FakeLookup("Where's my parcel?"), rehearing=rehearing
    )
    assert turn_of(frames).turn.eot_reason == "early"
    asr, again2, rehearing = two_pass("I want to", "I want to")
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, FakeLookup(None), rehearing=rehearing
    )
    assert ended_at == 1500
    assert again.calls == 0 and again2.calls == 0


async def test_words_that_say_neither_wait_for_the_usual_silence() -> None:
    asr = ScriptedASR("Bicycles")  # no final punctuation, nothing dangling
    frames, ended_at, _ = await drive(tone(600) + silence(1700), asr, FakeLookup(None))
    assert turn_of(frames).turn.eot_reason == "silence"
    assert ended_at == 500


async def test_early_end_can_be_switched_off() -> None:
    cfg = CFG.model_copy(update={"early_end": False})
    asr = ScriptedASR("Where's my parcel?")
    frames, ended_at, spec = await drive(
        tone(600) + silence(600), asr, FakeLookup("Where's my parcel?"), cfg
    )
    assert turn_of(frames).turn.eot_reason == "silence"
    assert ended_at == 500
    assert spec.started == 1  # still transcribed ahead of time


async def test_speaking_again_discards_the_pass() -> None:
    asr = ScriptedASR("I want to return it.")
    pcm = tone(400) + silence(240) + tone(400) + silence(600)
    frames, _, spec = await drive(pcm, asr, FakeLookup(None))
    assert spec.started == 2 and spec.discarded == 1
    turn = turn_of(frames).turn
    # the turn holds both stretches of speech, and only the last pause's pass can serve it
    assert len(turn.audio) >= 2 * 8000 * 0.8
    assert spec.ready(turn.pause_id or -1) is not None


async def test_the_transcriber_reuses_the_pass_and_never_runs_asr_again() -> None:
    asr = ScriptedASR("Where's my parcel?")
    lookup = FakeLookup("Where's my parcel?")
    frames, _, spec = await drive(tone(600) + silence(600), asr, lookup)
    calls = asr.calls
    transcriber = Transcriber(asr, sample_rate=8000, speculator=spec)
    sink = Collector()
    transcriber.link(sink)
    await transcriber.process(turn_of(frames))
    assert asr.calls == calls == 1
    (out,) = sink.frames
    assert isinstance(out, Transcript) and out.text == "Where's my parcel?"
    assert out.turn.speculation is not None and out.turn.speculation.hit
    assert lookup.calls == ["Where's my parcel?"]


async def test_a_turn_that_outgrew_the_pass_is_transcribed_again() -> None:
    asr = ScriptedASR("I want to")
    await asr.load()
    spec = Speculator(asr, sample_rate=8000)
    assert spec.start(1, tone(400))
    await spec.settle()
    assert await spec.result_for(2, 100_000) is None  # another pause: the caller spoke
    assert await spec.result_for(1, 10) is None  # less audio than the pass covered
    assert await spec.result_for(1, 100_000) is not None


async def test_no_second_pass_while_one_runs() -> None:
    asr = ScriptedASR("hello")
    await asr.load()
    spec = Speculator(asr, sample_rate=8000)
    assert spec.start(1, tone(200))
    assert not spec.start(2, tone(200))
    await spec.close()


async def test_an_intent_that_hangs_up_in_words_with_no_end_waits_the_hang_up_silence() -> None:
    asr = ScriptedASR("Bye now")  # no final punctuation
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, FakeLookup("Bye now", action="hangup")
    )
    assert turn_of(frames).turn.eot_reason == "silence"
    assert ended_at == CFG.hangup_silence_ms


async def test_an_intent_that_transfers_waits_the_finished_sentence_silence() -> None:
    # A person takes the call either way: the transfer is held to the cache route's wait.
    asr = ScriptedASR("Put me through now")  # no final punctuation: only the hit ends it
    frames, ended_at, _ = await drive(
        tone(600) + silence(600), asr, FakeLookup("Put me through now", action="transfer")
    )
    assert turn_of(frames).turn.eot_reason == "early"
    assert ended_at == 300


def occupy_shared_pool() -> threading.Event:
    """Keep every worker of the shared pool busy until the returned event is set."""
    release = threading.Event()
    started = threading.Barrier(SHARED_WORKERS + 1)

    def hold() -> None:
        started.wait(5.0)
        release.wait(5.0)

    for _ in range(SHARED_WORKERS):
        shared_executor().submit(hold)
    started.wait(5.0)
    return release


async def test_a_pass_still_waiting_for_a_worker_is_withdrawn_when_the_caller_speaks() -> None:
    asr = ScriptedASR("I want to")
    await asr.load()
    spec = Speculator(asr, sample_rate=8000)
    release = occupy_shared_pool()
    try:
        assert spec.start(1, tone(200))
        await asyncio.sleep(0.01)
        assert spec.busy  # queued behind the busy workers
        spec.discard()  # the caller speaks again
        for _ in range(100):
            if not spec.busy:
                break
            await asyncio.sleep(0.01)
        assert not spec.busy  # the next pause can start a pass at once
        assert spec.start(2, tone(400))
    finally:
        release.set()
    found = await spec.result_for(2, 100_000)
    assert found is not None and found.transcript == "I want to"
    assert asr.calls == 1  # the withdrawn pass never ran


async def test_the_turn_ending_makes_its_pass_as_urgent_as_any_ended_turn() -> None:
    asr = ScriptedASR("Where is my order?")
    await asr.load()
    spec = Speculator(asr, sample_rate=8000)
    release = occupy_shared_pool()
    try:
        assert spec.start(1, tone(200))
        waiting = spec._current
        assert waiting is not None and waiting.priority.level == Urgency.AHEAD
        result = asyncio.create_task(spec.result_for(1, 100_000))
        await asyncio.sleep(0.01)
        assert waiting.priority.level == Urgency.NOW
    finally:
        release.set()
    found = await result
    assert found is not None and found.transcript == "Where is my order?"


@pytest.mark.parametrize(
    ("wait", "ends_at", "reason"), [(1000, 1000, "silence"), (0, 300, "early")]
)
async def test_a_finished_sentence_the_cache_would_only_ask_about_waits_the_question_silence(
    wait: int, ends_at: int, reason: str
) -> None:
    # Half a request misheard as a whole one ("Can you send me" as "Can you friend me?"),
    # close only to a question about an intent: the question waits for a caller who was
    # pausing. 0 turns the wait off (the usual finished-sentence silence).
    heard = "Can you friend me?"
    cfg = CFG.model_copy(update={"question_silence_ms": wait})
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700), ScriptedASR(heard), FakeLookup(heard, route="confirm"), cfg
    )
    assert turn_of(frames).turn.eot_reason == reason
    assert ended_at == ends_at


@pytest.mark.parametrize(("end_hz", "fell", "ends_at"), [(110.0, True, 600), (170.0, False, 1000)])
async def test_a_voice_that_fell_at_the_end_shortens_the_question_silence(
    end_hz: float, fell: bool, ends_at: int
) -> None:
    # The same words the cache would only ask about, said with the pitch falling to the
    # bottom of the voice's range on the last word (a finished statement), or held level
    # (a caller pausing mid-sentence): the fall's shorter wait, or the question's.
    heard = "Can you friend me?"
    cfg = CFG.model_copy(update={"fallen_silence_ms": 600})
    said = voice(glide(170.0, 0.5, end_hz, 0.25))
    frames, ended_at, _ = await drive(
        said + silence(1700), ScriptedASR(heard), FakeLookup(heard, route="confirm"), cfg
    )
    turn = turn_of(frames).turn
    assert turn.eot_reason == "silence"
    assert turn.pause_reading is not None
    assert (turn.pause_reading.wait, turn.pause_reading.fell) == ("question", fell)
    assert ended_at == ends_at


async def test_a_caller_going_on_after_words_the_cache_would_ask_about_makes_one_turn() -> None:
    # The pause (800 ms) is shorter than the question silence: no turn ends in it.
    heard = "Can you friend me?"
    frames, _, _ = await drive(
        tone(600) + silence(800) + tone(600) + silence(1700),
        ScriptedASR(heard),
        FakeLookup(heard, route="confirm"),
    )
    assert turn_of(frames).turn.pause_id is not None


async def test_a_finished_sentence_the_cache_answers_does_not_wait_the_question_silence() -> None:
    heard = "Where's my parcel?"
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700), ScriptedASR(heard), FakeLookup(heard)
    )
    assert turn_of(frames).turn.eot_reason == "early"
    assert ended_at is not None and ended_at < 300


async def test_second_words_the_cache_would_only_ask_about_wait_the_question_silence() -> None:
    # The first words lead nowhere; the second recognizer's, which the router goes on
    # with, lead only to a question: that question waits too.
    first, second = "Can you earn me?", "Can you friend me?"
    asr, again, rehearing = two_pass(first, second)
    lookup = FakeLookup(second, route="confirm")
    frames, ended_at, _ = await drive(tone(600) + silence(1700), asr, lookup, rehearing=rehearing)
    assert again.calls == 1
    assert lookup.calls == [first, second]
    assert turn_of(frames).turn.eot_reason == "silence"
    assert ended_at == CFG.question_silence_ms


@pytest.mark.parametrize(("wait", "ends_at", "reason"), [(900, 900, "silence"), (0, 300, "early")])
async def test_a_sentence_an_intent_would_hang_up_on_waits_the_hang_up_silence(
    wait: int, ends_at: int, reason: str
) -> None:
    # "Where can I find" heard as "Bye bye.": the goodbye intent would hang up on a caller
    # who was only pausing. A hang-up cannot be taken back: it waits ``hangup_silence_ms``;
    # 0 turns the wait off (the finished-sentence silence, as before).
    heard = "Bye bye."
    cfg = CFG.model_copy(update={"hangup_silence_ms": wait})
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700), ScriptedASR(heard), FakeLookup(heard, action="hangup"), cfg
    )
    assert turn_of(frames).turn.eot_reason == reason
    assert ended_at == ends_at


async def test_a_caller_going_on_after_words_an_intent_would_hang_up_on_makes_one_turn() -> None:
    heard = "Bye bye."
    frames, _, _ = await drive(
        tone(600) + silence(700) + tone(600) + silence(1700),
        ScriptedASR(heard),
        FakeLookup(heard, action="hangup"),
    )
    assert turn_of(frames).turn.pause_id is not None


async def test_second_words_an_intent_would_hang_up_on_wait_the_hang_up_silence() -> None:
    # The first words lead nowhere; the second recognizer's would end the call.
    first, second = "Okay, thanks, by now.", "Okay, thanks, bye now."
    asr, again, rehearing = two_pass(first, second)
    lookup = FakeLookup(second, action="hangup")
    assert again.calls == 0
    frames, ended_at, _ = await drive(tone(600) + silence(1700), asr, lookup, rehearing=rehearing)
    assert again.calls == 1 and lookup.calls == [first, second]
    assert turn_of(frames).turn.eot_reason == "silence"
    assert ended_at == CFG.hangup_silence_ms


async def test_the_turn_log_says_what_the_pause_found_and_no_words() -> None:
    # Why a turn ended when it did, for the benchmarks and an operator's logs: the pass's
    # flags in the turn line; its words only in the opt-in transcript line.
    found = await FakeLookup("Bye bye.", action="hangup").lookup("Bye bye.")
    turn = Turn(call_id="c")
    assert found.entry is not None
    decided = Decision(
        "answer",
        "semantic",
        "Bye bye.",
        "semantic match",
        intent="order_status",
        entry=found.entry,
        say="Bye.",
    )
    turn.speculation = Speculation(
        pause_id=1,
        audio_bytes=0,
        started_at=0.0,
        heard="Bye bye.",
        second="Bye now.",
        lookup=found,
        decision=decided,
    )
    turn.decision = decided
    record = turn_record(turn)
    assert record["decision"] == {
        "kind": "answer",
        "route": "semantic",
        "why": "semantic match",
        "heard": "first",
        "intent": "order_status",
        "asks": None,
    }
    assert record["pause"] == {
        "route": "semantic",
        "heard_again": True,
        "decided": "answer",
        "hit": True,
        "answers": True,
        "doubtful": False,
        "nowhere": False,
        "hangs_up": True,
        "acts_on_reply": False,
        "greets": False,
        "acknowledges": False,
        "failed": False,
    }
    assert "bye" not in json.dumps(record).lower()
    assert turn_record(Turn(call_id="c"))["pause"] is None
    # The reading the turn waited by, and the turn it was heard with, also where the pass
    # is not the turn's own (a turn heard together with the one before it).
    joined = Turn(call_id="c", pause_reading=PauseReading("open", "unsure"))
    joined.continues = Turn(call_id="c", index=3)
    joined.own_words = "I can do hear me."
    record = turn_record(joined)
    assert (record["pause"], record["goes_on"]) == (None, 3)
    assert record["reading"] == {
        "thought": "open",
        "wait": "unsure",
        "fell": False,
        "end_st": None,
        "long": False,
    }
    assert turn_record(Turn(call_id="c"))["reading"] is None


async def test_words_an_intent_would_hang_up_on_are_heard_again_and_end_the_call_only_so() -> None:
    # "Hi there." heard as "Bye there.": the goodbye intent would end the call of a caller
    # who only greeted. Such words are heard again in the pause, and the second words
    # decide where they lead elsewhere (small talk here): no hang-up, no hang-up wait; the
    # greeting's own wait.
    asr, again, rehearing = two_pass("Bye there.", "Hi there.")
    lookup = FakeLookup("Bye there.", action="hangup")
    frames, ended_at, spec = await drive(
        tone(600) + silence(1700), asr, lookup, rehearing=rehearing
    )
    assert again.calls == 1
    assert lookup.calls == ["Bye there.", "Hi there."]
    turn = turn_of(frames).turn
    decided = turn.pause_reading
    assert decided is not None and decided.wait == "greeting"
    assert ended_at == CFG.greeting_silence_ms
    done = spec.ready(turn.pause_id or -1)
    assert done is not None and done.decision is not None
    assert (done.decision.route, done.decision.heard, done.decision.action) == (
        "small_talk",
        "second",
        None,
    )


async def test_words_an_intent_would_hang_up_on_heard_alike_twice_still_end_the_call() -> None:
    # A goodbye is heard again even as small talk ("Bye bye."); heard alike, it stands.
    asr, again, rehearing = two_pass("Bye bye.", "Bye bye.")
    lookup = FakeLookup("Bye bye.", action="hangup")
    frames, ended_at, spec = await drive(
        tone(600) + silence(1700), asr, lookup, rehearing=rehearing
    )
    assert again.calls == 1
    turn = turn_of(frames).turn
    assert ended_at == CFG.hangup_silence_ms
    done = spec.ready(turn.pause_id or -1)
    assert done is not None and done.hangs_up


class HeardOnce(ScriptedASR):
    """A first recognizer that tells when it has heard the turn."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.done = threading.Event()

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        try:
            return super()._transcribe_impl(pcm, sample_rate)
        finally:
            self.done.set()


class DroppedWhileTheFirstHears(ScriptedASR):
    """A second recognizer whose job started before the first one had heard the turn
    finds no worker free (``WorkDropped``): the spare hearing, however the pool ran it."""

    def __init__(self, text: str, first: HeardOnce) -> None:
        super().__init__(text)
        self.first = first

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        if not self.first.done.is_set():
            self.calls += 1
            raise WorkDropped("no worker was free", waited_s=0.05)
        return super()._transcribe_impl(pcm, sample_rate)


async def test_a_second_hearing_begun_with_the_first_is_used_when_the_first_leads_nowhere() -> None:
    asr, again, rehearing = two_pass("Can you hack it?", "Could you check if", early=True)
    assert rehearing.early
    frames, ended_at, spec = await drive(
        tone(600) + silence(1700), asr, FakeLookup(None), rehearing=rehearing
    )
    end = turn_of(frames)
    done = await spec.result_for(end.turn.pause_id or 0, len(end.turn.audio))
    assert done is not None
    assert (done.second, done.spare_needed, again.calls) == ("Could you check if", True, 1)
    assert ended_at == 1500  # the fragment's wait, as when heard one after the other


async def test_a_second_hearing_begun_with_the_first_is_dropped_when_an_intent_answers() -> None:
    asr, again, rehearing = two_pass("Where's my parcel?", "Where is my parcel?", early=True)
    frames, _, spec = await drive(
        tone(600) + silence(600), asr, FakeLookup("Where's my parcel?"), rehearing=rehearing
    )
    end = turn_of(frames)
    assert end.turn.eot_reason == "early"
    done = await spec.result_for(end.turn.pause_id or 0, len(end.turn.audio))
    assert done is not None and done.decision is not None
    # Not needed: withdrawn (it may have run on a free worker, unread).
    assert (done.second, done.spare_needed) == (None, False)
    assert done.spare is not None and done.spare.withdrawn
    assert again.calls <= 1


async def test_a_second_hearing_no_worker_was_free_for_is_made_when_needed() -> None:
    first = HeardOnce("Can you hack it?")
    again = DroppedWhileTheFirstHears("Could you check if", first)
    asr = TwoPassASR(first, again, early=True)
    rehearing = Rehearing.of(asr, sample_rate=8000)
    assert rehearing is not None
    frames, ended_at, spec = await drive(
        tone(600) + silence(1700), asr, FakeLookup(None), rehearing=rehearing
    )
    end = turn_of(frames)
    done = await spec.result_for(end.turn.pause_id or 0, len(end.turn.audio))
    assert done is not None
    # Dropped (by the pool's budget, or here) or heard once the first had: the words are
    # the second recognizer's either way.
    assert done.second == "Could you check if"
    assert again.calls in (1, 2)
    assert ended_at == 1500
