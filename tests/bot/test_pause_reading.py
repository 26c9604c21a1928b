"""The pause's one reading, as a table: what the pass heard -> how long the turn waits, why."""

from __future__ import annotations

import numpy as np
import pytest

from bot.intents.store import CacheEntry
from bot.pipeline.deciding.decision import Decision
from bot.pipeline.language.end_of_turn import judge
from bot.pipeline.language.intonation import Intonation
from bot.pipeline.pause_reading import FAILED, NOTHING_HEARD, PauseReading, read_pause
from bot.pipeline.speculation import Speculation
from bot.profile import EndpointingConfig

CFG = EndpointingConfig()


TRANSFER = CacheEntry(
    key="k",
    name="talk_to_person",
    answer="Putting you through.",
    action="transfer",
    examples=("Talk to a person.",),
    negatives=(),
    example_vectors=np.zeros((1, 4), np.float32),
    negative_vectors=np.zeros((0, 4), np.float32),
    audio=b"",
    sample_rate=8000,
)
#: What the pause's words were decided as: "not sure", a question, a yes that transfers.
DECIDED = {
    "unsure": lambda w: Decision("unsure", "fallback", w, "no_entry: nothing"),
    "ask": lambda w: Decision("ask", "confirm", w, "near a topic"),
    "yes_acts": lambda w: Decision("answer", "confirmed", w, "yes", entry=TRANSFER),
    "small_talk": lambda w: Decision("answer", "small_talk", w, "small talk", say="Hello."),
}


def heard(first: str, second: str | None = None, decided: str | None = None) -> Speculation:
    return Speculation(
        pause_id=1,
        audio_bytes=1,
        started_at=0.0,
        transcript=first,
        heard=first,
        second=second,
        decision=None if decided is None else DECIDED[decided](first),
    )


@pytest.mark.parametrize(
    ("spec", "reading"),
    [
        # A finished request, heard alike twice or once: nothing to wait for.
        (heard("Where is my order?"), PauseReading("finished")),
        (heard("Where is my order?", "Where is my order?"), PauseReading("finished")),
        # A fragment: the unfinished wait, whatever else is true of it.
        (heard("I would like to", decided="yes_acts"), PauseReading("unfinished")),
        (heard("My order number is"), PauseReading("unfinished")),
        # The second hearing heard no end, or another sentence: unsure.
        (heard("Where is my order?", "Where is my order"), PauseReading("open", "unsure")),
        (heard("Can you hack it?", "Can you check if"), PauseReading("unfinished")),
        (
            heard("Where is my order", "Where is the border?"),
            PauseReading("open", "unsure"),
        ),
        # Both heard a finished sentence that nothing answers: nowhere.
        (
            heard("I was charged twice.", "I was charged twice.", decided="unsure"),
            PauseReading("finished", "nowhere"),
        ),
        # A sentence the bot would only ask about: the question waits.
        (heard("Can you friend me?", decided="ask"), PauseReading("finished", "question")),
        # Words whose yes would transfer: as a goodbye waits.
        (heard("Yes please.", decided="yes_acts"), PauseReading("finished", "acts")),
        # Only a greeting: it waits for a caller who goes on; small talk that asks does not.
        (heard("Hello?", decided="small_talk"), PauseReading("finished", "greeting")),
        (heard("Hi there.", decided="small_talk"), PauseReading("finished", "greeting")),
        (heard("Hello, is anyone there?", decided="small_talk"), PauseReading("finished")),
        (heard("Thank you.", decided="small_talk"), PauseReading("finished")),
        # A bare yes or okay with nothing asked: as a greeting, the start of a request as
        # often as all of it.
        (heard("Okay.", decided="small_talk"), PauseReading("finished", "acknowledgement")),
        (
            heard("Yes, yes, yes.", decided="small_talk"),
            PauseReading("finished", "acknowledgement"),
        ),
        # Precedence: unsure before nowhere, question and acts (a decision is one of them).
        (
            heard("Where is my order?", "Where is my order", decided="ask"),
            PauseReading("open", "unsure"),
        ),
        (
            heard("Can you friend me?", decided="ask"),
            PauseReading("finished", "question"),
        ),
    ],
)
def test_the_reading_of_a_pause(spec: Speculation, reading: PauseReading) -> None:
    assert read_pause(spec, judge, CFG) == reading


