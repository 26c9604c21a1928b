"""What one intent-cache lookup costs, utterance by utterance as the cache does it."""

from __future__ import annotations

import time

from bot.intents.match import IntentIndex, IntentMatchingConfig, query_text
from serve import Embedder


async def lookup_cost_ms(
    index: IntentIndex, embedder: Embedder, texts: list[str], rule: IntentMatchingConfig
) -> tuple[list[float], list[float]]:
    """Per utterance, one at a time as the cache does it: normalize + embed + match, and
    the match alone (exact, then the semantic rule on the vector already embedded)."""
    costs, matching = [], []
    for text in texts:
        started = time.perf_counter()
        vector = None
        if index.exact(text) is None:
            vector = (await embedder.embed([query_text(text)]))[0]
            index.semantic(vector, rule)
        costs.append((time.perf_counter() - started) * 1000.0)
        if vector is not None:
            started = time.perf_counter()
            index.exact(text)
            index.semantic(vector, rule)
            matching.append((time.perf_counter() - started) * 1000.0)
    return costs, matching
