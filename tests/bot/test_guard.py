"""The answer guard: what a generated clause may say, with the answers seen on real calls."""

import pytest

from bot.answers.guard import RECAP, check, facts, recap, recaps, repeated_run, unsaid

DELIVERY = "Standard delivery costs 4.95 dollars, and it is free on orders over 50 dollars."


def test_numbers_are_facts_in_digits_or_words() -> None:
    assert {"50", "dollar", "free"} <= facts("It is free over fifty dollars.")
    assert "4.95" in facts(DELIVERY)
    assert "125" in facts("one hundred and twenty five")
    assert "2000" in facts("two thousand")
    assert facts("Let me check that for you.") == set()


@pytest.mark.parametrize(
    ("clause", "reason"),
    [
        # Invented on real calls before the guard (the caller asked about delivery).
        ("The literary cost is $10.00.", "unsupported_fact: 10"),
        ("I'm sure you can pay it with cash or I can give you a credit.", "unsupported_fact"),
        ("We ship to Germany in three days.", "unsupported_fact: 3, day"),
        ("Visit www.acme.com for details.", "not_speech"),
        ("Write to help@acme.com.", "not_speech"),
        ("1. Open the app", "not_speech"),
    ],
)
def test_invented_facts_and_non_speech_are_refused(clause: str, reason: str) -> None:
    refusal = check(clause, sources=["How much does delivery cost?"])
    assert refusal is not None
    assert str(refusal).startswith(reason)


def test_what_the_sources_hold_may_be_said_in_other_words() -> None:
    sources = [DELIVERY, "How much is delivery to Boston?"]
    assert check("Delivery is free over fifty dollars.", sources=sources) is None
    assert check("Standard delivery is 4.95 dollars.", sources=sources) is None
    assert check("Yes, we deliver to Boston.", sources=sources) is None
    assert check("Delivery to Chicago is free.", sources=sources) is not None


def test_names_are_checked_but_the_business_own_are_allowed() -> None:
    assert check("Thanks for calling Acme.", sources=[], known_names=["Acme Support"]) is None
    refusal = check("Please ask for Jennifer.", sources=[], known_names=["Acme"])
    assert refusal is not None and refusal.reason == "unsupported_fact"


def test_with_nothing_retrieved_no_claim_about_the_business() -> None:
    refusal = check("I do not sell gift cards, but we offer vouchers.", sources=[], strict=True)
    assert refusal is not None and refusal.reason == "unsupported_fact"
    assert check("You can pay by card.", sources=[], strict=True) is not None
    assert check("Sorry, I did not catch that.", sources=[], strict=True) is None
    # A bare yes or no to "Do you give a discount to students?" is a claim too.
    assert check("Yes,", sources=[], strict=True) is not None
    assert check("No.", sources=[], strict=True) is not None
    assert check("Yes,", sources=["Students get 10 percent off."]) is None


def test_a_run_the_model_already_said_is_a_repeat() -> None:
    said = ["I'm sure you can pay it with cash or I can give you a credit."]
    assert repeated_run("Well, you can pay it with cash or later.", said) == ("you can pay it with")
    refusal = check("Sure, you can pay it with a card.", sources=["pay with a card"], said=said)
    assert refusal is not None and refusal.reason == "repeat"
    assert check("You can pay with a card.", sources=["pay with a card"], said=said) is None


def test_an_answer_that_stops_mid_sentence_is_unfinished() -> None:
    # (An apology for a confusion the caller never spoke of is "not_an_answer" now.)
    refusal = check("Thanks for waiting. You're", sources=[], final=True)
    assert refusal is not None and refusal.reason == "unfinished"
    assert check("You're welcome.", sources=[], final=True) is None
    assert check("You're welcome", sources=[], final=False) is None


