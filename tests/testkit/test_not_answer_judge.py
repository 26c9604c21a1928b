"""The answer evaluation's "not an answer" judge: each kind, and what it leaves alone."""

from __future__ import annotations

from bot.profile import DEFAULT_PROFILE, load_profile
from testkit.answer_eval.not_answer import judge
from testkit.answer_eval.scoring import Reference

REF = Reference.of(load_profile(DEFAULT_PROFILE))


def kinds(generated: list[str], caller: str, expected: str | None = None) -> list[str]:
    found = judge(
        generated,
        " ".join(generated),
        caller,
        entries=REF.entries,
        operator_texts=REF.operator_texts,
        expected=expected,
    )
    return [kind for kind, _ in found]


def test_each_kind_is_found_in_what_the_model_said() -> None:
    assert kinds(["As a customer service AI, I only answer questions."], "Hi") == ["meta"]
    assert kinds(["I'm sorry for your loss."], "Where is my order?") == ["apology"]
    assert kinds(["Sorry for the confusion."], "Do you sell gift cards?") == ["apology"]
    assert kinds(["I'll give you a credit card."], "Can I pay by card?") == ["offer"]
    assert kinds(["We offer financing."], "Financing?") == ["claim"]
    assert kinds(["We cannot deliver to PO boxes."], "Can I pick up in person?") == ["other_topic"]


def test_answers_and_fitting_words_are_not_flagged() -> None:
    paypal = "You can pay by credit or debit card, or with PayPal."
    assert kinds([paypal], "Visa?", expected="payment_methods") == []
    assert kinds(["I'm sorry to hear that."], "My kettle is broken") == []
    assert kinds(["I can put you through to a colleague."], "Gift wrap?") == []
    assert kinds(["I'm a virtual assistant."], "Are you a robot?") == []
    # The entry the question is about is no other topic.
    assert kinds(["We cannot deliver to PO boxes."], "PO box?", expected="po_boxes") == []
