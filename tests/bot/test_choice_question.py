"""The two-choice question ("Is this about booking an appointment, or about an emergency?")
and reading the caller's answer to it: a choice, neither, an answer that chooses nothing,
or a new request."""

from __future__ import annotations

import pytest

from bot.intents.choice import KEY_CHOICES, Choice, choice_question, choice_topic, read_choice
from bot.profile import DEFAULT_PROFILE, IntentConfig, KnowledgeEntry, load_profile
from tests.bot.new_profiles import new_profile

DENTAL = {i.name: i for i in load_profile(new_profile("harbor_dental")).intents}
BOOK, EMERGENCY = DENTAL["book_appointment"], DENTAL["emergency"]
CANCEL = DENTAL["cancel_appointment"]
SHOP = load_profile(DEFAULT_PROFILE)
ORDER = next(i for i in SHOP.intents if i.name == "order_status")
ADDRESS = next(i for i in SHOP.intents if i.name == "change_address")
ENTRIES = {e.topic: e for e in SHOP.knowledge}


def test_the_question_offers_both_topics() -> None:
    assert choice_question("booking an appointment", "an emergency") == (
        "Is this about booking an appointment, or about an emergency?"
    )
    assert choice_question(choice_topic(ORDER), choice_topic(ADDRESS)) == (
        "Is this about where your order is, or about changing your address?"
    )
    assert choice_topic(ENTRIES["gift_cards"]) == "gift cards"
    assert choice_topic("a lost card") == "a lost card"


@pytest.mark.parametrize(
    ("said", "choice"),
    [
        # By position.
        ("The first one.", "first"),
        ("First.", "first"),
        ("the first one please", "first"),
        ("Yes, the first one.", "first"),
        ("The former.", "first"),
        ("Number one.", "first"),
        ("Option one please.", "first"),
        ("One.", "first"),
        ("1", "first"),
        ("The second one.", "second"),
        ("Second.", "second"),
        ("The last one.", "second"),
        ("The other one.", "second"),
        ("The latter, please.", "second"),
        ("Number two.", "second"),
        ("Two.", "second"),
        ("2", "second"),
        ("No, the second one.", "second"),
        ("Not the first one.", "second"),
        ("Not the second.", "first"),
        # By the topic's words, or the intent's examples' words.
        ("Booking.", "first"),
        ("Booking an appointment, please.", "first"),
        ("An appointment.", "first"),
        ("I'd like to book in for next week.", "first"),
        ("Yes, booking.", "first"),
        ("The emergency.", "second"),
        ("It's an emergency, I broke a tooth.", "second"),
        ("Emergency!", "second"),
        ("I have terrible toothache.", "second"),
        ("My face is swollen.", "second"),
        ("No, the emergency.", "second"),
        ("Not the emergency.", "first"),
        ("Not an emergency, just a booking.", "first"),
        # Neither: the honest decline follows.
        ("Neither.", "neither"),
        ("Neither of them.", "neither"),
        ("None of those.", "neither"),
        ("None of them, thanks.", "neither"),
        ("No.", "neither"),
        ("Nope.", "neither"),
        ("No, thank you.", "neither"),
        ("No, it's something else.", "neither"),
        ("Not really.", "neither"),
        ("Wrong.", "neither"),
        # Chooses nothing: asked again once.
        ("Yes.", "ambiguous"),
        ("Yeah.", "ambiguous"),
        ("Yes please.", "ambiguous"),
        ("Sure.", "ambiguous"),
        ("Both.", "ambiguous"),
        ("Either one.", "ambiguous"),
        ("I'm not sure.", "ambiguous"),
        ("I don't know.", "ambiguous"),
        ("I need a dentist.", "ambiguous"),  # a word of both intents' examples
        ("The booking or the emergency, I'm not sure.", "ambiguous"),
        # Not an answer to the question: a new request, or nothing.
        ("No, I want to ask about parking.", None),
        ("What are your opening hours?", None),
        ("Do you take my insurance?", None),
        ("None of those, I wanted teeth whitening.", None),
        ("Neither, where are you located?", None),
        ("First I want to ask about my insurance plan.", None),
        ("Can you repeat that?", None),
        ("Um.", None),
        ("", None),
    ],
)
def test_reading_the_answer(said: str, choice: Choice) -> None:
    assert read_choice(said, BOOK, EMERGENCY) == choice