def test_a_failed_or_empty_pass() -> None:
    failed = heard("")
    failed.failed = True
    assert read_pause(failed, judge, CFG) == FAILED
    assert read_pause(heard(""), judge, CFG) == NOTHING_HEARD


def test_each_reading_waits_its_own_setting_and_only_a_whole_request_ends_early() -> None:
    cfg = EndpointingConfig(
        end_silence_ms=500,
        unfinished_silence_ms=2500,
        unsure_silence_ms=2000,
        nowhere_silence_ms=2100,
        question_silence_ms=1800,
        hangup_silence_ms=1500,
        greeting_silence_ms=700,
        acknowledgement_silence_ms=1400,
        hold_silence_ms=10_000,
    )
    table = {
        PauseReading("finished"): (500, True),
        PauseReading("open"): (500, True),
        PauseReading("unfinished"): (2500, False),
        PauseReading("hold"): (10_000, False),
        PauseReading("open", "unsure"): (2000, False),
        PauseReading("finished", "nowhere"): (2100, False),
        PauseReading("finished", "question"): (1800, False),
        PauseReading("finished", "acts"): (1500, False),
        PauseReading("finished", "greeting"): (700, False),
        PauseReading("finished", "acknowledgement"): (1400, False),
    }
    for reading, (limit, early) in table.items():
        assert (reading.silence_limit_ms(cfg), reading.may_end_early) == (limit, early), reading


def test_a_wait_set_to_zero_is_not_waited_for() -> None:
    cfg = EndpointingConfig(
        question_silence_ms=0,
        hangup_silence_ms=0,
        nowhere_silence_ms=0,
        greeting_silence_ms=0,
        acknowledgement_silence_ms=0,
    )
    assert read_pause(heard("Can you friend me?", decided="ask"), judge, cfg).wait is None
    assert read_pause(heard("Hello?", decided="small_talk"), judge, cfg).wait is None
    assert read_pause(heard("Okay.", decided="small_talk"), judge, cfg).wait is None
    assert read_pause(heard("Yes please.", decided="yes_acts"), judge, cfg).wait is None
    nowhere = heard("I was charged twice.", "I was charged twice.", decided="unsure")
    assert read_pause(nowhere, judge, cfg).wait is None


def toned(spec: Speculation, end_st: float) -> Speculation:
    spec.intonation = Intonation(end_st=end_st)
    return spec


@pytest.mark.parametrize(
    ("spec", "wait", "limit"),
    [
        (heard("I was charged twice.", "I was charged twice.", decided="unsure"), "nowhere", 2000),
        (heard("Can you friend me?", decided="ask"), "question", 1800),
    ],
)
def test_a_voice_that_fell_shortens_the_nowhere_and_question_waits(
    spec: Speculation, wait: str, limit: int
) -> None:
    level = read_pause(toned(spec, -1.0), judge, CFG)
    assert (level.wait, level.fell, level.end_st) == (wait, False, -1.0)
    assert level.silence_limit_ms(CFG) == limit
    fallen = read_pause(toned(spec, -5.0), judge, CFG)
    assert (fallen.wait, fallen.fell, fallen.end_st) == (wait, True, -5.0)
    assert fallen.silence_limit_ms(CFG) == CFG.fallen_silence_ms < limit
    assert fallen.record()["fell"] is True
    # The threshold is the profile's; 0 ms: the pitch is not read.
    deeper = CFG.model_copy(update={"fall_semitones": 6.0})
    assert not read_pause(toned(spec, -5.0), judge, deeper).fell
    off = CFG.model_copy(update={"fallen_silence_ms": 0})
    assert read_pause(toned(spec, -5.0), judge, off).silence_limit_ms(off) == limit


