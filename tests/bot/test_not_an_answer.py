"""The guard's "not an answer" rules and the key-word rule, with the sentences callers heard
(the issue's) and others written for these tests; held-out examples are reported, not
tested here (``not_an_answer_heldout.toml``, ``python -m bench.answer_eval --guard-heldout``)."""

from __future__ import annotations

import pytest

from bot.answers.grounding import common_stems, key_words, on_topic, stem
from bot.answers.guard import check
from bot.profile import DEFAULT_PROFILE, KnowledgeEntry, load_profile

PROFILE = load_profile(DEFAULT_PROFILE)
ENTRIES = {e.topic: e for e in PROFILE.knowledge}
PAYMENT = ENTRIES["payment_methods"].answer
CHANGE = ENTRIES["change_order"].answer
DELIVERY = ENTRIES["delivery_time"].answer
GIFT = ENTRIES["gift_cards"].answer
PRICE = ENTRIES["price_match"].answer
WARRANTY = ENTRIES["warranty"].answer
UNSURE = PROFILE.unsure


def refused(clause: str, question: str, *entries: str) -> str | None:
    """The refusal of ``clause`` answering ``question`` with ``entries`` retrieved."""
    refusal = check(
        clause,
        sources=entries,
        caller=question,
        known_names=(PROFILE.name,),
        strict=not entries,
        stock=(UNSURE,),
    )
    return None if refusal is None else str(refusal)


@pytest.mark.parametrize(
    ("question", "entry", "clause", "why"),
    [
        # Heard by callers (the payment-methods entry was retrieved; the change-order one).
        ("Do you offer financing or pay later?", PAYMENT,
         "We offer financing, but we also offer pay later options.", "claim (offer, financ"),
        ("Can I pick up my order in person?", CHANGE,
         "You can pick up in person if you wish.", "claim (pick, person)"),
        # Written for this test.
        ("Do you have a loyalty card?", GIFT, "We have a loyalty card too.", "claim (loyalt)"),
        ("Can I pay in instalments?", PAYMENT, "You can also pay monthly.", "claim (month)"),
        ("Is there a warranty?", WARRANTY, "Our warranty covers accidental damage.",
         "claim (cover, accidental, damag)"),
    ],
)  # fmt: skip
def test_a_claim_stands_on_the_entries_words_not_the_callers(
    question: str, entry: str, clause: str, why: str
) -> None:
    reason = refused(clause, question, entry)
    assert reason is not None and reason.startswith(f"unsupported_fact: {why}"), reason


def test_what_the_entry_says_may_be_said_in_its_words_or_with_the_callers() -> None:
    assert refused("You can pay by credit or debit card, or with PayPal.", "Card?", PAYMENT) is None
    assert refused("Yes, you can pay by debit card.", "Debit card?", PAYMENT) is None
    assert refused("We do not accept cash.", "Cash?", PAYMENT) is None
    assert refused("Standard delivery takes 3 to 5 working days.", "When?", DELIVERY) is None
    # Not a claim: the caller's own words may be echoed ("your lamp").
    assert refused("For your lamp, it takes 3 to 5 working days.", "My lamp?", DELIVERY) is None
    reason = refused("Delivery is usually quick.", "When will it come?", DELIVERY)
    assert reason == "unsupported_fact: words (usual, quick)"


@pytest.mark.parametrize(
    ("clause", "question"),
    [
        # Heard by callers.
        ("I'm sorry for any misunderstanding, but as a customer service AI, I'm not equipped "
         "to provide personal services", "Can I order in bulk for my business?"),
        ("I'm unable to access your current account.", "Where is my order?"),
        ("As a customer service AI, I can only answer questions.", "Do you sell gift cards?"),
        # Written for this test.
        ("I don't have access to the order system.", "Has my parcel left?"),
        ("As a language model, I cannot know that.", "Is it in stock?"),
        ("I am programmed to answer shop questions.", "What do you do?"),
        ("I'm just a virtual assistant.", "Can you check my basket?"),
    ],
)  # fmt: skip
def test_talk_about_itself_is_not_an_answer(clause: str, question: str) -> None:
    reason = refused(clause, question, GIFT)
    assert reason is not None and reason.startswith("not_an_answer: about itself"), reason


def test_what_it_is_may_be_said_to_a_caller_who_asks() -> None:
    assert refused("I'm a virtual assistant for Acme.", "Are you a robot?") is None
    assert refused("I'm a virtual assistant for Acme.", "Hello there") is not None


