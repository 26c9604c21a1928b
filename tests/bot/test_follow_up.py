"""Follow-ups: short words that go on with the last answer's topic are matched joined to
the question answered; a request of its own never is.

Found by new users: after the delivery-cost answer "And the fast one?" and "What was the
standard price again?" got "not sure"; "What is the weather like today?" after the
phone-payment answer was joined to it ("As I said, we cannot take card payments...").
The router tests run the default profile's intents through the real MiniLM embedder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bot.intents.cache import IntentCache
from bot.pipeline.frames import PlayAudio, Speak, Transcript
from bot.pipeline.language.follow_up import (
    about_last_answer,
    asks_again,
    follows_up,
    is_follow_up,
    joins_words_before,
    new_words,
    sentence_about,
)
from bot.pipeline.processor import Collector
from bot.pipeline.stages.router import Router
from bot.pipeline.turn import Turn
from tests.bot.deciding import router_for

if TYPE_CHECKING:
    pass

pytestmark = pytest.mark.models


@pytest.mark.parametrize(
    "text",
    ["And the fast one?", "What was the standard price again?", "Is that free?",
     "And to a PO box?", "What about express?", "How about Canada?", "Does that include it?"],
)  # fmt: skip
def test_words_that_point_back_are_follow_ups(text: str) -> None:
    assert is_follow_up(text)


@pytest.mark.parametrize(
    "text",
    ["What is the weather like today?", "Where is my order?", "Can I pay by card?",
     "Hi there.", "Thank you.", "I would like to speak to someone about my delivery please now",
     ""],
)  # fmt: skip
def test_a_request_of_its_own_or_small_talk_is_not(text: str) -> None:
    assert not is_follow_up(text)


def test_new_words_are_the_topic_words_the_last_answer_did_not_have() -> None:
    asked = "How much does delivery cost?"
    answer = "Standard delivery costs four ninety-nine. Express delivery costs nine ninety-nine."
    context = f"{asked} {answer}"
    assert new_words("And the fast one?", context) == ["fast"]
    assert new_words("What was the standard price again?", context) == ["price"]
    assert new_words("Is that free?", context) == ["free"]
    assert new_words("And can I pay by card?", context) == ["pay", "card"]


def test_words_that_only_point_back_and_name_a_thing_of_their_own_are_not_joined() -> None:
    # "Is it possible | to pay with PayPal?", heard in the caller's pause as "It's
    # possible" after the change-address answer: joined to that question it matched it
    # again, and the bot said the change-address answer into the pause.
    address = (
        "My name is Sarah and I need to change my delivery address. You can change the "
        "delivery address in My Orders until your order ships."
    )
    assert is_follow_up("It's possible.") and not follows_up("It's possible.", address)
    delivery = (
        "How much does delivery cost? Standard delivery costs four ninety-nine. Express "
        "delivery costs nine ninety-nine."
    )
    assert not follows_up("Can I return it?", delivery)
    # Words that lead like a follow-up may bring one word of their own; words that only
    # point back, a kind of detail.
    for text in ("And the fast one?", "What about Sunday?", "Is that free?"):
        assert follows_up(text, delivery), text
    for text in ("How much is that one?", "Was that the cheapest?", "What was it again?"):
        assert follows_up(text, delivery), text


def test_words_retrieved_with_the_words_before_lead_on_or_ask() -> None:
    # "It's order number | five five two one nine", heard in the pause as "It's all your
    # number" after a question about refunds: joined to it, the refund entry again.
    refund = "How long does a refund take?"
    assert not joins_words_before("It's all your number", refund)
    assert not joins_words_before("It's possible.", refund)
    for text in ("And to a PO box?", "What's the largest amount I can load on one?",
                 "how long does it take", "Is that free?"):  # fmt: skip
        assert joins_words_before(text, refund), text
    assert not joins_words_before("Where is my order?", refund)  # a request of its own


async def _ask(router: Router, sink: Collector, text: str) -> Turn:
    turn = Turn(call_id="c", transcript=text)
    await router.process(Transcript(turn=turn, text=text))
    return turn


@pytest.mark.parametrize("follow_up", ["And the fast one?", "What about express?"])
async def test_a_follow_up_to_the_delivery_cost_answer_gets_that_answer(
    cache: IntentCache, follow_up: str
) -> None:
    alone = await cache.lookup(follow_up)
    assert alone.match.route not in ("exact", "semantic")  # a miss on its own words
    router, sink = router_for(cache), Collector()
    router.link(sink)
    first = await _ask(router, sink, "How much does delivery cost?")
    assert (first.route, first.intent) in {
        ("exact", "delivery_cost"),
        ("semantic", "delivery_cost"),
    }
    first.answer = "Standard delivery costs four ninety-nine."
    turn = await _ask(router, sink, follow_up)
    assert turn.intent == "delivery_cost" and turn.route in ("exact", "semantic")
    played = [f for f in sink.frames if isinstance(f, PlayAudio) and f.turn is turn]
    assert played and "Express delivery" in played[0].text


async def test_a_new_request_after_an_answer_is_not_joined_to_it(cache: IntentCache) -> None:
    router, sink = router_for(cache), Collector()
    router.link(sink)
    await _ask(router, sink, "How much does delivery cost?")
    turn = await _ask(router, sink, "What is the weather like today?")
    assert turn.intent != "delivery_cost"
    assert turn.route in ("none", "confirm")
    # A request of its own that starts like a follow-up is not taken for one either.
    first = await _ask(router, sink, "Where is my order?")
    first.answer = "You can track your order in My Orders."
    turn = await _ask(router, sink, "And can I pay by card?")
    assert turn.intent != "order_status"
    # With nothing answered before it, a follow-up is looked up on its own words only.
    fresh, fresh_sink = router_for(cache), Collector()
    fresh.link(fresh_sink)
    alone = await _ask(fresh, fresh_sink, "And the fast one?")
    assert alone.intent is None or alone.route not in ("exact", "semantic")


async def test_a_statement_pointing_back_does_not_get_the_last_answer_again(
    cache: IntentCache,
) -> None:
    router, sink = router_for(cache), Collector()
    router.link(sink)
    first = await _ask(router, sink, "I need to change my delivery address.")
    assert first.intent == "change_address"
    first.answer = "You can change the delivery address in My Orders until your order ships."
    turn = await _ask(router, sink, "It's possible.")
    assert turn.intent != "change_address"
    assert turn.decision is not None and turn.decision.intent != "change_address"


RETURNS = (
    "You can return any item within thirty days. Start the return in My Orders on acme dot "
    "com and print the free return label."
)


def test_words_about_part_of_the_last_answer_get_its_sentence() -> None:
    assert about_last_answer("Is the label free?", RETURNS)
    assert sentence_about("Is the label free?", RETURNS) == (
        "Start the return in My Orders on acme dot com and print the free return label."
    )
    assert sentence_about("How many days?", RETURNS) == (
        "You can return any item within thirty days."
    )
    # A word the answer did not say is a request of its own; small talk names no topic.
    assert not about_last_answer("Is the label waterproof?", RETURNS)
    assert not about_last_answer("Thank you.", RETURNS)
    assert not about_last_answer("Is it?", RETURNS)
    # Words the answer said, but in no one sentence together: no sentence is taken.
    assert sentence_about("Free days?", RETURNS) is None


async def test_a_question_about_part_of_an_answer_gets_that_sentence(cache: IntentCache) -> None:
    router, sink = router_for(cache), Collector()
    router.link(sink)
    first = await _ask(router, sink, "How do I return a lamp I bought?")
    assert first.intent == "returns"
    turn = await _ask(router, sink, "Is the label free?")
    assert (turn.route, turn.intent) == ("repeat", "returns")
    spoken = [f for f in sink.frames if isinstance(f, Speak) and f.turn is turn]
    assert [s.text for s in spoken] == [
        "Start the return in My Orders on acme dot com and print the free return label."
    ]
    assert not spoken[0].generated
    # A question with a topic of its own after the same answer goes on as a new request.
    other = await _ask(router, sink, "Is the label waterproof?")
    assert other.route != "repeat"


DELIVERY = (
    "How much does delivery cost? Standard delivery costs four ninety-nine and is free on "
    "orders over fifty dollars. Express delivery costs nine ninety-nine."
)


@pytest.mark.parametrize(
    "text",
    ["What was the standard price again?", "Sorry, what was the normal price again?",
     "How much did you say the fast one was?", "What was it again?",
     "Remind me, what's the cheapest option?"],
)  # fmt: skip
def test_words_asking_for_part_of_the_answer_again(text: str) -> None:
    assert asks_again(text, DELIVERY)


@pytest.mark.parametrize(
    "text",
    # A topic the answer did not have, a request of its own, small talk, no recall words.
    ["What's your phone number again?", "What's the weather like again?",
     "I want to order again.", "Thank you again.", "What about express?",
     "What was the standard price again, and can I pay by card on the phone today?"],
)  # fmt: skip
def test_words_with_a_topic_of_their_own_do_not(text: str) -> None:
    assert not asks_again(text, DELIVERY)


async def _answered(router: Router, sink: Collector, cache: IntentCache, text: str) -> Turn:
    turn = await _ask(router, sink, text)
    assert turn.intent is not None and turn.route in ("exact", "semantic"), turn.route
    entry = cache.entry(turn.intent)
    assert entry is not None
    turn.answer = entry.answer
    return turn


@pytest.mark.parametrize(
    ("first", "again", "intent", "route"),
    [("How much does delivery cost?", "What was the standard price again?", "delivery_cost",
      "semantic"),
     # Only asking to hear it again: the last answer said again, word for word.
     ("How much does delivery cost?", "What was it again?", "delivery_cost", "repeat"),
     ("How do I return a lamp I bought?", "How long did you say I had?", "returns",
      "semantic")],
)  # fmt: skip
async def test_asked_again_gets_the_answer_again(
    cache: IntentCache, first: str, again: str, intent: str, route: str
) -> None:
    alone = await cache.lookup(again)
    assert alone.match.route not in ("exact", "semantic")  # a miss on its own words
    router, sink = router_for(cache), Collector()
    router.link(sink)
    await _answered(router, sink, cache, first)
    turn = await _ask(router, sink, again)
    assert (turn.route, turn.intent) == (route, intent)
    played = [f for f in sink.frames if isinstance(f, PlayAudio) and f.turn is turn]
    entry = cache.entry(intent)
    assert entry is not None and [p.text for p in played] == [entry.answer]


async def test_asked_again_about_something_else_is_not_the_last_answer(cache: IntentCache) -> None:
    router, sink = router_for(cache), Collector()
    router.link(sink)
    await _answered(router, sink, cache, "How much does delivery cost?")
    for text in ("What's your phone number again?", "What's the weather like again?"):
        turn = await _ask(router, sink, text)
        assert turn.intent != "delivery_cost", text
    # Another intent's own words still go to that intent.
    turn = await _ask(router, sink, "What were your opening hours again?")
    assert turn.intent == "opening_hours"
