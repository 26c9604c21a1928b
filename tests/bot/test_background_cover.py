"""Background lines a profile's own intents cover stop counting against it
(``bot.intents.fit.covered``): a bank whose intents cover a locked account, a changed
email or phone number and a loan keeps those callers, while what it does not cover is still
held back. Matched with the real MiniLM embedder, as the intent cache matches at load."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pytest

from bot.intents.cache import IntentCache
from bot.intents.fit import covered
from bot.intents.match import IntentVectors
from bot.profile import load_profile
from tests.bot.new_profiles import new_profile
from tests.bot.published import published

if TYPE_CHECKING:
    from serve.embed_minilm import MiniLMEmbedder

PROFILE = new_profile("kestrel_bank")


@pytest.fixture(scope="module")
async def cache(minilm: MiniLMEmbedder) -> AsyncIterator[IntentCache]:
    profile = load_profile(PROFILE)
    assert profile.intent_matching == type(profile.intent_matching)()  # default settings
    async with published(profile, minilm) as built:
        yield built


async def test_the_lines_its_intents_cover_are_left_out_and_raise_nothing(
    cache: IntentCache,
) -> None:
    fitted = cache.fitted
    assert fitted is not None
    for line in (
        "My account has been locked.",
        "I want to change my email address.",
        "Can you update my phone number?",
        "Can you lend me some money?",
        "My card keeps getting declined.",
    ):
        assert line in fitted.left_out
    # Small talk, off-topic requests and near-misses of its intents still hold.
    for line in (
        "Tell me something funny.",
        "Am I talking to a machine?",
        "Is the bank open today?",
        "How do I apply for a mortgage?",
        "I want to buy a car.",
        "There's a charge I don't recognise.",
    ):
        assert line in fitted.background_texts
    assert len(fitted.left_out) <= 15 and len(fitted.background_texts) > 140
    # "Can you lend me some money?", kept, would raise the loan intent's threshold above
    # every caller's score (0.64): left out, the profile keeps its threshold.
    assert fitted.rule.threshold == pytest.approx(0.45)
    assert not [w for w in fitted.warnings if w.kind == "raised"]


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        # Each held back as "background closer" while the line it is near counted against
        # the profile (and the loan intent's threshold was raised to 0.66 by its line).
        ("My account is locked.", "locked_out"),
        ("My account has been locked and I can't get in.", "locked_out"),
        ("Please change my email address.", "update_details"),
        ("Can I change my mobile number?", "update_details"),
        ("Could you lend me some money?", "loan"),
        ("Can you lend me two thousand pounds?", "loan"),
        ("I'd like to create an account.", "open_account"),
        ("Someone hacked into my account.", "unknown_payment"),
        # The line itself, said by a caller.
        ("My payment didn't go through.", "card_declined"),
    ],
)
async def test_its_callers_get_the_answer_or_a_question_about_the_right_intent(
    cache: IntentCache, text: str, intent: str
) -> None:
    found = await cache.lookup(text)
    assert found.match.route in ("semantic", "confirm"), found.match
    assert found.match.best == intent


@pytest.mark.parametrize(
    "text",
    [
        "Tell me a joke.",
        "What's the weather like today?",
        "Can you book me a table for two?",
        "Is the branch open on Sunday?",
        "How do I apply for a mortgage?",
    ],
)
async def test_what_it_does_not_cover_is_still_held_back(cache: IntentCache, text: str) -> None:
    found = await cache.lookup(text)
    assert found.match.intent is None, found.match
    assert found.match.route == "none", found.match


async def test_a_complaint_is_asked_about_a_person_never_transferred(cache: IntentCache) -> None:
    # The agent intent matches the product's phrasings of that request too
    # (``bot.intents.stock``), "I'd like to talk to your staff." among them: a complaint
    # about staff gets "do you want to speak to a person?" at most, never a transfer.
    found = await cache.lookup("I want to complain about your staff.")
    assert found.match.intent is None, found.match
    assert found.match.route == "none" or found.match.best == "speak_to_agent", found.match


def unit(*weights: float) -> npt.NDArray[np.float32]:
    v = np.array(weights + (0.0,) * (5 - len(weights)), np.float32)
    return v / np.linalg.norm(v)


def intent(name: str, *examples: npt.NDArray[np.float32]) -> IntentVectors:
    return IntentVectors(
        name,
        tuple(f"{name} {n}" for n in range(len(examples))),
        (),
        np.stack(examples),
        np.zeros((0, 5), np.float32),
    )


def test_a_line_is_covered_as_near_as_the_intents_own_examples_are() -> None:
    # Examples 0.64 alike: held out, each scores 0.64 to the others.
    tight = intent("tight", unit(1.0, 0.75), unit(1.0, 0.0, 0.75), unit(1.0, 0.0, 0.0, 0.75))
    lines = np.stack(
        [
            unit(1.0, 0.3, 0.3, 0.3),  # among the examples: scores 0.87 to them
            unit(1.0, 1.5, 0.0, 0.0, 1.0),  # 0.83 to one example, 0.39 to the others
            unit(0.0, 0.0, 0.0, 0.0, 1.0),  # unrelated
        ]
    )
    assert covered([tight], lines, top_k=4).tolist() == [True, False, False]
    # Examples 0.31 alike: the intent takes in the line near one of them (0.47).
    loose = intent("loose", unit(1.0, 1.5), unit(1.0, 0.0, 1.5), unit(1.0, 0.0, 0.0, 1.5))
    assert covered([loose], lines, top_k=4).tolist() == [True, True, False]


def test_a_line_nearer_to_another_line_than_to_any_example_is_not_covered() -> None:
    loose = intent("loose", unit(1.0, 1.5), unit(1.0, 0.0, 1.5), unit(1.0, 0.0, 0.0, 1.5))
    line = unit(1.0, 1.5, 0.0, 0.0, 1.0)
    alone = covered([loose], np.stack([line]), top_k=4)
    beside = covered([loose], np.stack([line, unit(1.0, 1.5, 0.0, 0.0, 1.2)]), top_k=4)
    assert alone.tolist() == [True]
    assert beside.tolist() == [False, False]


def test_an_intent_of_one_example_is_held_to_the_other_intents_examples() -> None:
    tight = intent("tight", unit(1.0, 0.75), unit(1.0, 0.0, 0.75), unit(1.0, 0.0, 0.0, 0.75))
    single = intent("single", unit(0.0, 0.0, 0.0, 0.0, 1.0))
    near, far = unit(0.2, 0.0, 0.0, 0.0, 1.0), unit(1.0, 0.0, 0.0, 0.0, 1.0)
    assert covered([tight, single], np.stack([near, far]), top_k=4).tolist() == [True, False]
    # Alone, with nothing held out to compare with, it covers no line.
    assert covered([single], np.stack([near]), top_k=4).tolist() == [False]