@pytest.mark.parametrize(
    ("clause", "question"),
    [
        ("I'm sorry for your loss, but I can look at that.", "What is my order status?"),
        ("My condolences.", "How long is delivery?"),
        ("I'm sorry to hear that.", "Do you sell gift cards?"),
        ("I apologize for the inconvenience.", "Can I pay with PayPal?"),
        # Heard from speech: "still" is no complaint.
        ("I'm sorry for the misunderstanding,", "I forgot a charger, can I still put it in?"),
    ],
)
def test_an_apology_that_fits_nothing_is_not_an_answer(clause: str, question: str) -> None:
    reason = refused(clause, question, GIFT)
    assert reason is not None and reason.startswith("not_an_answer: apology"), reason


def test_an_apology_fits_a_problem_a_decline_or_the_entry() -> None:
    assert refused("I'm sorry to hear that.", "My kettle stopped working", WARRANTY) is None
    assert refused("I'm sorry, I'm not sure about that.", "Gift wrap?", GIFT) is None
    assert refused("Sorry, we do not match other shops' prices.", "Match it?", PRICE) is None
    assert refused("I'm sorry for your loss.", "My mother died, can I cancel?", GIFT) is None
    # A condolence fits only a death, not a lost parcel.
    assert refused("I'm sorry for your loss.", "My parcel was lost", GIFT) is not None


@pytest.mark.parametrize(
    ("clause", "question", "entry"),
    [
        # Heard by callers.
        ("I'm not sure, but I'll give you a credit card.", "Can I pay by card?", PAYMENT),
        ("I'm not sure, but I can tell you that I can help with that.", "A slot?", DELIVERY),
        ("If you need a gift card, I can give you a gift card, but I'm not sure if you're "
         "asking.", "Gift wrapping?", GIFT),
        ("I can do that for you.", "Can you cancel it?", CHANGE),
        ("I can help with that.", "Can I order in bulk?", CHANGE),
        # Written for this test.
        ("Let me send you a voucher.", "Can I have a voucher?", GIFT),
        ("We'll refund you the difference.", "Match this price?", PRICE),
        ("I'm arranging a courier now.", "When does it come?", DELIVERY),
    ],
)  # fmt: skip
def test_an_offer_no_entry_makes_is_not_an_answer(clause: str, question: str, entry: str) -> None:
    reason = refused(clause, question, entry)
    assert reason is not None, clause
    assert reason.startswith(("not_an_answer: offer", "unsupported_fact")), reason


def test_the_bots_own_offer_and_a_refusal_are_no_offer() -> None:
    colleague = "I'm not sure, but I can put you through to a colleague."
    assert refused(colleague, "Can I book a time slot?", DELIVERY) is None
    assert refused("I would rather not guess.", "Gift wrap?", GIFT) is None
    assert refused("I can't do that, I'm afraid.", "Can you wrap it?", GIFT) is None
    # With nothing retrieved (small talk) the same rules hold.
    assert refused("I can help you with that.", "Hello") is not None
    assert refused("Hello, thanks for calling Acme.", "Hello") is None


def test_an_entrys_own_offer_may_be_repeated() -> None:
    wrap = "We can gift wrap any order for 3 dollars."
    assert refused("I can gift wrap it for 3 dollars.", "Gift wrap?", wrap) is None


def _texts(entry: KnowledgeEntry) -> list[str]:
    return [entry.topic.replace("_", " "), *entry.questions, entry.answer, *entry.keywords]


COMMON = common_stems([_texts(e) for e in PROFILE.knowledge])


@pytest.mark.parametrize(
    ("question", "topic", "on"),
    [
        # Heard by callers: retrieval took one shared word for the topic.
        ("Do you do gift wrapping?", "gift_cards", False),
        ("Can I pick up my order in person?", "change_order", False),
        ("Do you offer financing or pay later?", "payment_methods", False),
        ("Can I order in bulk for my business?", "change_order", False),
        ("Can I book a delivery for a specific time slot?", "delivery_time", False),
        # Written for this test: right entries, worded with words they lack.
        ("What's the biggest gift card I can get?", "gift_cards", True),
        ("What warranty do your kettles come with?", "warranty", True),
        ("Can I just read you my card number and pay now?", "phone_payment", True),
        ("What's the usual wait for a parcel from you?", "delivery_time", True),
        ("How long does it usually take for stuff to arrive?", "delivery_time", True),
        ("Do you take PayPal?", "payment_methods", True),
    ],
)
def test_an_entry_is_about_what_was_asked(question: str, topic: str, on: bool) -> None:
    assert on_topic(question, _texts(ENTRIES[topic]), common=COMMON) is on


def test_key_words_fold_inflections_and_leave_out_conversation() -> None:
    assert stem("deliveries") == stem("delivery") == "deliver"
    assert stem("payment") == "pay"
    assert key_words("Thanks, I just want to know about the delivery, please.") == ["deliver"]
    assert key_words("It takes ten days.") == ["day"]
    assert "order" in COMMON and "gift" not in COMMON
