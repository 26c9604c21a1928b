"""Keypad menus and number collection: the processors on their own, frames in and out."""

from __future__ import annotations

import time

import pytest

from bot.callflow import CollectorConfig, MenuConfig, MenuOption
from bot.pipeline.frames import (
    CallAction,
    Collected,
    DataFrame,
    DtmfIn,
    Frame,
    Interrupt,
    LineHeld,
    ResponseDone,
    Speak,
    Transcript,
    UserStartedSpeaking,
    UserStoppedSpeaking,
)
from bot.pipeline.language.spoken_digits import spoken_digits
from bot.pipeline.line_state import LineState
from bot.pipeline.processor import Collector
from bot.pipeline.stages.digit_collector import MASK, DigitCollector
from bot.pipeline.stages.keypad_menu import KeypadMenu
from bot.pipeline.turn import Turn
from bot.profile import IntentConfig
from tests.support.clock import FakeClock

ORDER = CollectorConfig(
    name="order_number",
    prompt="Key in your order number.",
    min_length=5,
    max_length=5,
    timeout_s=0.6,
    attempts=2,
    reprompt="Order numbers have 5 digits.",
    give_up="I could not get it.",
    confirm="I have {value}.",
    lookup="orders",
)
PIN = CollectorConfig(
    name="pin",
    prompt="Key in your PIN, then hash.",
    min_length=4,
    max_length=8,
    timeout_s=0.6,
    sensitive=True,
)


def say(turn: Turn | None, text: str) -> DataFrame:
    return Speak(turn=turn, text=text)


def spoken(frames: list[Frame]) -> list[str]:
    return [f.text for f in frames if isinstance(f, Speak)]


@pytest.mark.parametrize(
    ("words", "digits"),
    [
        ("one two three four five", "12345"),
        ("1, 2, 3, 4, 5.", "12345"),
        ("My order number is 12345.", "12345"),
        ("It's four oh seven two one", "40721"),
        ("double three four five six", "33456"),
        ("one two, three four-five", "12345"),
        ("I want to talk to someone", None),
        ("Can I pay for it?", None),
        ("oh no", None),
    ],
)
def test_spoken_digits(words: str, digits: str | None) -> None:
    assert spoken_digits(words) == digits


class Rig:
    """A collector feeding a frame collector, the bot quiet unless told otherwise."""

    def __init__(self, *collectors: CollectorConfig) -> None:
        self.line = LineState()
        self.clock = FakeClock()
        self.events: list[tuple[str, str]] = []
        self.out = Collector()
        self.collector = DigitCollector(
            "c1",
            collectors,
            say=say,
            line=self.line,
            on_event=lambda kind, detail: self.events.append((kind, detail)),
            clock=self.clock,
        )
        self.collector.link(self.out)
        self.collector.start()

    @property
    def speaking(self) -> bool:
        return self.line.held

    @speaking.setter
    def speaking(self, on: bool) -> None:
        # As the speaker after the stage tells it (``LineHeld``, upstream).
        self.line.tell(LineHeld(held=on, by="speaker"))

    async def keys(self, digits: str) -> None:
        for d in digits:
            await self.collector.put(DtmfIn(digit=d, duration_ms=100, at=self.clock.now()))

    async def settle(self, s: float = 0.05) -> None:
        await self.clock.advance(s)

    def of(self, kind: type[Frame]) -> list[Frame]:
        return [f for f in self.out.frames if isinstance(f, kind)]


async def test_keys_pass_through_until_a_number_is_asked_for() -> None:
    rig = Rig(ORDER)
    await rig.keys("1")
    assert [type(f) for f in rig.out.frames] == [DtmfIn]
    await rig.collector.begin("order_number")
    await rig.keys("12345")
    await rig.settle()
    collected = rig.of(Collected)
    assert len(collected) == 1
    frame = collected[0]
    assert isinstance(frame, Collected)
    assert (frame.value, frame.lookup, frame.param) == ("12345", "orders", "order_number")
    assert spoken(rig.out.frames) == ["Key in your order number.", "I have 1 2 3 4 5."]
    assert rig.of(ResponseDone) == []  # the lookup answers it
    assert rig.collector.collecting is None
    await rig.keys("9")  # after the number: passes on again
    assert isinstance(rig.out.frames[-1], DtmfIn)
    await rig.collector.stop()


