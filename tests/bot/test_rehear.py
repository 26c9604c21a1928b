"""The second hearing: a turn whose transcript matched nothing is decoded again by the second
recognizer of a two-pass ASR, and the router goes on with the second words when they match.

The recognizers are scripted (the boundary); the router matches through the real MiniLM
embedder and the default profile's intents. The gain on real speech is measured by
``python -m bench.intent_eval --asr --second-pass whisper-base-window`` (docs/benchmarks.md).
"""

from __future__ import annotations

import pytest

from bot.intents.cache import IntentCache
from bot.intents.match import Match
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.frames import PlayAudio, Transcript
from bot.pipeline.processor import Collector
from bot.pipeline.rehear import Rehearing, leads_somewhere, other_words, worth_hearing_again
from bot.pipeline.stages.router import Router
from bot.pipeline.turn import Turn
from bot.profile import DEFAULT_PROFILE, load_profile
from serve import TwoPassASR
from tests.bot.deciding import decider_for, router_for
from tests.bot.fakes import ScriptedASR, silence, tone
from tests.bot.test_speculation import CFG, drive
from tests.bot.test_speculation import turn_of as ended

pytestmark = pytest.mark.models

RATE = 8000
#: A question misheard by the first recognizer (no intent matches it), and heard right.
MISHEARD, HEARD = "What time are you oven?", "What time are you open?"


async def two_pass(second: str, *, fail: bool = False) -> tuple[TwoPassASR, ScriptedASR]:
    again = ScriptedASR(second, fail=fail)
    asr = TwoPassASR(ScriptedASR(MISHEARD), again)
    await asr.load()
    return asr, again


def turn_of(text: str) -> Turn:
    return Turn(call_id="c", transcript=text, audio=silence(800))


async def test_only_a_recognizer_with_a_second_pass_gets_one() -> None:
    assert Rehearing.of(ScriptedASR(), sample_rate=RATE) is None
    asr, _ = await two_pass(HEARD)
    assert Rehearing.of(asr, sample_rate=RATE) is not None


async def test_the_rule_the_router_and_the_bench_share(knowledge: KnowledgeIndex) -> None:
    """``bench.intent_eval --second-pass`` applies these to cached transcripts."""
    assert not leads_somewhere(Match(route="none", intent=None, score=0.2))
    assert leads_somewhere(Match(route="confirm", intent=None, score=0.4, best="returns"))
    assert leads_somewhere(Match(route="semantic", intent="returns", score=0.7))
    assert await worth_hearing_again(MISHEARD, None)
    assert await worth_hearing_again(MISHEARD, knowledge.retrieve)
    assert not await worth_hearing_again(" ", None)
    assert not await worth_hearing_again("Hi there.", None)  # small talk
    paid = "Can I pay with a gift card from your shop?"
    assert not await worth_hearing_again(paid, knowledge.retrieve)
    assert other_words(MISHEARD, HEARD) == HEARD
    assert other_words(MISHEARD, MISHEARD.lower().rstrip("?")) is None
    assert other_words(MISHEARD, "") is None and other_words(MISHEARD, None) is None


async def _route(router: Router, turn: Turn) -> Collector:
    sink = Collector()
    router.link(sink)
    await router.process(Transcript(turn=turn, text=turn.transcript))
    return sink


async def test_the_second_words_are_taken_only_when_they_differ(cache: IntentCache) -> None:
    asr, again = await two_pass(HEARD)
    turn = turn_of(MISHEARD)
    await _route(router_for(cache, rehearing=Rehearing(asr, sample_rate=RATE)), turn)
    assert turn.transcript == HEARD and "asr_second" in turn.model_ms
    assert turn.decision is not None and turn.decision.heard == "second"
    same, _ = await two_pass(MISHEARD.lower().rstrip("?"))
    turn = turn_of(MISHEARD)
    await _route(router_for(cache, rehearing=Rehearing(same, sample_rate=RATE)), turn)
    assert turn.transcript == MISHEARD and turn.decision is not None
    assert turn.decision.heard == "first"
    # No audio to decode, or small talk: no second pass at all.
    calls = again.calls
    router = router_for(cache, rehearing=Rehearing(asr, sample_rate=RATE))
    await _route(router, Turn(call_id="c", transcript=MISHEARD))
    await _route(router, turn_of("Hi there."))
    assert again.calls == calls


