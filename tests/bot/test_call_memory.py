"""The call's memory for follow-ups: words asking for part of an answer given earlier in the
call ("what was the regular one again?", "how many days did you say?") get the sentences of
that answer that give it, the operator's words as said; which answer is told by the words
each answer said ("the quick one": the delivery prices, not the opening hours after them);
when no answer of the call says what was asked, the honest "not sure" stays.

The word rules first (no models), then the decision as a table: the turns before, the
follow-up, and what answers it (the default profile's intents and knowledge base, through
the real MiniLM)."""

from __future__ import annotations

import pytest

from bot.intents.cache import IntentCache
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.deciding.decider import Decider
from bot.pipeline.language.follow_up import sentences_asked, unsaid
from bot.profile import DEFAULT_PROFILE, load_profile
from tests.bot.deciding import decided, decider_for

PROFILE = load_profile(DEFAULT_PROFILE)
ANSWERS = {i.name: i.answer for i in PROFILE.intents} | {
    k.topic: k.answer for k in PROFILE.knowledge
}
STANDARD = "Standard delivery costs four ninety-nine and is free on orders over fifty dollars."
EXPRESS = "Express delivery costs nine ninety-nine."
THIRTY_DAYS = "You can return any item within thirty days."
A_YEAR = "Every product has a 1 year warranty against defects."


@pytest.mark.parametrize(
    ("words", "about", "said"),
    [
        # An option named in the caller's word for it, a kind of detail, both.
        ("Remind me what the regular one costs?", "delivery_cost", STANDARD),
        ("Which one was the quickest again?", "delivery_cost", EXPRESS),
        ("What did you say the express one costs?", "delivery_cost", EXPRESS),
        ("How many days did you say?", "returns", THIRTY_DAYS),
        ("How long did you say it was?", "warranty", A_YEAR),
        # A kind of detail every sentence gives, or none named: all of it.
        ("What was the price again?", "delivery_cost", f"{STANDARD} {EXPRESS}"),
        ("What time did you say?", "opening_hours", ANSWERS["opening_hours"]),
        # Not said in that answer: none of it.
        ("What was the price again?", "opening_hours", None),
        ("How much was it again?", "opening_hours", None),
        ("How long did you say I had?", "delivery_cost", None),
        ("What was the quick one again?", "returns", None),
        ("How many days did you say?", "opening_hours", None),  # a count, not weekdays
        # A thing of its own, neither said nor asked about.
        ("What countries did you say?", "delivery_cost", None),
    ],
)
def test_the_sentences_asked_for_again(words: str, about: str, said: str | None) -> None:
    assert sentences_asked(words, ANSWERS[about]) == said


def test_a_thing_the_question_named_is_the_whole_answer() -> None:
    countries = ANSWERS["shipping_countries"]
    asked = "Which countries do you ship to?"
    assert sentences_asked("Which countries was it again?", countries, asked) == countries
    assert sentences_asked("Which countries was it again?", countries) is None


def test_words_an_answer_did_not_say_even_in_other_words() -> None:
    delivery = f"How much does delivery cost? {ANSWERS['delivery_cost']}"
    hours = f"When are you open? {ANSWERS['opening_hours']}"
    # "Express" is the delivery answer's word for the quick one; a price is what it gives.
    assert unsaid("And the fast one?", delivery) == []
    assert unsaid("And the fast one?", hours) == ["fast"]
    assert unsaid("Sorry, what was the normal price again?", delivery) == []
    assert unsaid("And to Canada?", delivery) == ["canada"]


@pytest.fixture
def decider(cache: IntentCache, knowledge: KnowledgeIndex) -> Decider:
    return decider_for(cache, knowledge=knowledge)


# Each row a call: the turns before, the follow-up, what answers it (None: the honest "not
# sure") and the words said (None: any sentence of that answer).
CALLS = [
    # Part of the last answer again, in the caller's words for it (the intent's answer,
    # found again joined to its question, or the sentences that give it).
    (["How much does delivery cost?"], "Remind me what the regular one costs?",
     "delivery_cost", None),
    (["Can I send something back?"], "How many days did you say?", "returns", None),
    # The last answer found again joined to its question, near another intent too: no
    # question offering both in its place.
    (["I want to send a lamp back to you."], "How long did you say I've got?", "returns",
     None),
    # A knowledge entry's answer, the last one or one before it.
    (["Is there a warranty?"], "How long did you say it was?", "warranty", A_YEAR),
    (["Is there a warranty?", "When are you open?"], "Remind me how long it lasts?",
     "warranty", A_YEAR),
    # A detail of the last answer, a knowledge entry's: its sentence.
    (["Is there a warranty?"], "Where do I start a claim?", "warranty",
     "Start a claim in My Orders on acme dot com."),
    (["Is there a warranty?"], "Is the claim on the website?", None, None),
    # Words only near an intent of their own: the answer that said what they ask for.
    (["Is there a warranty?"], "How long was it again?", "warranty", A_YEAR),
    (["How long does delivery take?"], "How many days was it again?", "delivery_time", None),
    (["Can I cancel an order I just placed?"], "Remind me how long I've got?", "cancel_order",
     "You can cancel an order in My Orders on acme dot com within 1 hour of placing it."),
    # Words for another intent's answer are that intent's, whatever was said before.
    (["Is there a warranty?"], "What were your hours again?", "opening_hours", None),
    # The answer that said it, not the last one.
    (["Where is my order?", "When are you open?"], "How many days did you say it takes?",
     "order_status", "Most orders arrive within three to five working days."),
    (["How much does delivery cost?", "When are you open?"], "And the quick one?",
     "delivery_cost", None),
    (["How much does delivery cost?", "When are you open?"],
     "Which one was the quickest again?", "delivery_cost", EXPRESS),
    # No answer of the call said it: the honest "not sure", never a guess.
    (["When are you open?"], "Remind me how much the fee was?", None, None),
    (["When are you open?"], "How long did you say it was?", None, None),
    (["Do you price match?"], "What was the quick one again?", None, None),
    ([], "How many days did you say?", None, None),
]  # fmt: skip


@pytest.mark.models
@pytest.mark.parametrize(("before", "words", "about", "said"), CALLS)
async def test_a_follow_up_is_answered_from_what_the_call_said(
    decider: Decider, before: list[str], words: str, about: str | None, said: str | None
) -> None:
    for earlier in before:
        await decided(decider, earlier)
    decision = await decider.decide(words, call_id="c")
    if about is None:
        assert (decision.kind, decision.say) == ("unsure", PROFILE.unsure), decision
        return
    assert (decision.kind, decision.intent) == ("answer", about), decision
    assert decision.say is not None and decision.say in ANSWERS[about]
    if said is not None:
        assert decision.say == said, decision