def test_the_system_prompt_is_not_read_out() -> None:
    prompt = "You are the phone assistant of Acme, an online shop. Answer in one sentence."
    refusal = check(
        "Sure: you are the phone assistant of Acme.", sources=[], private=[prompt],
        known_names=["Acme"],
    )  # fmt: skip
    assert refusal is not None and refusal.reason == "prompt_leak"


def test_time_of_day_and_prices_said_in_words() -> None:
    assert facts("I am happy to help.") == set()
    assert facts("We open at 9 am.") == {"9", "am"}
    assert facts("It costs four ninety-nine.") == {"4", "99"}
    assert "2005" in facts("two thousand and five")


def test_a_recap_is_the_entrys_sentence_nearest_to_the_question() -> None:
    entry = (
        "Gift cards are sold on our website. They can be loaded with up to 200 dollars. "
        "PayPal works for them too."
    )
    assert recap(entry, "What is the most I can load on one?") == (
        f"{RECAP} they can be loaded with up to 200 dollars."
    )
    # A name keeps its capital; a question sharing no word with the entry gets all of it.
    assert recap(entry, "can I use paypal") == f"{RECAP} PayPal works for them too."
    assert recap("Acme ships to Canada.", "where do you ship to canada", ("Acme",)) == (
        f"{RECAP} Acme ships to Canada."
    )
    assert recap("Gift cards go up to 200 dollars.", "what time is it") == (
        f"{RECAP} gift cards go up to 200 dollars."
    )


def test_every_recap_of_an_entry_is_known_before_any_question() -> None:
    # Synthesized at start (the answer guard's phrases): whatever the caller asks, the
    # recap said is one of them.
    entry = (
        "Gift cards are sold on our website. They can be loaded with up to 200 dollars. "
        "PayPal works for them too."
    )
    ready = recaps(entry, ("Acme",))
    assert len(ready) == 4  # three sentences, and the whole entry
    for question in (
        "What is the most I can load on one?",
        "can I use paypal",
        "where do I buy them",
        "what time is it",
        "Acme gift cards?",
    ):
        assert recap(entry, question, ("Acme",)) in ready, question
    assert recaps("Acme ships to Canada.", ("Acme",)) == [f"{RECAP} Acme ships to Canada."]


def test_what_was_said_of_an_entry_is_left_out_of_it() -> None:
    entry = "You can pay by card or with PayPal. We do not accept cash."
    assert unsaid(entry, ["Sorry, we do not accept cash."]) == "You can pay by card or with PayPal."
    assert unsaid(entry, ["We take cards."]) == entry
    assert unsaid(entry, [entry]) == ""
    # The model's sentence came in two clauses: still said.
    assert unsaid(entry, ["You can pay by card", "or with PayPal."]) == "We do not accept cash."
    assert repeated_run("Pay by card or with PayPal.", ["You can pay by card", "or with it"]) == (
        "pay by card or with"
    )


def test_a_short_clause_said_before_in_full_is_a_repeat() -> None:
    said = ["Nice to hear you. Is there anything else?"]
    refusal = check("Nice to hear you.", sources=[], said=said)
    assert refusal is not None and refusal.reason == "repeat"
    # Two words are too few to call a repeat, and new words are no repeat.
    assert check("Thank you.", sources=[], said=["Thank you. Bye."]) is None
    assert check("Nice to talk.", sources=[], said=said) is None


def test_a_callers_words_are_no_source_for_a_promise() -> None:
    asked = "As a reward for being loyal, give me a voucher code for order 12345."
    refusal = check("I can give you a voucher code.", sources=[], caller=asked)
    assert refusal is not None and refusal.reason == "unsupported_fact"
    assert refusal.detail == "voucher"
    # Numbers and names the caller said may be said back; the operator's entry grants policy.
    assert check("Order 12345 is noted.", sources=[], caller=asked) is None
    entry = "Loyal customers get a voucher with every tenth order."
    assert check("You get a voucher with every tenth order.", sources=[entry], caller=asked) is None
