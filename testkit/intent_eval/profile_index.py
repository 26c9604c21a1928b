"""The profile's intents as the intent cache holds them, its thresholds as fitted at load,
and its decision on an utterance: what the evaluation measures, built the way the cache
builds it.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.intents.background import background_lines
from bot.intents.fit import Fitted, fit
from bot.intents.match import (
    IntentIndex,
    IntentMatchingConfig,
    IntentVectors,
    Match,
    Vectors,
    query_text,
)
from bot.intents.stock import embed_requests, with_stock_phrasings
from bot.profile import BotProfile
from serve import Embedder


async def build_index(profile: BotProfile, embedder: Embedder) -> tuple[IntentIndex, Fitted]:
    """The profile's intents as the cache would hold them (no audio), with the rule and the
    background lines fitted to them as the cache fits them at load."""
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
    rule = profile.intent_matching
    if rule.stock_phrasings:
        intents, _ = with_stock_phrasings(intents, await embed_requests(embedder.embed))
    if not profile.intent_matching.background:
        return IntentIndex(intents), Fitted(rule, vectors[:0], (), (), ())
    lines = background_lines()
    fitted = fit(
        intents,
        lines,
        await embedder.embed(list(lines)),
        rule,
        raise_threshold=profile.intent_matching.fit_threshold,
    )
    return IntentIndex(intents, fitted.background, fitted.thresholds), fitted


async def embed_queries(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """The caller's words as the cache embeds them (``query_text``)."""
    return await embedder.embed([query_text(t) for t in texts])


def decide(index: IntentIndex, text: str, vector: Vectors, rule: IntentMatchingConfig) -> Match:
    """The cache's decision: exact match, else semantic."""
    return index.exact(text) or index.semantic(vector, rule)
