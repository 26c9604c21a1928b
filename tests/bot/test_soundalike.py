"""Keywords heard as the speech recognizer spells a name it does not know."""

from __future__ import annotations

import math

import pytest

from bot.intents.match import normalize
from bot.knowledge.soundalike import MIN_LETTERS, SoundAlike, distance

RULE = SoundAlike(1 / 3)


def heard(text: str) -> list[str]:
    return normalize(text).split()


def test_slips_of_hearing_cost_less_than_other_letters() -> None:
    assert distance("paypal", "paypal") == 0.0
    assert distance("papal", "paypal") == pytest.approx(0.5)  # a vowel dropped
    assert distance("peypal", "paypal") == pytest.approx(0.25)  # a vowel for a vowel
    assert distance("baypal", "paypal") == pytest.approx(0.5)  # "b" for "p"
    assert distance("paypar", "paypal") == pytest.approx(0.5)  # "r" for "l"
    assert distance("kaypal", "paypal") == pytest.approx(1.0)  # any other consonant
    assert distance("paypall", "paypal") == pytest.approx(1.0)  # a consonant added
    assert distance("", "paypal") == pytest.approx(0.5 + 0.5 + 1 + 1 + 1 + 0.5)
    assert distance("kettle", "paypal", limit=1.0) == math.inf  # given up past the limit


@pytest.mark.parametrize(
    ("text", "keyword"),
    [
        ("Do you take paper?", "PayPal"),
        ("And can I pay with people from there?", "PayPal"),
        ("Can I pay with pay pal?", "PayPal"),  # one word heard as two
        ("I only have a pob box, can you send it there?", "PO box"),
        ("And if my address is a pog box...", "PO box"),
        ("I only have the pull box.", "PO box"),  # a doubled letter is one sound
        ("Is that on the warrenty?", "warranty"),
    ],
)
def test_a_run_of_words_that_sounds_like_the_keyword_matches(text: str, keyword: str) -> None:
    assert RULE.matches(heard(text), heard(keyword))


@pytest.mark.parametrize(
    ("text", "keyword"),
    [
        ("When is my parcel going to get here?", "PayPal"),  # 0.375 of its letters
        ("How much do I pay for postage?", "PayPal"),  # two words must be nearer
        ("Do you take apple pay?", "PayPal"),  # begins with another sound
        ("What's the biggest discard I can get?", "gift card"),
        ("And if my dress is a pull-docks.", "PO box"),
        ("Tell me a joke.", "PayPal"),
        ("", "PayPal"),
    ],
)
def test_other_words_do_not(text: str, keyword: str) -> None:
    assert not RULE.matches(heard(text), heard(keyword))


def test_short_keywords_and_a_zero_share_match_nothing() -> None:
    assert len("visa") < MIN_LETTERS
    assert not RULE.matches(heard("do you take visas"), heard("Visa"))
    assert not RULE.matches(heard("do you take viza"), heard("Visa"))
    assert not SoundAlike(0.0).matches(heard("do you take paper"), heard("PayPal"))
    assert SoundAlike(0.5).matches(heard("when is my parcel here"), heard("PayPal"))
