"""The profile's intents as the intent cache holds them, its thresholds, and its decision on
an utterance: what the evaluation measures, built the way the cache builds it.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.intents.match import IntentIndex, IntentVectors, Match, Thresholds, Vectors, query_text
from bot.profile import BotProfile, IntentMatchingConfig
from serve import Embedder


def rule_of(m: IntentMatchingConfig) -> Thresholds:
    """The profile's matching settings as the matcher's rule."""
    return Thresholds(
        threshold=m.threshold,
        margin=m.margin,
        negative_margin=m.negative_margin,
        top_k=m.top_k,
        calibration=m.calibration,
        action_threshold=m.action_threshold,
    )


async def build_index(profile: BotProfile, embedder: Embedder) -> IntentIndex:
    """The profile's intents as the cache would hold them (no audio)."""
    intents = []
    for intent in profile.intents:
        # As the cache builds its entries: the examples as written.
        vectors = await embedder.embed([*intent.examples, *intent.negatives])
        n = len(intent.examples)
        intents.append(
            IntentVectors(
                name=intent.name,
                examples=tuple(intent.examples),
                negatives=tuple(intent.negatives),
                example_vectors=vectors[:n],
                negative_vectors=vectors[n:],
                action=intent.action,
            )
        )
    return IntentIndex(intents)


async def embed_queries(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """The caller's words as the cache embeds them (``query_text``)."""
    return await embedder.embed([query_text(t) for t in texts])


def decide(index: IntentIndex, text: str, vector: Vectors, rule: Thresholds) -> Match:
    """The cache's decision: exact match, else semantic."""
    return index.exact(text) or index.semantic(vector, rule)
