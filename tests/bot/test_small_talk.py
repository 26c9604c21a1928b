import pytest

from bot.answers.small_talk import SmallTalkReplies, is_small_talk, small_talk_kind


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


@pytest.mark.parametrize(
    ("text", "kind"),
    [("Hi there.", "greeting"), ("Hello?", "greeting"), ("Good morning!", "greeting"),
     ("Hey there, good afternoon.", "greeting"), ("Hello, is anyone there?", "presence"),
     ("Can you hear me?", "presence"), ("Thank you so much.", "thanks"),
     ("Thanks, bye.", "goodbye"), ("Okay, bye.", "goodbye"), ("Are you a robot?", "identity"),
     ("Who am I speaking with?", "identity"), ("How are you today?", "how_are_you"),
     ("Yes.", "acknowledgement"), ("No.", "acknowledgement"), ("Okay.", "acknowledgement"),
     ("Yes, yes, yes.", "acknowledgement"), ("Okay, thanks.", "thanks"),
     ("Yes, hello?", "greeting")],
)  # fmt: skip
def test_the_kind_of_a_whole_small_talk_utterance(text: str, kind: str) -> None:
    assert small_talk_kind(text) == kind


@pytest.mark.parametrize(
    "text",
    ["Hi, where is my order?", "Thanks, but where is my refund?", "Yes, my order.", "Sorry?",
     "Hello, do you have the blue hoodie in stock?", "What is the weather like today?",
     "Hi, I'd like to cancel", "Are you open today?", "Good morning, I have a question", ""],
)  # fmt: skip
def test_a_request_gets_no_fixed_reply(text: str) -> None:
    assert small_talk_kind(text) is None
    assert SmallTalkReplies().reply(text, "Acme") is None


def test_replies_name_the_bot_and_an_empty_one_is_left_to_the_model() -> None:
    replies = SmallTalkReplies(greeting="")
    assert "Acme" in (replies.reply("Are you a robot?", "Acme") or "")
    assert replies.reply("Hello.", "Acme") is None
    assert "" not in replies.phrases("Acme") and len(replies.phrases("Acme")) == 7  # 8 replies


def test_a_bare_yes_gets_the_greeting_before_any_answer_and_anything_else_after() -> None:
    replies = SmallTalkReplies()
    assert replies.reply("Yes.", "Acme", answered=False) == replies.greeting
    assert replies.reply("Okay.", "Acme") == replies.acknowledgement
    assert "anything else" in replies.acknowledgement
