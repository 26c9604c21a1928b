"""Fitting the matching rule to one profile at load: which background lines hold for it,
how high its threshold must be, and what the operator should be warned about.

A profile written by a new operator (a few examples an intent, no negatives) cannot use
thresholds tuned on another profile's examples: its intents may draw in common requests
it does not cover. At load, every background line (``background.py``) is tried against the
profile's intents as if a caller had said it, each line held to the lines other than
itself (leave-one-out): a line the rule would answer from the cache raises the threshold of
the intent that would answer it just above that line's score. Only that intent's: a vets'
practice whose opening-hours intent would answer "Is the bank open today?" (0.57) had every
intent's threshold raised from 0.45 to 0.59: 4 of its 40 development paraphrases were
answered directly, against 11 with that intent's threshold alone raised.

A background line one of the profile's intents covers is in scope for this profile and left
out (``covered``): it would otherwise hold back that intent's own callers ("My account has
been locked." for a business whose intent is a locked account). Whether an intent covers a
line is measured on the intent's own examples, not set by a fixed similarity: thin intents
of varied examples sit far from any one line, tight ones near.

Warnings, logged at load (and meant for the console): an intent with fewer than
``min_examples`` examples, and an example whose nearest intent, without itself, is
another intent (leave-one-out over the examples): the two intents are too close for the
embedder to keep apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from bot.intents.match import IntentIndex, IntentMatchingConfig, IntentVectors, Vectors

#: How far above the best-scoring background line the raised threshold is set.
STEP = 0.02
#: Fewer examples than this: the intent is reported as thin.
MIN_EXAMPLES = 5


@dataclass(frozen=True)
class IntentWarning:
    """Something the operator should fix in one intent."""

    intent: str
    kind: Literal["thin", "close", "raised"]
    message: str


@dataclass(frozen=True)
class Fitted:
    """The rule and background one profile is matched with."""

    rule: IntentMatchingConfig
    #: The background lines kept for this profile (unit rows) and their texts.
    background: Vectors
    background_texts: tuple[str, ...]
    #: Background lines left out as in scope for this profile.
    left_out: tuple[str, ...]
    warnings: tuple[IntentWarning, ...]
    #: Intents whose threshold was raised above ``rule.threshold`` (a common request they
    #: would answer), and the threshold each is held to.
    thresholds: Mapping[str, float] = field(default_factory=dict)


def fit(
    intents: list[IntentVectors],
    lines: Sequence[str],
    vectors: Vectors,
    rule: IntentMatchingConfig,
    *,
    min_examples: int = MIN_EXAMPLES,
    raise_threshold: bool = True,
) -> Fitted:
    """Fit ``rule`` to ``intents`` with the background ``lines`` (their unit ``vectors``)."""
    warnings: list[IntentWarning] = []
    if not intents:
        empty = np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else 0), np.float32)
        return Fitted(rule, empty, (), (), ())
    examples = np.concatenate([i.example_vectors for i in intents]).astype(np.float32)
    vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, examples.shape[1])
    kept = ~covered(intents, vectors, rule.top_k)
    background = vectors[kept]
    texts = tuple(t for t, k in zip(lines, kept, strict=True) if k)
    left_out = tuple(t for t, k in zip(lines, kept, strict=True) if not k)

    index = IntentIndex(intents, background)
    raised = _raised_thresholds(index, rule) if raise_threshold else {}
    thresholds = {name: threshold for name, (_, _, threshold) in raised.items()}
    for name, (line, score, threshold) in raised.items():
        warnings.append(
            IntentWarning(
                name,
                "raised",
                f"intent {name!r} would answer the common request {texts[line]!r} "
                f"(score {score:.2f}): its threshold is raised to {threshold:.2f}; "
                "more examples, or negatives, let it match more callers",
            )
        )
    for intent in intents:
        n = len(intent.examples)
        if n < min_examples:
            warnings.append(
                IntentWarning(
                    intent.name,
                    "thin",
                    f"intent {intent.name!r} has {n} example{'s' if n != 1 else ''}: "
                    f"{min_examples} or more, worded differently, let it match more callers",
                )
            )
    warnings += _close_examples(intents, rule.top_k)
    return Fitted(rule, background, texts, left_out, tuple(warnings), thresholds)


def covered(intents: list[IntentVectors], lines: Vectors, top_k: int) -> npt.NDArray[np.bool_]:
    """Per background line (unit rows ``lines``): whether one of ``intents`` covers it.

    An intent covers a line when both hold:

    - the line scores to the intent (the mean similarity of its ``top_k`` nearest examples,
      as the rule scores a caller) at least as well as the intent's own examples do, each
      held out and scored against the others (their median): to the rule, the line is one
      more of the intent's callers. An intent of one example has no such score; it is held
      to the median of the profile's other examples;
    - the line is at least as near to one of the intent's examples as to any other
      background line: the operator, not the product, wrote its nearest neighbour (a line
      among other lines of its kind, small talk or off-topic requests, stays).
    """
    n = len(lines)
    out = np.zeros(n, dtype=np.bool_)
    if not n or not intents:
        return out
    between = lines @ lines.T
    np.fill_diagonal(between, -np.inf)
    nearest_line = between.max(axis=1) if n > 1 else np.full(1, -1.0)
    held_out = [_held_out_scores(i.example_vectors, top_k) for i in intents]
    pooled = np.concatenate(held_out)
    fallback = float(np.median(pooled)) if len(pooled) else None
    for intent, own in zip(intents, held_out, strict=True):
        reference = float(np.median(own)) if len(own) else fallback
        examples = intent.example_vectors
        if reference is None or not len(examples):
            continue
        sims = lines @ examples.T
        k = min(top_k, len(examples))
        score = np.sort(sims, axis=1)[:, -k:].mean(axis=1)
        out |= (score >= reference) & (sims.max(axis=1) >= nearest_line)
    return out


def _held_out_scores(examples: Vectors, top_k: int) -> npt.NDArray[np.float32]:
    """Each example's score to its intent without itself: the mean similarity of its
    ``top_k`` nearest other examples (none with fewer than two examples)."""
    n = len(examples)
    if n < 2:
        return np.zeros(0, np.float32)
    sims = examples @ examples.T
    np.fill_diagonal(sims, -np.inf)
    k = min(top_k, n - 1)
    scores: npt.NDArray[np.float32] = np.sort(sims, axis=1)[:, -k:].mean(axis=1)
    return scores


def _raised_thresholds(
    index: IntentIndex, rule: IntentMatchingConfig
) -> dict[str, tuple[int, float, float]]:
    """Per intent that would answer a background line (each line held to the other
    lines): the line that scores highest for it, that score, and the threshold just above
    it that the intent is held to."""
    background = index.background
    if not len(background) or not index.intents:
        return {}
    others = background @ background.T
    np.fill_diagonal(others, -1.0)
    nearest_other = others.max(axis=1) if len(background) > 1 else np.full(1, -1.0)
    worst: dict[str, tuple[int, float]] = {}
    for row, vector in enumerate(background):
        scores = index.scores(vector, rule.top_k)
        alone = replace(scores, background=float(nearest_other[row]))
        match = index.judge(alone, rule)
        name = match.best or ""
        if match.route == "semantic" and (name not in worst or match.score > worst[name][1]):
            worst[name] = (row, match.score)
    return {name: (row, score, min(1.0, score + STEP)) for name, (row, score) in worst.items()}


def _close_examples(intents: list[IntentVectors], top_k: int) -> list[IntentWarning]:
    """Examples whose nearest intent, leaving the example itself out, is another one."""
    warnings = []
    vectors = np.concatenate([i.example_vectors for i in intents]).astype(np.float32)
    owner = np.concatenate([np.full(len(i.example_vectors), k) for k, i in enumerate(intents)])
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    texts = [t for i in intents for t in i.examples]
    for row in range(len(vectors)):
        per_intent = np.full(len(intents), -np.inf)
        for k in range(len(intents)):
            own = sims[row, owner == k]
            own = own[np.isfinite(own)]
            if len(own):
                per_intent[k] = np.sort(own)[-min(top_k, len(own)) :].mean()
        nearest = int(np.argmax(per_intent))
        mine = int(owner[row])
        if nearest != mine and np.isfinite(per_intent[nearest]):
            warnings.append(
                IntentWarning(
                    intents[mine].name,
                    "close",
                    f"example {texts[row]!r} of {intents[mine].name!r} is nearer to the "
                    f"examples of {intents[nearest].name!r}: callers who say it may get "
                    "the other answer or a question; reword it or add examples",
                )
            )
    return warnings
