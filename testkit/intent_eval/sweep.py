"""The threshold sweep: every setting of the matcher's rule on a grid, counted on the tuning
split at once, and the setting the evaluation chooses (``choose``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from bot.intents.match import IntentIndex, IntentMatchingConfig, Match, Vectors
from testkit.intent_eval.eval_sets import Items
from testkit.intent_eval.outcomes import prepare

TOP_KS = (2, 3, 4, 5, 6)
CALIBRATIONS = (0.0, 0.25, 0.5, 0.75, 1.0)
THRESHOLDS = tuple(round(0.30 + 0.0125 * n, 4) for n in range(33))  # 0.30 .. 0.70
MARGINS = (0.0, 0.025, 0.05, 0.075, 0.10, 0.125, 0.15)
NEGATIVE_MARGINS = (0.0, 0.025, 0.05, 0.075, 0.10, 0.125)
#: 0: an intent that hangs up needs no more than the others.
ACTION_THRESHOLDS = (0.0, 0.5, 0.55, 0.6, 0.65, 0.7)


@dataclass(frozen=True)
class SweepCell:
    """One setting and its counts on each input."""

    rule: IntentMatchingConfig
    correct: tuple[int, ...]
    false_accepts: tuple[int, ...]
    positives: tuple[int, ...]

    @property
    def total_correct(self) -> int:
        return sum(self.correct)

    @property
    def total_false_accepts(self) -> int:
        return sum(self.false_accepts)

    def accuracy(self, n: int) -> float:
        return self.correct[n] / self.positives[n] if self.positives[n] else 0.0


#: No limits at all: every utterance gets its best intent (``sweep`` then applies the limits).
#: Outside the bounds an operator may set, so built without validation.
_OPEN = IntentMatchingConfig.model_construct(
    threshold=-np.inf,
    margin=-np.inf,
    negative_margin=-np.inf,
    action_threshold=-np.inf,
    background_margin=0.0,
    confirm_threshold=0.0,
)


def sweep(
    index: IntentIndex,
    inputs: Sequence[tuple[Items, Vectors]],
    *,
    top_ks: Iterable[int] = TOP_KS,
    calibrations: Iterable[float] = CALIBRATIONS,
) -> list[SweepCell]:
    """Every cell of the grid on each (items, vectors) input (the tuning split: clean text
    and, with ``--asr``, the transcripts). Per top_k and calibration each utterance is judged
    once with no limits; the limits are then the same comparisons as ``IntentIndex.judge``,
    over the whole grid at once."""
    names = {intent.name: n for n, intent in enumerate(index.intents)}
    acting = {intent.name for intent in index.intents if intent.action is not None}
    cells: list[SweepCell] = []
    thresholds = np.asarray(THRESHOLDS)[:, None, None, None, None]
    margins = np.asarray(MARGINS)[None, :, None, None, None]
    negative_margins = np.asarray(NEGATIVE_MARGINS)[None, None, :, None, None]
    action_thresholds = np.asarray(ACTION_THRESHOLDS)[None, None, None, :, None]
    for k in top_ks:
        prepared = [(items, prepare(index, items, vectors, k)) for items, vectors in inputs]
        for w in calibrations:
            rule = _OPEN.model_copy(update={"top_k": k, "calibration": w})
            correct, false_accepts, positives = [], [], []
            for items, found in prepared:
                matches = [f if isinstance(f, Match) else index.judge(f, rule) for f in found]
                # An exact decision (or "no words") holds whatever the thresholds.
                exact = np.array([m.route != "semantic" for m in matches])
                exact_hit = np.array([m.route == "exact" for m in matches])
                score = np.array([m.score for m in matches])
                lead = score - np.array([m.runner_up_score for m in matches])
                gap = np.array([m.similarity - m.negative_score for m in matches])
                acts = np.array([m.best in acting for m in matches])
                needed = np.where(acts, np.maximum(thresholds, action_thresholds), thresholds)
                accepted = (score >= needed) & (lead >= margins) & (gap > negative_margins)
                accepted = np.where(exact, exact_hit, accepted)
                got = np.array([names.get(m.best or "", -1) for m in matches])
                truth = np.array([names.get(t, -2) if t else -1 for _, t in items])
                is_pos = truth >= 0
                correct.append((accepted & (got == truth) & is_pos).sum(axis=-1))
                false_accepts.append((accepted & ~is_pos).sum(axis=-1))
                positives.append(int(is_pos.sum()))
            grid = itertools.product(
                enumerate(THRESHOLDS),
                enumerate(MARGINS),
                enumerate(NEGATIVE_MARGINS),
                enumerate(ACTION_THRESHOLDS),
            )
            for (i, t), (j, mg), (n, nm), (a, at) in grid:
                if at and at <= t:
                    continue  # the same cell as action_threshold 0
                cells.append(
                    SweepCell(
                        rule=IntentMatchingConfig(
                            threshold=t,
                            margin=mg,
                            negative_margin=nm,
                            top_k=k,
                            calibration=w,
                            action_threshold=at,
                            # The sweep applies none of the background or question rules.
                            background_margin=0.0,
                            confirm_threshold=0.0,
                        ),
                        correct=tuple(int(c[i, j, n, a]) for c in correct),
                        false_accepts=tuple(int(f[i, j, n, a]) for f in false_accepts),
                        positives=tuple(positives),
                    )
                )
    return cells


def strictness(cell: SweepCell) -> tuple[float, float, float, float, float, int]:
    r = cell.rule
    return (r.threshold, r.action_threshold, r.margin, r.negative_margin, -r.calibration, -r.top_k)


def choose(cells: Sequence[SweepCell]) -> SweepCell | None:
    """The objective: no false accept on any input, then the most correct answers over all
    inputs; among equals the strictest cell (highest threshold, then action threshold,
    margin, negative margin; then the least calibration and the smallest top_k), the one
    least likely to accept an unseen near-miss."""
    safe = [c for c in cells if c.total_false_accepts == 0]
    if not safe:
        return None
    return max(safe, key=lambda c: (c.total_correct, *strictness(c)))