async def test_a_failed_second_pass_leaves_the_first_words(cache: IntentCache) -> None:
    asr, again = await two_pass(HEARD, fail=True)
    turn = turn_of(MISHEARD)
    sink = await _route(router_for(cache, rehearing=Rehearing(asr, sample_rate=RATE)), turn)
    assert again.calls == 1 and turn.transcript == MISHEARD
    assert [f.text for f in sink.frames if isinstance(f, Transcript)] == [MISHEARD]


async def test_words_the_knowledge_base_has_an_entry_for_are_not_heard_again(
    cache: IntentCache, knowledge: KnowledgeIndex
) -> None:
    asr, again = await two_pass(HEARD)
    asked = "Can I pay with a gift card from your shop?"
    assert await knowledge.retrieve(asked)
    router = router_for(cache, knowledge=knowledge, rehearing=Rehearing(asr, sample_rate=RATE))
    turn = turn_of(asked)
    await _route(router, turn)
    assert again.calls == 0 and turn.transcript == asked


async def test_the_router_answers_what_the_second_pass_heard(cache: IntentCache) -> None:
    alone = await cache.lookup(MISHEARD)
    assert alone.match.route == "none"  # the first transcript leads nowhere
    asr, _ = await two_pass(HEARD)
    turn = turn_of(MISHEARD)
    sink = await _route(router_for(cache, rehearing=Rehearing(asr, sample_rate=RATE)), turn)
    assert (turn.route, turn.intent) in {("exact", "opening_hours"), ("semantic", "opening_hours")}
    assert turn.transcript == HEARD
    assert [f for f in sink.frames if isinstance(f, PlayAudio) and f.turn is turn]


async def test_second_words_that_match_nothing_either_leave_the_first(
    cache: IntentCache,
) -> None:
    asr, again = await two_pass("Wear is my pass sell?")
    turn = turn_of(MISHEARD)
    sink = await _route(router_for(cache, rehearing=Rehearing(asr, sample_rate=RATE)), turn)
    assert again.calls == 1
    assert turn.transcript == MISHEARD and turn.intent is None
    passed = [f for f in sink.frames if isinstance(f, Transcript)]
    assert [f.text for f in passed] == [MISHEARD]


async def test_a_first_transcript_that_matches_is_never_heard_again(cache: IntentCache) -> None:
    asr, again = await two_pass(MISHEARD)
    turn = turn_of(HEARD)
    await _route(router_for(cache, rehearing=Rehearing(asr, sample_rate=RATE)), turn)
    assert turn.intent == "opening_hours"
    assert again.calls == 0


@pytest.mark.parametrize(
    ("first", "second", "ends_at"),
    [
        # both hear a finished sentence that nothing answers: only "not sure" would be
        # said, so a caller pausing mid-request ("I think I was charged | twice") may go on
        ("I think I was charged.", "I think I was charged.", 1100),
        # a whole question of five words or more: the long sentence's wait (1000 ms)
        ("What is your fax number?", "What is your fax number?", 1000),
        # the second words read as a follow-up ("it"), but match no intent: the router goes
        # on with the first, which lead nowhere ("Can you send me | a copy of ..." was cut)
        ("Can you earn me?", "Can you handle it?", 1100),
        # the caller said "hello?" into the wait: they had finished, and wait for an answer
        ("What is your fax number? Hello?", "What is your fax number? Hello?", 300),
        # a knowledge entry answers it as written: as soon as a cached intent would (the
        # pass ready, the line quiet), not even the finished sentence's 300 ms
        ("Can I pay with a gift card?", "Can I pay with a gift card?", 180),
        # the second words lead to an intent (the router takes them): the same
        (MISHEARD, HEARD, 300),
    ],
)
async def test_a_finished_sentence_that_leads_nowhere_waits_the_nothing_to_say_silence(
    cache: IntentCache, knowledge: KnowledgeIndex, first: str, second: str, ends_at: int
) -> None:
    assert (await cache.lookup(first)).match.route in ("none", "confirm")
    asr = TwoPassASR(ScriptedASR(first), ScriptedASR(second))
    rehearing = Rehearing(asr, sample_rate=RATE)
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, cache, rehearing=rehearing, knowledge=knowledge
    )
    assert ended_at == ends_at
    assert ended(frames).turn.eot_reason == ("early" if ends_at <= 300 else "silence")
    # The operator's 0: such a sentence ends as any finished one does.
    off = CFG.model_copy(update={"nowhere_silence_ms": 0})
    asr = TwoPassASR(ScriptedASR(first), ScriptedASR(second))
    _, ended_at, _ = await drive(
        tone(600) + silence(1700),
        asr,
        cache,
        off,
        rehearing=Rehearing(asr, sample_rate=RATE),
        knowledge=knowledge,
    )
    assert ended_at == min(ends_at, 300)
    # Without a knowledge base the model answers: nothing is known to lead nowhere.
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700),
        TwoPassASR(ScriptedASR(first), ScriptedASR(second)),
        cache,
        rehearing=Rehearing(asr, sample_rate=RATE),
    )
    assert ended_at == 300