@pytest.mark.parametrize(
    ("said", "choice"),
    [
        # Words both intents' topics share ("appointment") choose nothing; a topic's own
        # word does, though the other's examples have it ("book": "cancel my booking").
        ("My appointment.", "ambiguous"),
        ("Make an appointment.", "ambiguous"),
        ("I want to book one.", "first"),
        ("Booking.", "first"),
        ("Cancel it.", "second"),
        ("Please cancel my booking.", "second"),
        ("Cancelling, not booking.", "second"),
        # Then the examples' words.
        ("I need to see a dentist.", "first"),
        ("Free appointments this week.", "first"),
    ],
)
def test_only_the_words_one_choice_lacks_tell_them_apart(said: str, choice: Choice) -> None:
    assert read_choice(said, BOOK, CANCEL) == choice


@pytest.mark.parametrize(
    ("said", "choice"),
    [
        ("Where my order is.", "first"),
        ("My order.", "first"),  # the first's topic; the second's examples say it too
        ("Where's my parcel?", "ambiguous"),  # both intents' examples say "parcel"
        ("It hasn't arrived yet.", "first"),
        ("The address.", "second"),
        ("I need to change my delivery address.", "second"),
        ("I moved house.", "second"),
        ("Neither, I want a refund.", None),
        ("How much does shipping cost?", None),
        ("Do you ship to Canada?", None),
    ],
)
def test_reading_an_answer_about_the_shops_intents(said: str, choice: Choice) -> None:
    assert read_choice(said, ORDER, ADDRESS) == choice


@pytest.mark.parametrize(
    ("said", "choice"),
    [
        ("Gift cards.", "first"),
        ("A gift voucher.", "first"),
        ("PayPal.", "second"),
        ("Paying with a card.", "second"),  # "card": a payment method's word, not the gifts'
        ("The second one.", "second"),
        ("No.", "neither"),
        ("Yes.", "ambiguous"),
        ("I want to know where my order is.", None),
    ],
)
def test_knowledge_entries_are_chosen_by_their_words(said: str, choice: Choice) -> None:
    gifts, methods = ENTRIES["gift_cards"], ENTRIES["payment_methods"]
    assert read_choice(said, gifts, methods) == choice


@pytest.mark.parametrize(
    ("said", "choice"),
    [
        # Two entries about paying (the decider offers both for "What ways can I pay?"):
        # each topic's own words tell them apart, the words they share do not.
        ("Payment methods.", "first"),
        ("Your payment methods, please.", "first"),
        ("PayPal.", "first"),
        ("Paying over the phone.", "second"),
        ("Over the phone.", "second"),
        ("Giving you my card details now.", "second"),
        ("Payment.", "ambiguous"),
        ("Neither.", "neither"),
    ],
)
def test_two_entries_about_paying_are_told_apart(said: str, choice: Choice) -> None:
    methods, phone = ENTRIES["payment_methods"], ENTRIES["phone_payment"]
    assert read_choice(said, methods, phone) == choice


@pytest.mark.parametrize(
    ("said", "choice"),
    [
        ("The lost card.", "first"),
        ("I lost it.", "first"),
        ("A loan please.", "second"),
        ("The loan.", "second"),
        ("Neither.", "neither"),
        ("My PIN is blocked.", None),
    ],
)
def test_topics_given_as_words_alone(said: str, choice: Choice) -> None:
    assert read_choice(said, "a lost card", "a loan") == choice


def test_the_keypad_answers_it() -> None:
    assert KEY_CHOICES == {"1": "first", "2": "second"}
    for key, choice in KEY_CHOICES.items():
        assert read_choice(key, BOOK, EMERGENCY) == choice


def test_an_intent_of_one_example_is_still_chosen_by_its_name() -> None:
    refund = IntentConfig(name="refund_status", examples=["Where's my money?"], answer="a")
    hours = IntentConfig(name="opening_hours", examples=["When are you open?"], answer="b")
    assert read_choice("The refund.", refund, hours) == "first"
    assert read_choice("Opening hours.", refund, hours) == "second"
    assert read_choice("Your hours.", refund, hours) == "second"
    entry = KnowledgeEntry(topic="po_boxes", questions=["Do you ship to a PO box?"], answer="a")
    assert read_choice("PO box.", entry, hours) == "first"