async def test_a_spoken_number_completes_and_other_words_leave_the_collection() -> None:
    rig = Rig(ORDER)
    await rig.collector.begin("order_number")
    turn = Turn(call_id="c1", transcript="one two three four five")
    await rig.collector.put(Transcript(turn=turn, text="one two three four five"))
    await rig.settle()
    frame = rig.of(Collected)[0]
    assert isinstance(frame, Collected) and frame.value == "12345" and frame.turn is turn
    assert turn.route == "keypad"

    await rig.collector.begin("order_number")
    other = Turn(call_id="c1", transcript="what are your opening hours")
    await rig.collector.put(Transcript(turn=other, text="what are your opening hours"))
    await rig.settle()
    passed = rig.of(Transcript)
    assert len(passed) == 1 and isinstance(passed[0], Transcript)
    assert passed[0].text == "what are your opening hours"
    assert rig.collector.collecting is None
    assert ("collect_abandoned", "order_number") in rig.events
    await rig.collector.stop()


@pytest.mark.parametrize(
    "words",
    [
        "and the parcel 1 left with my neighbour",  # a misheard "was": a request
        "can I pay for it in 3 instalments",
        "I would like to return item 2",
    ],
)
async def test_a_request_with_a_stray_digit_leaves_the_collection(words: str) -> None:
    rig = Rig(ORDER)
    await rig.collector.begin("order_number")
    turn = Turn(call_id="c1", transcript=words)
    await rig.collector.put(Transcript(turn=turn, text=words))
    await rig.settle()
    passed = rig.of(Transcript)
    assert len(passed) == 1 and isinstance(passed[0], Transcript) and passed[0].text == words
    assert spoken(rig.out.frames) == [ORDER.prompt]  # no "order numbers have 5 digits"
    assert ("collect_abandoned", "order_number") in rig.events
    await rig.collector.stop()


@pytest.mark.parametrize("words", ["my order number is 4 5", "uh it's one two three I think"])
async def test_part_of_a_number_read_out_is_a_try_at_it(words: str) -> None:
    rig = Rig(ORDER)
    await rig.collector.begin("order_number")
    await rig.collector.put(Transcript(turn=Turn(call_id="c1"), text=words))
    await rig.settle()
    assert rig.of(Transcript) == []
    assert spoken(rig.out.frames)[-2:] == [ORDER.reprompt, ORDER.prompt]
    await rig.collector.stop()


async def test_wrong_length_is_reprompted_then_given_up() -> None:
    rig = Rig(ORDER)
    await rig.collector.begin("order_number")
    await rig.keys("12#")  # too short for 5
    await rig.settle()
    assert spoken(rig.out.frames)[-2:] == [ORDER.reprompt, ORDER.prompt]
    turn = Turn(call_id="c1")
    await rig.collector.put(Transcript(turn=turn, text="one two three"))
    await rig.settle()
    assert spoken(rig.out.frames)[-1] == ORDER.give_up
    assert rig.of(Collected) == []
    assert rig.collector.collecting is None
    assert rig.events == [
        ("collect_started", "order_number"),
        ("dtmf", "1"),  # each key the caller pressed, in the call log
        ("dtmf", "2"),
        ("dtmf", "#"),
        ("collect_retry", "order_number: attempt 2"),
        ("collect_failed", "order_number"),
    ]
    await rig.collector.stop()


async def test_quiet_after_the_prompt_is_reprompted_then_given_up() -> None:
    rig = Rig(ORDER)
    rig.speaking = True  # the prompt plays: the timeout has not started
    await rig.collector.begin("order_number")
    await rig.clock.advance(1.0)
    assert spoken(rig.out.frames) == [ORDER.prompt]
    rig.speaking = False
    await rig.clock.advance(0.9)  # 0.6 s of quiet: asked again
    assert spoken(rig.out.frames) == [ORDER.prompt, ORDER.reprompt, ORDER.prompt]
    await rig.clock.advance(0.9)
    assert spoken(rig.out.frames)[-1] == ORDER.give_up
    assert rig.collector.collecting is None
    await rig.collector.stop()


