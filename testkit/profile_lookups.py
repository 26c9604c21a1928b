"""A profile's intent cache and knowledge base in one process, built as a node builds them,
with answers that make no audio: what the offline benchmarks decide turns on."""

from __future__ import annotations

from bot.intents.cache import IntentCache
from bot.intents.store import MemoryStore
from bot.knowledge.index import KnowledgeIndex
from bot.profile import BotProfile
from serve import Embedder
from testkit.answer_eval.rig import SilentTTS


async def silent_cache(profile: BotProfile, embedder: Embedder) -> IntentCache:
    """The profile's intents published to an in-memory cache whose answers are silence."""
    tts = SilentTTS()
    await tts.load()
    cache = IntentCache(MemoryStore(), embedder, tts, voice="silent")
    await cache.publish(profile.intents, profile.intent_matching)
    return cache


async def profile_lookups(
    profile: BotProfile, embedder: Embedder
) -> tuple[IntentCache, KnowledgeIndex | None]:
    """The intent cache (``silent_cache``) and the knowledge base (None: the profile has
    none) of ``profile``; the caller stops the cache."""
    cache = await silent_cache(profile, embedder)
    knowledge = (
        await KnowledgeIndex.build(profile.knowledge, embedder, profile.knowledge_matching)
        if profile.knowledge
        else None
    )
    return cache, knowledge
