"""An intent cache with a profile's intents published, as the node makes one at start."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bot.intents.cache import IntentCache
from bot.intents.store import MemoryStore
from bot.profile import BotProfile
from serve import Embedder
from tests.bot.fakes import ToneTTS


@asynccontextmanager
async def published(profile: BotProfile, embedder: Embedder) -> AsyncIterator[IntentCache]:
    """``profile``'s intents in an in-memory cache (answers in tone audio), stopped after."""
    tts = ToneTTS()
    await tts.load()
    cache = IntentCache(MemoryStore(), embedder, tts, voice="tone")
    await cache.publish(profile.intents, profile.intent_matching)
    try:
        yield cache
    finally:
        await cache.stop()
