"""The default profile starts without warnings: its intents, fitted at load by the intent
cache with the real MiniLM embedder and the shipped background lines, give the operator
nothing to fix (the warnings `switchboard run` logs and the console's intents page shows)."""

from __future__ import annotations

import logging

import pytest

from bot.intents.cache import IntentCache
from bot.intents.store import MemoryStore
from bot.profile import DEFAULT_PROFILE, load_profile
from tests.bot.fakes import ToneTTS


async def test_the_default_profile_loads_without_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from serve.embed_minilm import MiniLMEmbedder  # noqa: PLC0415 - loads torch

    embedder, tts = MiniLMEmbedder(timeout_s=30.0), ToneTTS()
    await embedder.load()
    await tts.load()
    profile = load_profile(DEFAULT_PROFILE)
    cache = IntentCache(MemoryStore(), embedder, tts, voice="tone")
    with caplog.at_level(logging.WARNING, logger="bot.intents"):
        await cache.publish(profile.intents, profile.intent_matching)
    fitted = cache.fitted
    assert fitted is not None and len(fitted.background_texts) > 150
    assert [w.message for w in fitted.warnings] == []
    # The intent cache's own warnings (asyncio's about other tests' tasks collected meanwhile
    # are not the profile's).
    logged = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("bot.intents")
    ]
    assert logged == []
