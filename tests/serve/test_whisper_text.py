import pytest

from serve.asr_whisper import drop_repeats


@pytest.mark.parametrize(
    ("heard", "kept"),
    [
        ("and I pay with PayPal. And I pay With PayPal", "and I pay with PayPal."),
        ("What I should I get? What I should, I get...", "What I should I get?"),
        (
            "How can I return something I ordered? How can i return something i ordered ?",
            "How can I return something I ordered?",
        ),
        ("Where is my order? Where is my", "Where is my order?"),
        ("Where is my order? My order.", "Where is my order?"),
        ("Can am I pay with PayPal? Can am i pay with Pay Bill", "Can am I pay with PayPal?"),
        (
            "and you connect me to life, agent. And you connect Me to a life",
            "and you connect me to life, agent.",
        ),
        ("Agent. Agent.", "Agent."),
    ],
)
def test_a_looped_sentence_is_kept_once(heard: str, kept: str) -> None:
    assert drop_repeats(heard) == kept


@pytest.mark.parametrize(
    "said",
    [
        "Hello. Hello, is anyone there?",
        "I ordered a coat. I ordered a coat and a hat.",
        "I want a refund. I want to return it.",
        "Where is my order?",
        "",
    ],
)
def test_different_sentences_stay(said: str) -> None:
    assert drop_repeats(said) == said
