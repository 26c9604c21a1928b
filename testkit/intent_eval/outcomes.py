"""What the matcher decides on a split's utterances, counted: right intent, wrong intent,
sent to the LLM, false accepts (``Outcome``); and how far the embedder alone gets
(``Ranking``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bot.intents.match import IntentIndex, IntentMatchingConfig, Match, Scores, Vectors
from testkit.intent_eval.eval_sets import Items

#: The "intent" of an utterance that must not match, and of a decision that matched none.
NONE = "(none)"


@dataclass
class Outcome:
    """Counts for one split, one input and one threshold setting."""

    correct: int = 0
    wrong: int = 0  # a paraphrase answered with another intent
    missed: int = 0  # a paraphrase sent to the LLM
    false_accepts: int = 0  # a negative answered from the cache
    #: Paraphrases asked about with a confirmation question: the right intent (a "yes"
    #: plays its answer) or another one (the caller says no: the LLM answers).
    confirmed: int = 0
    confirmed_wrong: int = 0
    #: Negatives asked about (the caller says no: the LLM answers).
    negatives_asked: int = 0
    #: Paraphrases not answered directly because a background line was nearer than the
    #: intent's nearest example (sent on, or asked about): what those lines cost.
    background_closer: int = 0
    positives: int = 0
    negatives: int = 0
    confusion: dict[tuple[str, str], int] = field(default_factory=dict)
    false_accept_texts: list[tuple[str, str, float]] = field(default_factory=list)
    wrong_texts: list[tuple[str, str, str, float]] = field(default_factory=list)
    missed_texts: list[tuple[str, str, str, float]] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.positives if self.positives else 0.0

    @property
    def false_accept_rate(self) -> float:
        return self.false_accepts / self.negatives if self.negatives else 0.0

    @property
    def right_with_confirm(self) -> float:
        """Paraphrases answered right, directly or after one confirmation question."""
        return (self.correct + self.confirmed) / self.positives if self.positives else 0.0

    @property
    def asked_in_scope(self) -> float:
        asked = self.confirmed + self.confirmed_wrong
        return asked / self.positives if self.positives else 0.0

    @property
    def asked_out_of_scope(self) -> float:
        return self.negatives_asked / self.negatives if self.negatives else 0.0


def prepare(index: IntentIndex, items: Items, vectors: Vectors, top_k: int) -> list[Match | Scores]:
    """Per utterance: the exact-match decision, or its scores for the semantic rule."""
    return [
        index.exact(text) or index.scores(vector, top_k)
        for (text, _), vector in zip(items, vectors, strict=True)
    ]


@dataclass(frozen=True)
class Ranking:
    """How far the embedder alone gets, before any rule: which part of the task is hard."""

    nearest_right: float
    """Share of the paraphrases whose best-scoring intent (mean of its ``top_k`` nearest
    examples, no threshold) is the intent they mean."""
    one_threshold: float
    """Share of the paraphrases a single score threshold, set just above the best-scoring
    negative, would answer right: the most any threshold-only rule gets at 0 false accepts."""


def ranking(index: IntentIndex, items: Items, vectors: Vectors, top_k: int) -> Ranking:
    names = [i.name for i in index.intents]
    right: list[tuple[bool, float]] = []
    negative_best = -1.0
    for (_, truth), vector in zip(items, vectors, strict=True):
        scores = index.scores(vector, top_k).intent
        best = int(np.argmax(scores))
        if truth is None:
            negative_best = max(negative_best, float(scores[best]))
        else:
            right.append((names[best] == truth, float(scores[best])))
    if not right:
        return Ranking(0.0, 0.0)
    return Ranking(
        nearest_right=sum(ok for ok, _ in right) / len(right),
        one_threshold=sum(ok and s > negative_best for ok, s in right) / len(right),
    )


def evaluate(
    index: IntentIndex, items: Items, vectors: Vectors, rule: IntentMatchingConfig
) -> Outcome:
    return tally(index, items, prepare(index, items, vectors, rule.top_k), rule)


def tally(
    index: IntentIndex, items: Items, prepared: Sequence[Match | Scores], rule: IntentMatchingConfig
) -> Outcome:
    """Apply ``rule`` to prepared utterances and count the outcomes."""
    out = Outcome()
    for (text, truth), found in zip(items, prepared, strict=True):
        match = found if isinstance(found, Match) else index.judge(found, rule)
        got = match.intent or NONE
        want = truth or NONE
        out.confusion[(want, got)] = out.confusion.get((want, got), 0) + 1
        asked = match.route == "confirm"
        if truth is None:
            out.negatives += 1
            out.negatives_asked += asked
            if match.intent is not None:
                out.false_accepts += 1
                out.false_accept_texts.append((text, got, match.score))
        else:
            out.positives += 1
            out.background_closer += match.reason == "background closer"
            if match.intent == truth:
                out.correct += 1
            elif asked and match.best == truth:
                out.confirmed += 1
            elif asked:
                out.confirmed_wrong += 1
                out.missed_texts.append((text, truth, f"asked about {match.best}", match.score))
            elif match.intent is None:
                out.missed += 1
                out.missed_texts.append((text, truth, match.reason, match.score))
            else:
                out.wrong += 1
                out.wrong_texts.append((text, truth, got, match.score))
    return out