async def test_a_key_over_the_prompt_cuts_it_and_a_long_enough_number_is_taken_on_timeout() -> None:
    rig = Rig(PIN)
    await rig.collector.begin("pin")
    rig.speaking = True
    await rig.keys("4")
    rig.speaking = False
    await rig.keys("321")
    assert len(rig.of(Interrupt)) == 1
    await rig.clock.advance(1.0)  # no terminator: four digits are enough once quiet
    frame = rig.of(Collected)[0]
    assert isinstance(frame, Collected) and frame.value == "4321" and frame.sensitive
    assert len(rig.of(ResponseDone)) == 1  # no lookup: answered here
    # A sensitive number is never read back, and never in an event.
    assert "4321" not in " ".join(spoken(rig.out.frames))
    assert all("4321" not in detail for _, detail in rig.events)
    assert [d for k, d in rig.events if k == "dtmf"] == [MASK] * 4  # each key, masked
    await rig.collector.stop()


async def test_a_spoken_sensitive_number_is_masked_in_the_turn() -> None:
    rig = Rig(PIN)
    await rig.collector.begin("pin")
    assert rig.collector.masking
    turn = Turn(call_id="c1", transcript="my pin is 9 8 7 6")
    await rig.collector.put(Transcript(turn=turn, text="my pin is 9 8 7 6"))
    await rig.settle()
    assert turn.transcript == MASK
    frame = rig.of(Collected)[0]
    assert isinstance(frame, Collected) and frame.value == "9876"
    assert not rig.collector.masking
    await rig.collector.stop()


async def test_other_keys_while_collecting_are_ignored_and_counted() -> None:
    rig = Rig(ORDER)
    await rig.collector.begin("order_number")
    await rig.keys("12*34A5")
    await rig.settle()
    frame = rig.of(Collected)[0]
    assert isinstance(frame, Collected) and frame.value == "12345"
    assert rig.collector.ignored_keys == 2
    await rig.collector.stop()


# -- menus -------------------------------------------------------------------------

PERSON = IntentConfig(
    name="talk_to_person",
    examples=["a person please"],
    answer="Putting you through.",
    action="transfer",
    transfer_to="sip:agents@pbx",
)
MAIN = MenuConfig(
    name="main",
    prompt="Press 1 for orders, 2 for more, 0 for a person.",
    invalid="Not an option.",
    options=[
        MenuOption(key="1", say="Orders.", collect="order_number"),
        MenuOption(key="2", menu="more"),
        MenuOption(key="0", intent="talk_to_person"),
    ],
)
MORE = MenuConfig(
    name="more",
    prompt="Press 3 for delivery times, 4 for a manager.",
    options=[
        MenuOption(key="3", knowledge="delivery_time"),
        MenuOption(key="4", say="One moment.", transfer_to="sip:manager@pbx"),
    ],
)


class MenuRig:
    def __init__(self) -> None:
        self.line = LineState()
        self.confirming = False
        self.collects: list[str] = []
        self.events: list[tuple[str, str]] = []
        self.out = Collector()

        async def begin(name: str) -> None:
            self.collects.append(name)

        self.menu = KeypadMenu(
            "c1",
            [MAIN, MORE],
            intents={"talk_to_person": PERSON},
            knowledge={"delivery_time": "Three to five days."},
            say=say,
            begin_collect=begin,
            line=self.line,
            on_event=lambda kind, detail: self.events.append((kind, detail)),
            confirming=lambda: self.confirming,
        )
        self.menu.link(self.out)

    @property
    def speaking(self) -> bool:
        return self.line.held

    @speaking.setter
    def speaking(self, on: bool) -> None:
        # As the speaker after the stage tells it (``LineHeld``, upstream).
        self.line.tell(LineHeld(held=on, by="speaker"))

    async def key(self, digit: str) -> None:
        await self.menu.put(DtmfIn(digit=digit, duration_ms=100, at=time.monotonic()))


async def test_menu_options_say_act_collect_and_open_submenus() -> None:
    rig = MenuRig()
    await rig.key("0")
    action = [f for f in rig.out.frames if isinstance(f, CallAction)]
    assert spoken(rig.out.frames) == ["Putting you through."]
    assert len(action) == 1 and action[0].target == "sip:agents@pbx"
    # The action follows the answer's ResponseDone (it acts once the answer was heard).
    kinds = [type(f) for f in rig.out.frames]
    assert kinds.index(ResponseDone) < kinds.index(CallAction)

    rig.out.frames.clear()
    await rig.key("1")
    assert spoken(rig.out.frames) == ["Orders."] and rig.collects == ["order_number"]

    rig.out.frames.clear()
    await rig.key("2")
    await rig.key("3")  # the submenu's key
    assert spoken(rig.out.frames) == [MORE.prompt, "Three to five days."]
    await rig.key("3")  # back in the main menu: 3 is no option there
    assert spoken(rig.out.frames)[-2:] == ["Not an option.", MAIN.prompt]
    assert ("menu_invalid", "main: 3") in rig.events
    assert ("menu", "more: 3") in rig.events


