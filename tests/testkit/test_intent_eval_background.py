"""The intent evaluation counts the paraphrases a background line held back ("background
closer"), whether they were sent on or asked about: what the lines cost a profile."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from bot.intents.match import IntentIndex, IntentMatchingConfig, IntentVectors
from testkit.intent_eval.outcomes import evaluate


def unit(*weights: float) -> npt.NDArray[np.float32]:
    v = np.array(weights + (0.0,) * (4 - len(weights)), np.float32)
    return v / np.linalg.norm(v)


def test_paraphrases_held_back_by_a_background_line_are_counted() -> None:
    order = IntentVectors(
        "order", ("where is my order",), (), np.stack([unit(1.0)]), np.zeros((0, 4), np.float32)
    )
    index = IntentIndex([order], np.stack([unit(1.0, 1.0)]))  # a line near the intent
    rule = IntentMatchingConfig(
        top_k=1, threshold=0.5, margin=0.0, background_margin=0.1, confirm_threshold=0.35
    )
    items: list[tuple[str, str | None]] = [
        ("nearer the line", "order"),  # 0.61 to the intent, 0.99 to the line: sent on
        ("a little nearer the intent", "order"),  # leads the line by 0.08: asked
        ("clear of the line", "order"),  # answered
        ("the line itself", None),  # not a paraphrase: not counted
    ]
    vectors = np.stack([unit(1.0, 1.3), unit(1.0, 0.3), unit(1.0, 0.0, 0.5), unit(1.0, 1.0)])
    out = evaluate(index, items, vectors, rule)
    assert (out.correct, out.confirmed, out.missed) == (1, 1, 1)
    assert out.background_closer == 2
