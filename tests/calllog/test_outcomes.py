"""The outcome rules, table-tested: what the log holds of a call in, its outcome out."""

from __future__ import annotations

import pytest

from bot.calllog.outcomes import (
    REASONS,
    CallOutcome,
    EventFacts,
    Step,
    TurnFacts,
    call_outcome,
    confirm_keys,
    step_turn_outcomes,
    turn_outcome,
    turn_outcomes,
)

_seq = iter(range(1, 10_000))


def t(
    route: str, words: str | None = "some words", intent: str | None = None, **kw: object
) -> TurnFacts:
    return TurnFacts(seq=next(_seq), route=route, intent=intent, transcript=words, **kw)  # type: ignore[arg-type]


def e(kind: str, detail: str | None = None) -> EventFacts:
    return EventFacts(kind=kind, detail=detail)


HANGUP = "200 Normal call clearing"

CALLS: list[tuple[str, list[Step], str, CallOutcome]] = [
    (
        "answered, then goodbye",
        [t("exact", "where is my order", "order_status"), t("exact", "bye", "goodbye")],
        "bot_hangup",
        CallOutcome("resolved", "goodbye"),
    ),
    (
        "answered, then the caller hung up",
        [t("knowledge", "can I pay by card", "payment_methods")],
        HANGUP,
        CallOutcome("resolved", "caller_hangup"),
    ),
    (
        "asked for a person",
        [t("semantic", "can I talk to someone", "talk_to_person"), e("transfer", "sip:a@b")],
        "transferred",
        CallOutcome("transferred", "asked"),
    ),
    (
        "an intent the profile routes to a person",
        [t("exact", "I want to cancel", "cancel_contract"), e("transfer", "sip:a@b"), e("bridged")],
        "caller hung up",
        CallOutcome("transferred", "intent"),
    ),
    (
        "said no to the bot's question, then put through",
        [
            t("confirm", "parcel gone", "order_status"),
            t("fallback", "no"),
            t("confirmed", "yes please", "talk_to_person"),
            e("transfer", "sip:a@b"),
        ],
        "transferred",
        CallOutcome("transferred", "declined"),
    ),
    (
        "not sure, then the offer of a colleague taken",
        [t("fallback", "gift cards?"), t("confirmed", "yes", "talk_to_person"), e("transfer")],
        "transferred",
        CallOutcome("transferred", "unsure"),
    ),
    (
        "a lookup failed, then put through",
        [
            t("lookup", "12345", "order_status", error="lookup: failed timeout"),
            t("exact", "an agent please", "talk_to_person"),
            e("transfer"),
        ],
        "transferred",
        CallOutcome("transferred", "lookup_failed"),
    ),
    (
        "the overflow target from the queue",
        [e("queued", "position 3"), e("queue_transfer", "waited 60.0 s")],
        "transferred",
        CallOutcome("transferred", "queue_overflow"),
    ),
    (
        "hung up in the queue",
        [e("queued", "position 1"), e("queue_abandoned", "waited 4.0 s")],
        "caller_hangup",
        CallOutcome("abandoned", "queue"),
    ),
    ("hung up during the greeting", [], HANGUP, CallOutcome("abandoned", "greeting")),
    (
        "hung up after not sure",
        [t("exact", "hours?", "opening_hours"), t("fallback", "gift cards?")],
        HANGUP,
        CallOutcome("abandoned", "not_sure"),
    ),
    (
        "hung up while the bot's question waited",
        [t("confirm", "parcel gone", "order_status")],
        HANGUP,
        CallOutcome("abandoned", "question"),
    ),
    (
        "hung up while a number was asked for",
        [t("ask", "where is my order", "order_status"), e("lookup_asked"), e("collect_started")],
        HANGUP,
        CallOutcome("abandoned", "lookup"),
    ),
    (
        "silence until the timer ended the call",
        [
            e("silence_prompt", "8 s quiet"),
            e("call_limit", "silence"),
            t("fallback", ""),
        ],
        "silence",
        CallOutcome("abandoned", "silence"),
    ),
    (
        "hung up after the silence prompt",
        [t("exact", "hours?", "opening_hours"), e("silence_prompt", "8 s quiet")],
        HANGUP,
        CallOutcome("abandoned", "silence"),
    ),
    (
        "a transfer failed, then the caller hung up",
        [t("exact", "agent", "talk_to_person"), e("transfer"), e("transfer_failed", "486 Busy")],
        HANGUP,
        CallOutcome("abandoned", "transfer_failed"),
    ),
    (
        "the line full",
        [e("queue_full", "5 waiting")],
        "queue_full",
        CallOutcome("refused", "queue_full"),
    ),
    (
        "the node stopping",
        [e("queued"), e("queue_closed")],
        "queue_closed",
        CallOutcome("refused", "draining"),
    ),
    (
        "waited too long",
        [e("queued"), e("queue_timeout")],
        "queue_timeout",
        CallOutcome("refused", "queue_timeout"),
    ),
    ("the node crashed", [t("llm", "hello")], "crashed", CallOutcome("failed", "crashed")),
    (
        "an error on the last turn",
        [t("llm", "hello", error="llm: ProviderTimeout")],
        HANGUP,
        CallOutcome("failed", "error"),
    ),
    (
        "the call limit after an answer",
        [t("llm", "hello"), e("call_limit", "max_duration"), t("fallback", "")],
        "max_duration",
        CallOutcome("resolved", "max_duration"),
    ),
    (
        # Key 2 on the question: the keypad's turn has no words; the question is answered
        # otherwise ("not sure"), then key 0 puts the caller through.
        "said no on the keypad to the bot's question, then put through",
        [
            t("confirm", "has my package left yet", "order_status"),
            e("confirm_key", "2"),
            t("fallback", None),
            e("menu", "main: 0"),
            t("keypad", None, "talk_to_person"),
            e("transfer", "sip:a@b"),
            e("bridged", "bridge sip:a@b"),
        ],
        "transferred",
        CallOutcome("transferred", "declined"),
    ),
    (
        "said no on the keypad, then hung up on the answer",
        [t("confirm", "parcel", "order_status"), e("confirm_key", "2"), t("fallback", None)],
        HANGUP,
        CallOutcome("abandoned", "not_sure"),
    ),
    (
        "the post-call question's answer does not move where the call stood",
        [t("keypad", None, "goodbye"), e("post_call_answer", "no")],
        "bot_hangup",
        CallOutcome("resolved", "goodbye"),
    ),
    (
        "digits and fillers do not move where the call stood",
        [t("exact", "hours?", "opening_hours"), e("filler", "one moment"), e("dtmf", "5")],
        HANGUP,
        CallOutcome("resolved", "caller_hangup"),
    ),
]


