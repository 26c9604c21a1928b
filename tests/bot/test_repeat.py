"""Which words ask to hear the last answer again (bot/answers/repeat.py)."""

from __future__ import annotations

import pytest

from bot.answers.repeat import asks_to_repeat


@pytest.mark.parametrize(
    "text",
    ["Could you repeat that?", "Can you say that again?", "Sorry, what was that?", "Pardon?",
     "Pardon me?", "Come again?", "Sorry?  Could you repeat that please?",
     "I didn't catch that.", "I didn’t hear what you said.", "What did you just say?",
     "Say again?", "Please repeat that.", "Sorry, I missed that, can you say it again?",
     "Hello? You broke up.", "repeat that please", "Would you read that back?"],
)  # fmt: skip
def test_asking_to_hear_it_again(text: str) -> None:
    assert asks_to_repeat(text)


@pytest.mark.parametrize(
    "text",
    ["Could you repeat the opening hours?", "Sorry, where is my order?", "What was the price?",
     "Say that again and I will hang up on you, where is my parcel?", "Sorry.", "Thank you.",
     "What is that charge on my card?", "Again?", "", "   ",
     "Can you repeat that the order was cancelled and refund me twice the money please now"],
)  # fmt: skip
def test_a_request_of_its_own_is_not(text: str) -> None:
    assert not asks_to_repeat(text)
