"""Deciding which intent, if any, a caller's words mean: exact match, then semantic match.

Pure functions over vectors already computed: no model, no storage. The rule (see
docs/intent-cache.md): an exact match of the normalized text with one intent's example wins;
otherwise the intent whose ``top_k`` nearest examples are on average most similar (its
score) wins only if that score is at least ``threshold``, leads the best other intent by
``margin``, and none of that intent's negative examples comes within ``negative_margin``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "`": "'"})
_NOT_WORD = re.compile(r"[^a-z0-9' ]+")
_SPACES = re.compile(r"\s+")

Vectors = npt.NDArray[np.float32]


def normalize(text: str) -> str:
    """Lower case, punctuation dropped, spaces collapsed: ``"Where's my order?"`` ->
    ``"where's my order"``."""
    lowered = text.lower().translate(_APOSTROPHES)
    return _SPACES.sub(" ", _NOT_WORD.sub(" ", lowered)).strip(" '")


@dataclass(frozen=True)
class IntentVectors:
    """One intent's example and negative-example embeddings (unit rows)."""

    name: str
    examples: tuple[str, ...]
    negatives: tuple[str, ...]
    example_vectors: Vectors
    negative_vectors: Vectors


@dataclass(frozen=True)
class Thresholds:
    """The semantic-match rule's parameters."""

    threshold: float
    margin: float
    negative_margin: float
    #: An intent's score is the mean similarity of its ``top_k`` nearest examples.
    top_k: int = 2


@dataclass(frozen=True)
class Match:
    """The outcome of one lookup; ``intent`` is None when the cache must not answer."""

    route: Literal["exact", "semantic", "none"]
    intent: str | None
    score: float
    #: The best intent and its score even when refused (for evaluation and logs).
    best: str | None = None
    runner_up_score: float = 0.0
    negative_score: float = -1.0
    reason: str = ""


class IntentIndex:
    """The matching side of the cache: normalized examples and stacked example vectors."""

    def __init__(self, intents: list[IntentVectors]) -> None:
        self.intents = intents
        self._exact: dict[str, str] = {}
        self._exact_negative: set[str] = set()
        for intent in intents:
            for example in intent.examples:
                self._exact.setdefault(normalize(example), intent.name)
            self._exact_negative.update(normalize(n) for n in intent.negatives)
        dim = intents[0].example_vectors.shape[1] if intents else 0
        self._vectors = (
            np.concatenate([i.example_vectors for i in intents]).astype(np.float32)
            if intents
            else np.zeros((0, dim), np.float32)
        )
        owners = [np.full(len(i.example_vectors), k) for k, i in enumerate(intents)]
        self._owner = np.concatenate(owners).astype(np.int64) if owners else np.zeros(0, np.int64)
        negatives = [i.negative_vectors for i in intents if len(i.negative_vectors)]
        self._negatives = (
            np.concatenate(negatives).astype(np.float32)
            if negatives
            else np.zeros((0, dim), np.float32)
        )
        neg_owners = [np.full(len(i.negative_vectors), k) for k, i in enumerate(intents)]
        self._negative_owner = (
            np.concatenate(neg_owners).astype(np.int64) if neg_owners else np.zeros(0, np.int64)
        )

    def __len__(self) -> int:
        return len(self.intents)

    def exact(self, text: str) -> Match | None:
        """The exact-match decision, or None when the text needs the semantic step."""
        key = normalize(text)
        name = self._exact.get(key)
        if name is not None:
            return Match(route="exact", intent=name, score=1.0, best=name)
        if key in self._exact_negative:
            return Match(route="none", intent=None, score=0.0, reason="exact negative")
        return None

    def semantic(self, vector: Vectors, rule: Thresholds) -> Match:
        """Match one unit query vector (shape (dim,) or (1, dim)) against the examples."""
        if not self.intents:
            return Match(route="none", intent=None, score=0.0, reason="no intents")
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        sims = self._vectors @ q
        per_intent = np.full(len(self.intents), -1.0, dtype=np.float32)
        for k in range(len(self.intents)):
            own = sims[self._owner == k]
            if len(own):
                per_intent[k] = np.sort(own)[-rule.top_k :].mean()
        order = np.argsort(per_intent)[::-1]
        best = int(order[0])
        score = float(per_intent[best])
        runner_up = float(per_intent[order[1]]) if len(order) > 1 else -1.0
        own = self._negatives[self._negative_owner == best]
        negative = float((own @ q).max()) if len(own) else -1.0
        name = self.intents[best].name
        if score < rule.threshold:
            reason = "below threshold"
        elif score - runner_up < rule.margin:
            reason = "margin too small"
        elif negative >= score - rule.negative_margin:
            reason = "negative example closer"
        else:
            reason = ""
        return Match(
            route="none" if reason else "semantic",
            intent=None if reason else name,
            score=score,
            best=name,
            runner_up_score=runner_up,
            negative_score=negative,
            reason=reason,
        )