@pytest.mark.parametrize(
    ("before", "words", "ends_at"),
    [
        # a follow-up the router answers joined to the question before: at once
        ("How much is express shipping?", "And the fast one?", 300),
        # the same words with nothing before to join them to lead nowhere: "not sure" can
        # wait for a caller who may go on (they were taken for a follow-up, and cut)
        (None, "And the fast one?", CFG.nowhere_silence_ms),
        # a misheard "was" after a pause ("The parcel was left | with my neighbour"), that
        # nothing joins, matched to an intent held back by a negative: the responder would
        # ask about it, and a question waits too (it ended the turn at once)
        ("Can I return an item?", "And the parcel 1 left.", CFG.question_silence_ms),
    ],
)
async def test_words_that_read_as_a_follow_up_lead_on_only_where_the_turn_before_answers_them(
    cache: IntentCache, knowledge: KnowledgeIndex, before: str | None, words: str, ends_at: int
) -> None:
    assert (await cache.lookup(words)).match.route == "none"
    assert not await knowledge.retrieve(words)
    decider = decider_for(cache, knowledge=knowledge)
    router = router_for(cache, decider=decider)
    if before is not None:
        earlier = turn_of(before)
        await _route(router, earlier)
        assert earlier.intent is not None  # an answered question to follow up on
    asr = TwoPassASR(ScriptedASR(words), ScriptedASR(words))
    rehearing = Rehearing(asr, sample_rate=RATE)
    _, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, cache, rehearing=rehearing, decider=decider
    )
    assert ended_at == ends_at


@pytest.mark.parametrize(
    ("first", "second", "wait"),
    [
        # "I got an email saying | my parcel was delivered ...": no intent for the first
        # words, and an entry retrieved for them below ``direct_score``
        ("I got a email feeding.", "I got some email from you.", "question"),
        # "I'd like a refund | for the kettle ...": nothing for the first words; the second
        # match an intent a negative holds back, and the knowledge base has an entry for
        # them below ``direct_score``: the router goes on with them for the entry
        ("I like a reefer.", "I like a refund.", "question"),
        # "My parcel arrived | and the box was completely crushed": an intent a negative
        # holds back, and an entry below ``direct_score``: the responder asks about the
        # entry, not the intent (it ended the turn at 300 ms)
        ("My parcel arrived done", "My parcel arrived done.", "question"),
        # As heard on the wire: the first recognizer heard no end, the second heard one in
        # other words: unsure, a longer wait still
        ("I got a email feeding", "I got some email from you.", "unsure"),
        ("I like a reefer", "I like a refund.", "unsure"),
    ],
)
async def test_a_sentence_the_knowledge_base_would_only_ask_about_waits_the_question_silence(
    cache: IntentCache, knowledge: KnowledgeIndex, first: str, second: str, wait: str
) -> None:
    # Each was cut at its pause (0.7-1.2 s): the turn ended at 300 ms, with "not sure" or
    # a topic question ("Just to check, is this about ...?"), which the responder asks in
    # extractive mode. Like an intent's question, it waits ``question_silence_ms``.
    assert not leads_somewhere((await cache.lookup(first)).match)
    assert not leads_somewhere((await cache.lookup(second)).match)
    asked = first if await knowledge.retrieve(first) else second
    deciding = decider_for(cache, knowledge=knowledge)
    assert (await deciding.decide(asked, call_id="c")).kind == "ask"
    asr = TwoPassASR(ScriptedASR(first), ScriptedASR(second))
    rehearing = Rehearing(asr, sample_rate=RATE)
    frames, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, cache, rehearing=rehearing, knowledge=knowledge
    )
    expected = CFG.question_silence_ms if wait == "question" else CFG.unsure_silence_ms
    assert ended_at == expected
    assert ended(frames).turn.eot_reason == "silence"
    # An entry the bot would say as written ends the turn as a cached intent does: as soon
    # as the pass is ready and the line quiet.
    said = "Can I pay with a gift card?"
    assert (await deciding.decide(said, call_id="c")).route == "knowledge"
    asr = TwoPassASR(ScriptedASR(said), ScriptedASR(said))
    rehearing = Rehearing(asr, sample_rate=RATE)
    _, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, cache, rehearing=rehearing, knowledge=knowledge
    )
    assert ended_at == 180