async def test_a_key_over_the_bot_cuts_it_and_malformed_events_are_counted() -> None:
    rig = MenuRig()
    rig.speaking = True
    await rig.key("2")
    assert isinstance(rig.out.frames[0], Interrupt)
    rig.out.frames.clear()
    for bad in ("", "12", "x", "16"):
        await rig.key(bad)
    assert rig.out.frames == [] and rig.menu.malformed_keys == 4


async def test_while_a_question_waits_1_and_2_answer_it_and_other_keys_stay_the_menus() -> None:
    rig = MenuRig()
    rig.confirming = True
    await rig.key("1")
    await rig.key("2")
    # Passed on to the Router as keys, not carried out as menu options.
    assert [f.digit for f in rig.out.frames if isinstance(f, DtmfIn)] == ["1", "2"]
    assert spoken(rig.out.frames) == [] and rig.collects == []
    assert ("confirm_key", "1") in rig.events
    await rig.key("0")
    assert spoken(rig.out.frames) == ["Putting you through."]
    rig.out.frames.clear()
    rig.confirming = False
    await rig.key("1")
    assert spoken(rig.out.frames) == ["Orders."] and rig.collects == ["order_number"]
    assert not any(isinstance(f, DtmfIn) for f in rig.out.frames)


def test_profile_refuses_call_flows_that_name_what_does_not_exist() -> None:
    from bot.profile import DEFAULT_PROFILE, BotProfile, load_profile  # noqa: PLC0415

    base = load_profile(DEFAULT_PROFILE).model_dump()
    bad_menu = {**base, "menus": [{**base["menus"][0], "options": [{"key": "1", "intent": "x"}]}]}
    with pytest.raises(ValueError, match="no intent 'x'"):
        BotProfile.model_validate(bad_menu)
    bad_lookup = {**base, "collectors": [{**base["collectors"][0], "lookup": "nope"}]}
    with pytest.raises(ValueError, match="no lookup 'nope'"):
        BotProfile.model_validate(bad_lookup)
    twice = {**base, "menus": [base["menus"][0], base["menus"][0]]}
    with pytest.raises(ValueError, match="menu name is defined twice"):
        BotProfile.model_validate(twice)
    with pytest.raises(ValueError, match="one of intent"):
        MenuOption(key="1", intent="a", menu="b")
    with pytest.raises(ValueError, match="read back"):
        CollectorConfig(name="p", prompt="PIN?", sensitive=True, confirm="I have {value}")


async def test_a_number_read_out_slowly_is_not_quiet() -> None:
    rig = Rig(ORDER)
    await rig.collector.begin("order_number")
    await rig.clock.advance(0.3)
    # The caller reads the number out, and their turn's end is waited for: 1.5 s, over
    # the 0.6 s timeout, and no reprompt.
    await rig.collector.put(UserStartedSpeaking(at=rig.clock.now()))
    await rig.clock.advance(1.5)
    await rig.collector.put(UserStoppedSpeaking(at=rig.clock.now()))
    await rig.clock.advance(0.4)  # their words are transcribed
    assert spoken(rig.out.frames) == [ORDER.prompt]
    turn = Turn(call_id="c1")
    await rig.collector.put(Transcript(turn=turn, text="two four six eight zero"))
    await rig.settle()
    frame = rig.of(Collected)[0]
    assert isinstance(frame, Collected) and frame.value == "24680"
    assert ("collect_retry", "order_number: attempt 2") not in rig.events
    await rig.collector.stop()


async def test_quiet_after_a_turn_without_words_counts_from_its_end() -> None:
    rig = Rig(ORDER)
    await rig.collector.begin("order_number")
    await rig.collector.put(UserStartedSpeaking(at=rig.clock.now()))
    await rig.clock.advance(1.0)
    await rig.collector.put(UserStoppedSpeaking(at=rig.clock.now()))  # a cough: no words
    await rig.clock.advance(0.4)
    assert spoken(rig.out.frames) == [ORDER.prompt]
    await rig.clock.advance(0.5)  # 0.6 s of quiet since the cough: asked again
    assert spoken(rig.out.frames) == [ORDER.prompt, ORDER.reprompt, ORDER.prompt]
    await rig.collector.stop()
