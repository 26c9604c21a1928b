"""Stock phrasings: an operator's intent asking for a person is matched with the product's
own phrasings of that request too; an intent that transfers for another reason is not.

Found by new users: a broadband profile's "speak_to_agent" (three examples) missed "Put me
through to an operator." and "Representative.": shipped background lines were nearer.
The tests run the real MiniLM embedder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bot.intents.match import IntentMatchingConfig, IntentVectors
from bot.intents.stock import (
    ADOPT_ALONE,
    ADOPT_LEAD,
    ADOPT_SIMILARITY,
    EmbeddedRequest,
    adopted,
    embed_requests,
    nearest_rows,
    stock_requests,
    with_stock_phrasings,
)
from bot.profile import DEFAULT_PROFILE, BotProfile, IntentConfig, load_profile
from tests.bot.published import published

if TYPE_CHECKING:
    from serve.embed_minilm import MiniLMEmbedder

pytestmark = pytest.mark.models

PBX = "sip:support@pbx.example.com"
AGENT = IntentConfig(
    name="speak_to_agent",
    examples=["Can I speak to a person?", "I want to talk to someone.", "Agent please."],
    answer="Of course, I will put you through to a colleague.",
    action="transfer",
    transfer_to=PBX,
)
FRAUD = IntentConfig(
    name="unknown_payment",
    examples=["I don't recognise a transaction on my statement.",
              "Someone took money from my account.", "I think there's fraud on my account."],
    answer="I will put you through to our fraud team now.",
    action="transfer",
    transfer_to=PBX,
)  # fmt: skip
BILL = IntentConfig(
    name="pay_bill",
    examples=["I want to pay my bill.", "How can I pay my bill?", "I'd like to make a payment."],
    answer="You can pay your bill in the app, online, or by direct debit.",
)


async def thin_profile(minilm: MiniLMEmbedder) -> list[IntentVectors]:
    """The three intents, embedded as the cache embeds them (no negatives)."""
    out = []
    for intent in (AGENT, FRAUD, BILL):
        v = await minilm.embed(intent.examples)
        out.append(IntentVectors(intent.name, tuple(intent.examples), (), v, v[:0], intent.action))
    return out


async def embedded_requests(minilm: MiniLMEmbedder) -> dict[str, EmbeddedRequest]:
    """The stock requests, embedded, by name."""
    return {r.request.name: r for r in await embed_requests(minilm.embed)}


async def person_adopted(
    minilm: MiniLMEmbedder,
) -> tuple[EmbeddedRequest, list[IntentVectors], IntentVectors]:
    """The stock request for a person, the thin profile, and its agent intent with the
    request's phrasings and negatives it adopts."""
    person = (await embedded_requests(minilm))["talk_to_person"]
    thin = await thin_profile(minilm)
    return person, thin, with_stock_phrasings(thin, [person])[0][0]


def profile(*, stock: bool = True) -> BotProfile:
    base = load_profile(DEFAULT_PROFILE)
    return base.model_copy(
        update={
            "intents": [AGENT, FRAUD, BILL],
            "intent_matching": IntentMatchingConfig(stock_phrasings=stock),
        }
    )


def test_the_stock_requests_are_the_default_profiles_intents_with_an_action() -> None:
    found = {r.name: r for r in stock_requests()}
    assert {r.action for r in found.values()} == {"transfer", "hangup"}
    assert "Representative." in found["talk_to_person"].examples
    assert "Are you a robot?" in found["talk_to_person"].negatives


async def test_only_an_intent_asking_for_the_same_thing_adopts_it(minilm: MiniLMEmbedder) -> None:
    requests = await embedded_requests(minilm)

    agent, fraud, bill = await thin_profile(minilm)
    assert adopted(agent, requests["talk_to_person"])
    assert not adopted(agent, requests["goodbye"])  # another action
    assert not adopted(fraud, requests["talk_to_person"])  # a transfer for another reason
    assert not adopted(bill, requests["talk_to_person"])  # no action
    # The same examples without the action: nothing to adopt.
    v = agent.example_vectors
    no_action = IntentVectors(agent.name, agent.examples, (), v, v[:0])
    assert not adopted(no_action, requests["talk_to_person"])
    assert 0.0 < ADOPT_SIMILARITY < 1.0


async def test_the_cache_matches_an_adopted_intent_with_the_products_phrasings(
    minilm: MiniLMEmbedder,
) -> None:
    async with published(profile(), minilm) as cache:
        for words in ("Put me through to an agent.", "Can I speak to a supervisor?"):
            found = await cache.lookup(words)
            assert (found.match.route, found.match.intent) == ("exact", "speak_to_agent"), words
        # Its negatives come along: no transfer for a caller asking what they talk to.
        robot = await cache.lookup("Are you a robot?")
        assert robot.match.intent is None
        # The operator's own configuration is as written.
        entry = cache.entry("speak_to_agent")
        assert entry is not None and entry.examples == tuple(AGENT.examples)
    async with published(profile(stock=False), minilm) as cache:
        found = await cache.lookup("Can I speak to a supervisor?")
        assert found.match.route != "exact"


async def test_a_negative_comes_only_with_the_phrasing_it_was_written_against(
    minilm: MiniLMEmbedder,
) -> None:
    # Seen on new operators' profiles: "I'd like to talk about my account." adopted
    # without "I'd like to talk to your staff." vetoed "I'd like to talk to customer
    # service please.".
    person, thin, agent = await person_adopted(minilm)
    counterpart = {
        n: person.request.examples[k]
        for n, k in zip(
            person.request.negatives,
            nearest_rows(person.negative_vectors, person.example_vectors),
            strict=True,
        )
    }
    adopted_negatives = set(agent.negatives)
    assert adopted_negatives  # some come along ...
    assert adopted_negatives < set(person.request.negatives)  # ... not all of them
    for negative, phrasing in counterpart.items():
        assert (negative in adopted_negatives) == (phrasing in agent.examples), negative
    # Alone, with no other intent to keep apart from, the intent takes every phrasing and
    # with them every negative.
    alone = with_stock_phrasings(thin[:1], [person])[0][0]
    assert set(alone.negatives) == set(person.request.negatives)


async def test_a_phrasing_no_other_intent_is_near_is_adopted_without_a_lead(
    minilm: MiniLMEmbedder,
) -> None:
    # Found on new operators' profiles: "Human." and "Operator." were not put through, since
    # the one-word phrasings lead no other intent's examples by ADOPT_LEAD when held to the
    # intent's three examples, though no other intent is near them.
    person, thin, agent = await person_adopted(minilm)
    others = [i.example_vectors for i in thin[1:]]
    for phrasing, row in zip(person.request.examples, person.example_vectors, strict=True):
        other = max(float((v @ row).max()) for v in others)
        own = float((thin[0].example_vectors @ row).max())
        expected = own - other >= ADOPT_LEAD or other < ADOPT_ALONE
        assert (phrasing in agent.examples) == expected, phrasing
    for phrasing in ("Human.", "Representative.", "I want an operator."):
        assert phrasing in agent.examples, phrasing
    # One nearer another intent's examples stays out.
    assert "Transfer me to customer service." not in agent.examples
    async with published(profile(), minilm) as cache:
        found = await cache.lookup("Human.")
        assert (found.match.route, found.match.intent) == ("exact", "speak_to_agent")