@pytest.mark.parametrize(("name", "steps", "end", "expected"), CALLS, ids=[c[0] for c in CALLS])
def test_call_outcome(name: str, steps: list[Step], end: str, expected: CallOutcome) -> None:
    got = call_outcome(steps, end)
    assert got == expected, name
    assert got.reason in REASONS[got.outcome]


TURNS: list[tuple[str, TurnFacts, TurnFacts | None, str]] = [
    ("an exact answer", t("exact", "hours", "opening_hours"), None, "answered"),
    ("a knowledge answer", t("knowledge", "paypal?", "payment_methods"), None, "answered"),
    ("the language model", t("llm", "hello"), None, "answered"),
    ("a keypad choice", t("keypad", ""), None, "answered"),
    ("a yes", t("confirmed", "yes", "order_status"), None, "answered"),
    ("a question answered yes", t("confirm", "parcel"), t("confirmed", "yes"), "confirmed_yes"),
    ("a question answered no", t("confirm", "parcel"), t("llm", "no"), "confirmed_no"),
    ("a question not answered", t("confirm", "parcel"), t("exact", "opening hours"), "unanswered"),
    ("a question, then the end", t("confirm", "parcel"), None, "unanswered"),
    ("not sure", t("fallback", "gift cards?"), None, "declined"),
    ("said again", t("repeat", "say that again"), None, "repeated"),
    ("cut by the caller", t("llm", "hello", barged_in=True), None, "cut"),
    ("nothing heard", t("none", ""), None, "no_speech"),
    ("the limit's goodbye", t("fallback", ""), None, "no_speech"),
    ("an error", t("llm", "hello", error="tts: failed"), None, "error"),
    (
        "a failed lookup still answers",
        t("lookup", "123", error="lookup: failed x"),
        None,
        "answered",
    ),
    ("a number asked for", t("ask", "where is my order"), None, "asked"),
]


@pytest.mark.parametrize(("name", "turn", "after", "expected"), TURNS, ids=[c[0] for c in TURNS])
def test_turn_outcome(name: str, turn: TurnFacts, after: TurnFacts | None, expected: str) -> None:
    assert turn_outcome(turn, after) == expected, name


def test_turn_outcomes_read_each_reply() -> None:
    turns = [t("confirm", "parcel"), t("fallback", "no"), t("confirmed", "yes", "talk_to_person")]
    assert turn_outcomes(turns) == ["confirmed_no", "declined", "answered"]


def test_a_key_answers_the_question_before_it() -> None:
    """1 and 2 on the keypad answer a confirmation question as "yes" and "no" do; the turn
    the key made (no words of the caller's) is no silence."""
    asked, keyed = t("confirm", "parcel", "order_status"), t("fallback", None)
    steps: list[Step] = [asked, e("confirm_key", "2"), keyed, e("dtmf", "9"), t("exact", "bye")]
    assert confirm_keys(steps) == {keyed.seq: "no"}
    assert step_turn_outcomes(steps) == ["confirmed_no", "declined", "answered"]
    # Without the key's event, the same turns read as a question left unanswered.
    assert turn_outcomes([asked, keyed]) == ["unanswered", "no_speech"]
    yes = [t("confirm", "parcel", "order_status"), e("confirm_key", "1"), t("llm", None)]
    assert step_turn_outcomes(yes) == ["confirmed_yes", "answered"]
    assert confirm_keys([e("confirm_key", "7"), t("llm", None)]) == {}
    # A key pressed over the question stops it (a barge-in) and still answers it.
    cut = t("confirm", "parcel", "order_status", barged_in=True)
    over = [cut, e("confirm_key", "2"), t("fallback", None)]
    assert step_turn_outcomes(over) == ["confirmed_no", "declined"]
    assert turn_outcomes([cut, t("llm", "what else")]) == ["cut", "answered"]