@pytest.mark.parametrize(
    ("spec", "wait"),
    [
        # No hearing says the words are finished: the fall would be the only cue.
        (heard("It's order number.", "It's all the numbers"), "unsure"),
        (heard("Yes please.", decided="yes_acts"), "acts"),
        (heard("Hello?", decided="small_talk"), "greeting"),
        (heard("Okay.", decided="small_talk"), "acknowledgement"),
        (heard("My order number is"), None),
        (heard("Where is my order?"), None),
    ],
)
def test_a_fallen_voice_alone_does_not_shorten_unsure_words_a_hang_up_a_greeting_or_a_fragment(
    spec: Speculation, wait: str | None
) -> None:
    reading = read_pause(toned(spec, -8.0), judge, CFG)
    assert reading.wait == wait
    assert not reading.fell
    plain = toned(spec, 0.0)
    assert reading.silence_limit_ms(CFG) == read_pause(plain, judge, CFG).silence_limit_ms(CFG)


LONG = "I need to update the phone number on my account."


@pytest.mark.parametrize(
    ("spec", "wait", "limit"),
    [
        (heard(LONG, LONG, decided="unsure"), "nowhere", 2000),
        (heard(LONG, decided="ask"), "question", 1800),
    ],
)
def test_a_long_finished_sentence_shortens_the_nowhere_and_question_waits(
    spec: Speculation, wait: str, limit: int
) -> None:
    reading = read_pause(spec, judge, CFG)
    assert (reading.wait, reading.long, reading.fell) == (wait, True, False)
    assert reading.silence_limit_ms(CFG) == CFG.long_sentence_silence_ms < limit
    assert reading.record()["long"] is True
    # The length is the profile's; 0 ms: the waits stay.
    longer = CFG.model_copy(update={"long_sentence_words": 12})
    assert read_pause(spec, judge, longer).silence_limit_ms(longer) == limit
    off = CFG.model_copy(update={"long_sentence_silence_ms": 0})
    assert read_pause(spec, judge, off).silence_limit_ms(off) == limit
    # A fallen voice as well: the shorter of the two.
    both = read_pause(toned(spec, -5.0), judge, CFG)
    assert both.long and both.fell
    assert both.silence_limit_ms(CFG) == min(CFG.fallen_silence_ms, CFG.long_sentence_silence_ms)


@pytest.mark.parametrize(
    ("spec", "wait", "limit"),
    [
        (heard("Do you sell or gift card?", decided="ask"), "question", 1800),
        (
            heard(
                "Do you have a shop in London?", "Do you have a shop in London?", decided="unsure"
            ),
            "nowhere",
            2000,
        ),
        # The recognizer's full stop on words in a question's order.
        (heard("When does my money come back.", decided="ask"), "question", 1800),
    ],
)
def test_a_whole_question_shortens_the_nowhere_and_question_waits_whatever_its_length(
    spec: Speculation, wait: str, limit: int
) -> None:
    """A question of five or six words asked whole, as each recognizer heard it: the first
    halves of the paused sets heard as questions are shorter ("Can you help me?")."""
    reading = read_pause(spec, judge, CFG)
    assert (reading.wait, reading.long) == (wait, True)
    assert reading.silence_limit_ms(CFG) == CFG.long_sentence_silence_ms < limit
    off = CFG.model_copy(update={"long_sentence_silence_ms": 0})
    assert read_pause(spec, judge, off).silence_limit_ms(off) == limit


@pytest.mark.parametrize(
    ("spec", "wait"),
    [
        # Halves of the paused sets heard as finished sentences: short.
        (heard("Can you help me?", "Can you help me?", decided="ask"), "question"),
        (heard("The path is one lift.", "The path is one-grip.", decided="unsure"), "nowhere"),
        # Long as the first recognizer heard it, short as the second did: the fewer words.
        (
            heard("I'd like to speak to you about it.", "I'd like to speak too.", decided="ask"),
            "question",
        ),
        # A whole question as one recognizer heard it, a statement as the other did.
        (
            heard("Can I swap the colour?", "I swap the colour.", decided="ask"),
            "question",
        ),
        (heard("Do you sell gift cards?", "You sell gift cards.", decided="ask"), "question"),
        # Long, but no hearing says the words are finished.
        (heard(LONG, "I need to update the phone number on my"), None),
        (heard(LONG, "I need update my form and belong my account"), "unsure"),
    ],
)
def test_short_or_unfinished_words_keep_their_wait(spec: Speculation, wait: str | None) -> None:
    reading = read_pause(spec, judge, CFG)
    assert reading.wait == wait and not reading.long
