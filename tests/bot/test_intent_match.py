"""The matching rule on hand-made vectors: normalization, calibration, the hang-up threshold,
the background lines."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from bot.intents.match import (
    COHESION_REFERENCE,
    IntentIndex,
    IntentMatchingConfig,
    IntentVectors,
    normalize,
    query_text,
)

NO_NEGATIVES = np.zeros((0, 4), np.float32)


def bare(**fields: float) -> IntentMatchingConfig:
    """The rule with only the checks a test sets: the profile's defaults add a stricter score
    for actions, a lead over the background lines and questions."""
    base = {"top_k": 2, "action_threshold": 0.0, "background_margin": 0.0, "confirm_threshold": 0.0}
    return IntentMatchingConfig.model_validate({**base, **fields})


def unit(*rows: list[float]) -> np.ndarray:
    v = np.asarray(rows, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_normalize_drops_hesitations() -> None:
    assert normalize("Um, where's my ORDER?") == "where's my order"
    assert normalize("I, uh, want a refund") == "i want a refund"
    assert normalize("Uhm... erm.") == ""


def test_query_text_keeps_the_sentence_and_drops_hesitations_and_loops() -> None:
    assert query_text("Um, where's my order?") == "where's my order?"
    assert query_text("Uh. Hello?") == "Hello?"
    assert query_text("What's your number. What's your number? What's your") == (
        "What's your number."
    )
    assert query_text("Is it late? Yes it is.") == "Is it late? Yes it is."
    assert query_text("Hmm.") == ""


def test_no_words_is_no_match() -> None:
    e = np.eye(4, dtype=np.float32)
    index = IntentIndex([IntentVectors("a", ("x",), (), e[[0]], NO_NEGATIVES)])
    found = index.exact("Um...")
    assert found is not None and found.intent is None and found.reason == "no words"


def test_calibration_holds_a_cohesive_intent_to_closer_matches() -> None:
    # "tight": two near-identical examples; "loose": two different ones.
    tight = unit([1, 0.05, 0, 0], [1, -0.05, 0, 0])
    loose = unit([0, 1, 0.6, 0], [0, 1, -0.6, 0])
    index = IntentIndex(
        [
            IntentVectors("tight", ("t1", "t2"), (), tight, NO_NEGATIVES),
            IntentVectors("loose", ("l1", "l2"), (), loose, NO_NEGATIVES),
        ]
    )
    cohesion = index.cohesion(2)
    assert cohesion[0] > COHESION_REFERENCE > cohesion[1]
    query = unit([1, 0.9, 0, 0])[0]
    plain = index.semantic(query, bare(threshold=0.5, margin=0.0, negative_margin=0.0))
    assert plain.intent == "tight"
    rule = bare(threshold=0.5, margin=0.0, negative_margin=0.0, calibration=1.0)
    calibrated = index.semantic(query, rule)
    assert calibrated.intent == "loose"


def test_action_threshold_applies_to_intents_that_hang_up_or_transfer() -> None:
    e = np.eye(4, dtype=np.float32)
    index = IntentIndex(
        [
            IntentVectors("bye", ("bye",), (), e[[0]], NO_NEGATIVES, action="hangup"),
            IntentVectors("agent", ("agent",), (), e[[1]], NO_NEGATIVES, action="transfer"),
            IntentVectors("hours", ("hours",), (), e[[2]], NO_NEGATIVES),
        ]
    )
    rule = bare(threshold=0.5, margin=0.0, negative_margin=0.0, top_k=1)
    strict = bare(threshold=0.5, margin=0.0, negative_margin=0.0, top_k=1, action_threshold=0.8)
    for row, name in ((0, "bye"), (1, "agent"), (2, "hours")):
        query = unit([*(0.7 if i == row else 0.0 for i in range(3)), 0.71])[0]
        assert index.semantic(query, rule).intent == name
        expected = None if name in ("bye", "agent") else name
        assert index.semantic(query, strict).intent == expected


def test_negatives_are_held_to_the_similarity() -> None:
    examples = unit([1, 0, 0, 0], [1, 0.2, 0, 0])
    negative = unit([1, 0, 0.5, 0])
    index = IntentIndex([IntentVectors("a", ("x", "y"), ("n",), examples, negative)])
    query = unit([1, 0, 0.45, 0])[0]
    rule = bare(threshold=0.5, margin=0.0, negative_margin=0.0, top_k=2)
    found = index.semantic(query, rule)
    assert found.reason == "negative example closer"
    assert found.negative_score >= found.similarity


def test_a_background_line_is_held_to_the_intents_nearest_example() -> None:
    # A thin intent: one example says what the caller says, two others are worded apart.
    examples = unit([1, 0, 0, 0], [0.5, 1, 0, 0], [0.5, 0, 1, 0])
    index = IntentIndex(
        [IntentVectors("cancel", ("x", "y", "z"), (), examples, NO_NEGATIVES)],
        background=unit([1, 0, 0, 1]),  # a generic line near the caller's words
    )
    query = unit([1, 0.05, 0, 0.2])[0]
    rule = bare(threshold=0.45, margin=0.0, negative_margin=0.0, top_k=3)
    rule = rule.model_copy(update={"background_margin": 0.05, "confirm_threshold": 0.3})
    scores = index.scores(query, rule.top_k)
    assert scores.nearest is not None
    nearest = float(scores.nearest[0])
    # The mean of the three examples is below the line, the nearest example above it.
    assert float(scores.intent[0]) < scores.background < nearest - rule.background_margin
    found = index.judge(scores, rule)
    assert (found.route, found.intent) == ("semantic", "cancel"), found
    # Held to the mean, as before, the line would have kept the caller from the intent.
    found = index.judge(replace(scores, nearest=None), rule)
    assert (found.route, found.reason) == ("none", "background closer"), found


def _two_intents(background: np.ndarray) -> IntentIndex:
    return IntentIndex(
        [
            IntentVectors("loan", ("x",), (), unit([1, 0, 0, 0]), NO_NEGATIVES),
            IntentVectors("card", ("y",), (), unit([0, 1, 0, 0]), NO_NEGATIVES),
        ],
        background=background,
    )


def test_a_question_needs_the_intent_ahead_of_the_runner_up() -> None:
    index = _two_intents(unit([0, 0, 0, 1]))
    rule = bare(threshold=0.9, margin=0.1, negative_margin=0.0, top_k=1)
    rule = rule.model_copy(update={"confirm_threshold": 0.3, "confirm_margin": 0.03})
    # Below the threshold, well ahead of "card": asked about.
    found = index.semantic(unit([1, 0.5, 0, 0])[0], rule)
    assert (found.route, found.best) == ("confirm", "loan"), found
    # As near to "card" as to "loan" (a lead of 0.01): a coin toss, not asked.
    found = index.semantic(unit([1, 0.98, 0, 0])[0], rule)
    assert found.score - found.runner_up_score < rule.confirm_margin
    assert (found.route, found.intent) == ("none", None), found
    # Without the check, it was asked about.
    found = index.semantic(unit([1, 0.98, 0, 0])[0], rule.model_copy(update={"confirm_margin": 0}))
    assert found.route == "confirm", found


def test_a_clear_intent_is_asked_about_when_a_background_line_is_a_little_nearer() -> None:
    # The line ("I want to buy a car.") is worded like the caller ("I need a loan to buy a
    # car."), nearer than the intent's example, though the caller clearly means the intent.
    index = _two_intents(unit([1, 0, 0, 0.6]))
    query = unit([1, 0.1, 0, 0.3])[0]
    rule = IntentMatchingConfig(top_k=1, threshold=0.45, margin=0.1)
    scores = index.scores(query, rule.top_k)
    assert scores.nearest is not None
    lead = float(scores.nearest[0]) - scores.background
    assert rule.clear_background_margin <= lead < 0.0
    found = index.judge(scores, rule)
    assert (found.route, found.best, found.intent) == ("confirm", "loan", None), found
    assert found.reason == "background closer"
    # The same words with a nearer line, or an intent not clearly ahead: no question.
    nearer = replace(
        scores, background=float(scores.nearest[0]) - rule.clear_background_margin + 0.01
    )
    assert index.judge(nearer, rule).route == "none"
    tied = rule.model_copy(update={"clear_margin": 0.9})
    assert index.judge(scores, tied).route == "none"
    # Turned off (the line held to ``confirm_background_margin`` alone): no question.
    off = rule.model_copy(update={"clear_background_margin": 0.0})
    assert index.judge(scores, off).route == "none"