async def test_the_router_gives_the_responder_second_words_the_knowledge_base_knows(
    cache: IntentCache, knowledge: KnowledgeIndex
) -> None:
    # The first recognizer misheard the topic word; no intent takes either hearing, and
    # the knowledge base has an entry for the second only: the responder gets those.
    first, second = "I like a reefer", "I like a refund."
    assert not await knowledge.retrieve(first) and await knowledge.retrieve(second)
    asr = TwoPassASR(ScriptedASR(first), ScriptedASR(second))
    await asr.load()
    router = router_for(cache, knowledge=knowledge, rehearing=Rehearing(asr, sample_rate=RATE))
    turn = turn_of(first)
    out = await _route(router, turn)
    passed = [f for f in out.frames if isinstance(f, Transcript)]
    assert [t.text for t in passed] == [second] and turn.transcript == second
    # Second words the knowledge base has nothing for either leave the first.
    asr = TwoPassASR(ScriptedASR(first), ScriptedASR("I like a reef."))
    await asr.load()
    router = router_for(cache, knowledge=knowledge, rehearing=Rehearing(asr, sample_rate=RATE))
    turn = turn_of(first)
    out = await _route(router, turn)
    assert [f.text for f in out.frames if isinstance(f, Transcript)] == [first]


async def test_a_finished_sentence_an_intent_would_only_ask_about_waits_the_question_silence(
    cache: IntentCache, knowledge: KnowledgeIndex
) -> None:
    # Words with no end that an intent would only ask about (the real matcher, the default
    # profile), heard again as a finished sentence: the question waits
    # ``question_silence_ms`` for a caller who was pausing; 0 turns that off.
    first, second = "Can you check where my parcel is", "Can you check where my parcel is?"
    assert (await cache.lookup(first)).match.route == "confirm"
    for wait, ends_at, reason in (
        (CFG.question_silence_ms, CFG.question_silence_ms, "silence"),
        (0, 300, "early"),
    ):
        cfg = CFG.model_copy(update={"question_silence_ms": wait})
        asr = TwoPassASR(ScriptedASR(first), ScriptedASR(second))
        rehearing = Rehearing(asr, sample_rate=RATE)
        frames, ended_at, _ = await drive(
            tone(600) + silence(1700), asr, cache, cfg, rehearing=rehearing, knowledge=knowledge
        )
        assert ended_at == ends_at
        assert ended(frames).turn.eot_reason == reason


async def test_a_yes_that_would_transfer_waits_for_a_caller_who_may_go_on(
    cache: IntentCache, knowledge: KnowledgeIndex
) -> None:
    # "Right, okay, so | what time do you close today?", after the honest fallback's offer
    # of a colleague: "Okay, okay." heard in the pause ended the turn after 440 ms, and the
    # router took it for a yes: the caller was transferred. (Two such words now read as
    # the start of a request, ``end_of_turn.judge``; one may still be a reply.)
    profile = load_profile(DEFAULT_PROFILE)
    decider = decider_for(cache, knowledge=knowledge)
    router = router_for(cache, decider=decider)
    earlier = turn_of("What's the weather like on Mars?")
    await _route(router, earlier)
    earlier.answer = profile.unsure  # the fallback the responder said, with the offer
    for said in ("Okay, okay.", "Okay."):
        yes = await decider.decide(said, call_id="c")
        assert yes.route == "confirmed" and yes.action == "transfer", said
    assert (await decider.decide("What time do you close today?", call_id="c")).action is None
    words = "Okay."
    asr = TwoPassASR(ScriptedASR(words), ScriptedASR(words))
    rehearing = Rehearing(asr, sample_rate=RATE)
    _, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, cache, rehearing=rehearing, decider=decider
    )
    assert ended_at == CFG.hangup_silence_ms
    # With no offer before them, the same words act on nothing: a bare "Okay." with
    # nothing asked starts a request as often as it is all of it, and waits as long.
    fresh = decider_for(cache, knowledge=knowledge)
    assert (await fresh.decide(words, call_id="c")).action is None
    _, ended_at, _ = await drive(
        tone(600) + silence(1700), asr, cache, rehearing=rehearing, decider=fresh
    )
    assert ended_at == CFG.acknowledgement_silence_ms
