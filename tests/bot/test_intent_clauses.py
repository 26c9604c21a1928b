"""A request said with its context: clauses matched one by one (``bot.intents.clauses``),
with the real MiniLM embedder on a new operator's energy profile and on the default one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from bot.intents.cache import IntentCache
from bot.intents.clauses import clauses, decides, worth_splitting
from bot.intents.match import Match
from bot.pipeline.deciding.call_lookups import CallLookups
from bot.pipeline.deciding.decider import Decider
from bot.profile import DEFAULT_PROFILE, BotProfile, load_profile
from tests.bot.new_profiles import new_profile
from tests.bot.published import published

if TYPE_CHECKING:
    from serve.embed_minilm import MiniLMEmbedder

ENERGY = new_profile("northgate_energy")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "We moved out last week, and I need to close the account at the old flat.",
            ["We moved out last week", "I need to close the account at the old flat."],
        ),
        (
            "My order came yesterday, but the box was crushed and the lamp is broken.",
            ["My order came yesterday", "the box was crushed", "the lamp is broken."],
        ),
        ("Hi, I have a power cut.", []),  # "Hi" is no clause: one clause is the whole
        ("I'd like to give a meter reading, please.", []),
        ("Where is my order?", []),
        (  # a long story: its last four clauses
            "I ordered a sofa in May, and it never came, so I called you twice, "
            "but nobody rang me back, and I still don't know where it is.",
            [
                "it never came",
                "I called you twice",
                "nobody rang me back",
                "I still don't know where it is.",
            ],
        ),
    ],
)
def test_clauses_are_split_at_punctuation_and_joining_words(text: str, expected: list[str]) -> None:
    assert clauses(text) == expected


def _match(route: str, best: str | None, reason: str = "") -> Match:
    return Match(route=route, intent=None, score=0.5, best=best, reason=reason)  # type: ignore[arg-type]


def test_only_a_clause_answered_for_the_same_intent_decides() -> None:
    whole = _match("none", "moving_home", "background closer")
    assert worth_splitting(whole)
    assert decides(_match("semantic", "moving_home"), whole)
    assert not decides(_match("semantic", "power_cut"), whole)  # another intent
    # A clause is never asked about: the knowledge base has its say on the whole first.
    assert not decides(_match("confirm", "moving_home"), whole)
    asked = _match("confirm", "moving_home", "below threshold")
    assert worth_splitting(asked)
    assert decides(_match("semantic", "moving_home"), asked)
    assert not decides(_match("confirm", "moving_home"), asked)
    assert not worth_splitting(_match("none", "moving_home", "negative example closer"))
    assert not worth_splitting(_match("semantic", "moving_home"))


def _without_clauses(profile: BotProfile) -> BotProfile:
    matching = profile.intent_matching.model_copy(update={"clauses": False})
    return profile.model_copy(update={"intent_matching": matching})


@pytest.fixture(scope="module")
async def energy(minilm: MiniLMEmbedder) -> AsyncIterator[tuple[IntentCache, IntentCache]]:
    profile = load_profile(ENERGY)
    async with (
        published(profile, minilm) as split,
        published(_without_clauses(profile), minilm) as whole,
    ):
        yield split, whole


@pytest.mark.parametrize(
    ("text", "intent", "clause"),
    [
        (
            "We moved out last week, and I need to close the account at the old flat.",
            "moving_home",
            "We moved out last week",
        ),
        (
            "Our electricity has gone off, and the whole street is dark.",
            "power_cut",
            "Our electricity has gone off",
        ),
    ],
)
async def test_a_request_said_with_its_context_is_answered_by_its_clause(
    energy: tuple[IntentCache, IntentCache], text: str, intent: str, clause: str
) -> None:
    split, whole = energy
    before = (await whole.lookup(text)).match
    assert before.intent is None, before  # the whole words alone: no answer
    found = (await split.lookup(text)).match
    assert (found.route, found.intent, found.clause) == ("semantic", intent, clause), found


async def test_a_scene_setting_clause_never_answers_for_the_whole(
    minilm: MiniLMEmbedder,
) -> None:
    async with published(load_profile(DEFAULT_PROFILE), minilm) as cache:
        scene = (await cache.lookup("My order arrived this morning")).match
        assert scene.intent == "order_status", scene  # alone, the clause would answer
        found = (
            await cache.lookup("My order arrived this morning, but it's all smashed up.")
        ).match
    assert found.best == "damaged_item", found
    assert found.intent != "order_status", found
    assert found.clause is None, found


async def test_the_turns_decision_says_which_clause_decided(
    energy: tuple[IntentCache, IntentCache],
) -> None:
    split, _whole = energy
    decider = Decider(CallLookups(split, None), load_profile(ENERGY))
    decision = await decider.decide(
        "Our electricity has gone off, and the whole street is dark.", call_id="clauses"
    )
    assert (decision.kind, decision.intent) == ("answer", "power_cut"), decision
    assert (
        decision.why == "semantic match of power_cut by its clause 'Our electricity has gone off'"
    )
