"""What several bot test modules share: the real MiniLM embedder, loaded once; the default
profile's intents published and its knowledge base built on it, once a module (a module
that needs another profile's defines its own ``cache``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from bot.intents.cache import IntentCache
from bot.knowledge.index import KnowledgeIndex
from bot.profile import DEFAULT_PROFILE, load_profile
from tests.bot.published import published

if TYPE_CHECKING:
    from serve.embed_minilm import MiniLMEmbedder


@pytest.fixture(scope="session")
async def minilm() -> MiniLMEmbedder:
    """The packaged MiniLM, loaded (with a load-time limit for a busy machine)."""
    from serve.embed_minilm import MiniLMEmbedder  # noqa: PLC0415 - loads torch

    embedder = MiniLMEmbedder(timeout_s=30.0)
    await embedder.load()
    return embedder


@pytest.fixture(scope="module")
async def cache(minilm: MiniLMEmbedder) -> AsyncIterator[IntentCache]:
    """The default profile's intents, published on the real MiniLM."""
    async with published(load_profile(DEFAULT_PROFILE), minilm) as built:
        yield built


@pytest.fixture(scope="module")
async def knowledge(minilm: MiniLMEmbedder) -> KnowledgeIndex:
    """The default profile's knowledge base, on the real MiniLM."""
    profile = load_profile(DEFAULT_PROFILE)
    return await KnowledgeIndex.build(profile.knowledge, minilm, profile.knowledge_matching)
