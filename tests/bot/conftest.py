"""What several bot test modules share: the real MiniLM embedder, loaded once."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from serve.embed_minilm import MiniLMEmbedder


@pytest.fixture(scope="session")
async def minilm() -> MiniLMEmbedder:
    """The packaged MiniLM, loaded (with a load-time limit for a busy machine)."""
    from serve.embed_minilm import MiniLMEmbedder  # noqa: PLC0415 - loads torch

    embedder = MiniLMEmbedder(timeout_s=30.0)
    await embedder.load()
    return embedder
