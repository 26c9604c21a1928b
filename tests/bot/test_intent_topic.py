"""An intent's and a knowledge entry's topic: the operator's, or derived from the name and
how the examples say it; the question made from it; the profile's checks of a written one."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.intents.confirm import confirm_question
from bot.intents.topic import derive_topic, gerund, topic_of, topic_of_entry
from bot.knowledge.index import topic_question
from bot.profile import DEFAULT_PROFILE, IntentConfig, KnowledgeEntry, load_profile
from tests.bot.new_profiles import NEW_PROFILES

#: Every intent and entry of the shipped profile, and of the development profiles (written
#: as new operators write them: no topics), with the topic the bot says. "*": written by
#: the operator in the profile.
TOPICS = {
    DEFAULT_PROFILE: {
        "order_status": "where your order is*",
        "opening_hours": "our opening hours",
        "talk_to_person": "talking to a person",
        "returns": "returns",
        "change_address": "changing your address",
        "shipping_countries": "which countries we deliver to*",
        "delivery_cost": "delivery costs*",
        "damaged_item": "a damaged item",
        "goodbye": "ending the call*",
        "knowledge:delivery_time": "how long delivery takes*",
        "knowledge:po_boxes": "PO boxes",
        "knowledge:refund_time": "your refund*",
        "knowledge:payment_methods": "payment methods",
        "knowledge:phone_payment": "paying over the phone*",
        "knowledge:gift_cards": "gift cards",
        "knowledge:cancel_order": "cancelling your order",
        "knowledge:change_order": "changing your order",
        "knowledge:order_confirmation": "your order confirmation",
        "knowledge:warranty": "a warranty",
        "knowledge:contact_email": "our email address*",
        "knowledge:live_chat": "live chat",
        "knowledge:price_match": "price matching*",
    },
    NEW_PROFILES / "brightwave" / "profile.toml": {
        "outage": "an outage",
        "pay_bill": "paying your bill",
        "upgrade_plan": "upgrading your plan",
        "cancel_service": "cancelling your service",
        "move_house": "moving house",
        "router_setup": "your router setup",
        "wifi_password": "your wifi password",
        "speak_to_agent": "speaking to an agent",
    },
    NEW_PROFILES / "harbor_dental" / "profile.toml": {
        "book_appointment": "booking an appointment",
        "cancel_appointment": "cancelling your appointment",
        "opening_hours": "our opening hours",
        "emergency": "an emergency",
        "location_parking": "location parking",  # the rule's weak spot: two things named
        "new_patient": "a new patient",
        "insurance": "your insurance",
        "teeth_whitening": "teeth whitening",
    },
    NEW_PROFILES / "kestrel_bank" / "profile.toml": {
        "locked_out": "being locked out",
        "lost_card": "a lost card",
        "unknown_payment": "an unknown payment",
        "update_details": "updating your details",
        "open_account": "opening an account",
        "loan": "a loan",
        "card_declined": "your card being declined",
        "speak_to_agent": "speaking to an agent",
    },
    NEW_PROFILES / "northgate_energy" / "profile.toml": {
        "meter_reading": "a meter reading",
        "power_cut": "a power cut",
        "high_bill": "a high bill",
        "moving_home": "moving home",
        "change_tariff": "changing your tariff",
        "direct_debit": "your direct debit",
        "smart_meter": "your smart meter",
        "speak_to_agent": "speaking to an agent",
    },
    NEW_PROFILES / "paws_vets" / "profile.toml": {
        "book_appointment": "booking an appointment",
        "change_appointment": "changing your appointment",
        "repeat_prescription": "a repeat prescription",
        "emergency": "an emergency",
        "vaccinations": "vaccinations",
        "opening_hours": "our opening hours",
        "insurance_claim": "an insurance claim",
        "speak_to_agent": "speaking to an agent",
    },
}


@pytest.mark.parametrize("path", list(TOPICS), ids=lambda p: p.parent.name)
def test_every_intent_and_entry_of_the_profiles_has_the_topic_listed(path: Path) -> None:
    profile = load_profile(path)
    got = {i.name: topic_of(i) + ("*" if i.topic else "") for i in profile.intents}
    for e in profile.knowledge:
        got[f"knowledge:{e.topic}"] = topic_of_entry(e) + ("*" if e.about else "")
    assert got == TOPICS[path]


@pytest.mark.parametrize(
    ("name", "examples", "topic"),
    [
        # A verb first: its -ing form, the thing with the examples' determiner said back.
        ("book_appointment", ["I'd like to book an appointment."], "booking an appointment"),
        ("cancel_appointment", ["Please cancel my appointment."], "cancelling your appointment"),
        ("talk_to_person", ["Can I talk to a real person?"], "talking to a person"),
        ("update_details", ["How do I update my details?"], "updating your details"),
        ("reset_pin", ["I forgot my PIN and need to reset it."], "resetting your PIN"),
        ("track_order", ["Where is my order?"], "tracking your order"),
        # A word that is usually a thing is a verb only when the examples say it as one.
        ("order_status", ["Where's my order?", "My order is late."], "your order status"),
        (
            "order_flowers",
            ["I want to order flowers.", "Can I order a bouquet?"],
            "ordering flowers",
        ),
        # The caller's "my" is the bot's "your", the caller's "your" the bot's "our".
        ("refund", ["When will I get my refund?", "Where is my refund?"], "your refund"),
        ("opening_hours", ["What are your opening hours?"], "our opening hours"),
        ("emergency", ["It's an emergency.", "I need help now."], "an emergency"),
        ("gift_cards", ["Do you sell gift cards?"], "gift cards"),
        # A describing word the examples do not say with the thing: "a".
        ("lost_card", ["I lost my card.", "My card was stolen."], "a lost card"),
        ("broken_screen", ["The screen on my phone cracked."], "a broken screen"),
        # Participles: after the thing, or "being" before one with a particle.
        ("card_declined", ["Why was my card declined at the shop?"], "your card being declined"),
        ("locked_out", ["I'm locked out of my account."], "being locked out"),
        # Plural names never take "a"; words are written as the examples write them.
        ("po_boxes", ["Can you deliver to a PO box?"], "PO boxes"),
        ("paypal", ["Can I pay with PayPal?"], "PayPal"),
        # An id of a name: the examples' most shared word.
        ("faq_7", ["How do I reset my password?", "I forgot my password."], "your password"),
        ("intent_2", ["Do you deliver on Sundays?", "Is there delivery at weekends?"], "delivery"),
    ],
)
def test_a_topic_is_derived_from_the_name_and_examples(
    name: str, examples: list[str], topic: str
) -> None:
    assert derive_topic(name, examples) == topic


@pytest.mark.parametrize(
    ("verb", "form"),
    [("book", "booking"), ("change", "changing"), ("cancel", "cancelling"), ("pay", "paying"),
     ("set", "setting"), ("see", "seeing"), ("tie", "tying"), ("speak", "speaking"),
     ("move", "moving"), ("submit", "submitting")],
)  # fmt: skip
def test_the_ing_form_of_a_verb(verb: str, form: str) -> None:
    assert gerund(verb) == form


def test_the_operators_topic_wins_and_makes_the_question() -> None:
    intent = IntentConfig(
        name="refund_time", examples=["When will I get my refund?"], answer="Five days."
    )
    assert confirm_question(intent) == "Is this about your refund time?"
    written = intent.model_copy(update={"topic": "when your refund arrives"})
    assert topic_of(written) == "when your refund arrives"
    assert confirm_question(written) == "Is this about when your refund arrives?"
    asked = written.model_copy(update={"confirm": "Do you want to know about your refund?"})
    assert confirm_question(asked) == "Do you want to know about your refund?"


def test_an_entrys_spoken_topic_is_its_about_or_derived() -> None:
    entry = KnowledgeEntry(
        topic="gift_cards", questions=["Do you sell gift cards?"], answer="Yes, online."
    )
    assert topic_question(entry) == "Is this about gift cards?"
    about = entry.model_copy(update={"about": "our gift vouchers"})
    assert topic_question(about) == "Is this about our gift vouchers?"
    assert topic_of_entry(about) == "our gift vouchers"


@pytest.mark.parametrize(
    ("topic", "kept"),
    [("your refund", "your refund"), ("  booking   an appointment ", "booking an appointment"),
     ("the six words of a topic", "the six words of a topic")],
)  # fmt: skip
def test_a_written_topic_is_a_short_phrase(topic: str, kept: str) -> None:
    intent = IntentConfig(name="x", examples=["a b"], answer="a", topic=topic)
    assert intent.topic == kept
    entry = KnowledgeEntry(topic="x", questions=["a b"], answer="a", about=topic)
    assert entry.about == kept


@pytest.mark.parametrize(
    ("topic", "reason"),
    [
        ("when will I get my refund back from you", "at most 6 words"),
        ("your refund?", "not a sentence"),
        ("is it your refund? or not", "not a sentence"),
        ("your refund.", "not a sentence"),
        ("42", "needs words"),
        ("", "at least 1 character"),
        ("x" * 81, "at most 80 characters"),
    ],
)
def test_a_topic_that_is_not_a_short_phrase_is_refused(topic: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        IntentConfig(name="x", examples=["a b"], answer="a", topic=topic)
    with pytest.raises(ValidationError, match=reason):
        KnowledgeEntry(topic="x", questions=["a b"], answer="a", about=topic)
