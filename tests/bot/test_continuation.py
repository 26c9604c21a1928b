"""A caller who was only pausing mid-request and starts again over the bot's answer: the new
turn goes on with the one before (``TurnDetector``), and both halves' audio is heard as one
request (``Transcriber``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bot.intents.cache import IntentCache
from bot.pipeline.frames import AudioIn, EndOfTurn, Interrupt, LineHeld, Transcript
from bot.pipeline.processor import Collector
from bot.pipeline.stages.router import Router
from bot.pipeline.stages.transcriber import Transcriber
from bot.pipeline.stages.turn_detector import TurnDetector
from bot.pipeline.turn import Turn
from bot.profile import EndpointingConfig
from serve import Transcription
from tests.bot.deciding import router_for
from tests.bot.fakes import FRAME_BYTES, EnergyStream, ScriptedASR, silence, tone

if TYPE_CHECKING:
    pass

CFG = EndpointingConfig(min_speech_ms=100, end_silence_ms=300, barge_in_ms=200)


async def two_turns(
    gap_ms: int, *, bot_answers: bool = True, cfg: EndpointingConfig = CFG
) -> list[Turn]:
    """A turn, then ``gap_ms`` from the end of its voice to the caller's next words, with
    the bot answering the first turn (talking) from its end on, or quiet."""
    ended: list[Turn] = []
    ep = TurnDetector(
        EnergyStream(),
        cfg,
        call_id="c",
    )
    sink = Collector()
    ep.link(sink)
    pcm = tone(600) + silence(gap_ms) + tone(600) + silence(400)
    for n, i in enumerate(range(0, len(pcm), FRAME_BYTES)):
        await ep.process(AudioIn(pcm=pcm[i : i + FRAME_BYTES], at=10.0 + 0.02 * n))
        ended[:] = [f.turn for f in sink.frames if isinstance(f, EndOfTurn)]
        if bot_answers and ended:  # the bot answers: the speaker tells it has the line
            await ep.put_upstream(LineHeld(held=True, by="speaker"))
    if bot_answers:
        assert any(isinstance(f, Interrupt) for f in sink.frames)
    return ended


async def test_words_again_within_the_limit_go_on_with_the_turn_before() -> None:
    first, second = await two_turns(900)
    assert first.continues is None
    assert second.continues is first


async def test_words_after_the_limit_are_a_turn_of_their_own() -> None:
    _, second = await two_turns(2400)
    assert second.continues is None


async def test_words_when_the_bot_is_quiet_are_a_turn_of_their_own() -> None:
    # The bot had nothing to say to the first turn (or had finished): nothing was cut.
    _, second = await two_turns(900, bot_answers=False)
    assert second.continues is None


async def test_a_limit_of_zero_never_joins() -> None:
    cfg = CFG.model_copy(update={"continuation_ms": 0})
    _, second = await two_turns(900, cfg=cfg)
    assert second.continues is None


class HeardASR(ScriptedASR):
    """Says what it was given: how many bytes of audio, so a test can tell halves apart."""

    def __init__(self) -> None:
        super().__init__()
        self.heard: list[bytes] = []

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        self.heard.append(pcm)
        return Transcription(
            text=f"{len(pcm)} bytes.", confidence=0.9, audio_ms=len(pcm) / 16, no_speech_prob=0.0
        )


async def test_a_turn_that_goes_on_is_heard_with_the_one_before() -> None:
    asr = HeardASR()
    await asr.load()
    transcriber = Transcriber(asr, sample_rate=8000)
    out = Collector()
    transcriber.link(out)
    first = Turn(call_id="c", audio=tone(600))
    await transcriber.process(EndOfTurn(turn=first))
    second = Turn(call_id="c", audio=tone(400), continues=first)
    await transcriber.process(EndOfTurn(turn=second))
    # The first half, 300 ms of silence, the second half: one recognition.
    whole = tone(600) + silence(300) + tone(400)
    assert asr.heard == [tone(600), whole]
    assert [f.text for f in out.frames if isinstance(f, Transcript)] == [
        f"{len(tone(600))} bytes.",
        f"{len(whole)} bytes.",
    ]
    assert second.transcript == f"{len(whole)} bytes." and second.audio == whole


async def test_a_turn_that_goes_on_after_an_empty_one_is_heard_alone() -> None:
    asr = HeardASR()
    await asr.load()
    transcriber = Transcriber(asr, sample_rate=8000)
    transcriber.link(Collector())
    second = Turn(call_id="c", audio=tone(400), continues=Turn(call_id="c"))
    await transcriber.process(EndOfTurn(turn=second))
    assert asr.heard == [tone(400)]


async def test_a_bot_starting_to_talk_mid_turn_is_stopped_and_the_turn_goes_on() -> None:
    # The caller starts again 600 ms after their first turn, before the bot's answer to it
    # has begun; 300 ms later the answer starts over them: it is stopped, and the new turn
    # goes on with the first.
    now = [0.0]
    ended: list[Turn] = []
    ep = TurnDetector(
        EnergyStream(),
        CFG,
        call_id="c",
    )
    sink = Collector()
    ep.link(sink)
    pcm = tone(600) + silence(900) + tone(1200) + silence(400)
    second_start = 10.0 + 1.5
    bot_from = [second_start + 0.3]
    for n, i in enumerate(range(0, len(pcm), FRAME_BYTES)):
        now[0] = 10.0 + 0.02 * n
        talking = bool(ended) and now[0] >= bot_from[0]
        await ep.put_upstream(LineHeld(held=talking, by="speaker"))
        await ep.process(AudioIn(pcm=pcm[i : i + FRAME_BYTES], at=now[0]))
        ended[:] = [f.turn for f in sink.frames if isinstance(f, EndOfTurn)]
    interrupts = [f for f in sink.frames if isinstance(f, Interrupt)]
    assert len(interrupts) == 1
    # after the bot started, once the caller had spoken over it for barge_in_ms
    assert bot_from[0] <= interrupts[0].at <= bot_from[0] + CFG.barge_in_ms / 1000 + 0.02
    first, second = ended
    assert second.continues is first


async def _say(router: Router, text: str, **fields: object) -> Turn:
    turn = Turn(call_id="c", transcript=text, **fields)  # type: ignore[arg-type]
    await router.process(Transcript(turn=turn, text=text))
    return turn


@pytest.mark.models
async def test_a_second_request_said_over_the_bot_is_answered_on_its_own(
    cache: IntentCache,
) -> None:
    # "Where is my order?" then, over the bot's answer, "Do you ship to Canada?": heard
    # together the two lead nowhere; the turn's own words alone are a request.
    router, sink = router_for(cache), Collector()
    router.link(sink)
    first = await _say(router, "Where is my order?")
    assert first.intent == "order_status"
    whole = "Where is my order? Do you ship to Canada?"
    assert (await cache.lookup(whole)).match.route == "none"
    second = await _say(router, whole, continues=first, own_words="Do you ship to Canada?")
    assert (second.intent, second.transcript) == ("shipping_countries", "Do you ship to Canada?")


@pytest.mark.models
async def test_words_going_on_over_a_question_are_no_answer_to_it(cache: IntentCache) -> None:
    # The bot asked about an intent on the first half; the caller went on over the
    # question: what they said is not a reply to it, even a "yes" (they did not hear it).
    router, sink = router_for(cache), Collector()
    router.link(sink)
    # Words only near one intent: a question about it (not a choice of two).
    first = await _say(router, "I want somebody")
    assert first.route == "confirm" and first.intent == "talk_to_person"
    second = await _say(router, "Yes.", continues=first)
    assert second.route != "confirmed" and second.intent is None
    # Without going on, the same "yes" answers the question.
    router, sink = router_for(cache), Collector()
    router.link(sink)
    await _say(router, "I want somebody")
    assert (await _say(router, "Yes.")).route == "confirmed"


async def test_a_request_too_long_to_hear_at_once_is_heard_in_parts() -> None:
    asr = HeardASR()
    await asr.load()
    transcriber = Transcriber(asr, sample_rate=8000)
    transcriber.link(Collector())
    first = Turn(call_id="c", audio=tone(20_000))
    second = Turn(call_id="c", audio=tone(6_000), continues=first)
    await transcriber.process(EndOfTurn(turn=second))
    assert asr.heard == [tone(6_000)]
