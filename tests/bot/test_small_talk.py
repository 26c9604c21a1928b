import pytest

from bot.answers.small_talk import is_small_talk


@pytest.mark.parametrize(
    "text",
    ["Hello?", "Hi there.", "Thank you so much.", "Is anyone there?", "Are you a robot?",
     "Okay, bye.", "Good morning!", "How are you today?"],
)  # fmt: skip
def test_greetings_and_thanks_are_small_talk(text: str) -> None:
    assert is_small_talk(text)


@pytest.mark.parametrize(
    "text",
    ["Do you sell second hand items?", "Can I collect my order from a store?",
     "Hello, do you have the blue hoodie in stock in medium size please?",
     "What's the weather like?", "The screen was cracked."],
)  # fmt: skip
def test_requests_are_not(text: str) -> None:
    assert not is_small_talk(text)
