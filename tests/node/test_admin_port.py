"""The node's side of the admin API (``node.admin_port.AdminPort``) on its real models:
SmolLM2-135M writes the suggested examples, MiniLM embeds, the intent cache checks them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from admin.metrics import NodeMetrics
from admin.node_port import NodeUnavailable
from bot.intents.cache import IntentCache
from bot.intents.store import MemoryStore
from bot.profile import DEFAULT_PROFILE, load_profile
from node.admin_port import AdminPort
from serve.registry import ModelSpec, llm_backends
from tests.bot.fakes import ToneTTS


@pytest.fixture(scope="module")
async def node() -> AsyncIterator[Any]:
    """The parts of a started node that the port reads (a ``Node`` holds them the same)."""
    from serve.embed_minilm import MiniLMEmbedder  # noqa: PLC0415 - loads torch

    embedder, tts = MiniLMEmbedder(timeout_s=30.0), ToneTTS()
    llm = llm_backends.create("llama-cpp", ModelSpec())
    for model in (embedder, tts, llm):
        await model.load()
    profile = load_profile(DEFAULT_PROFILE)
    cache = IntentCache(MemoryStore(), embedder, tts, voice="tone")
    await cache.publish(profile.intents, profile.intent_matching)
    yield SimpleNamespace(
        models=SimpleNamespace(llm=llm, embedder=embedder),
        intent_cache=cache,
        knowledge=None,
        profile=profile,
        call_log=None,
        metrics=NodeMetrics(),
    )
    await cache.stop()


async def test_the_models_suggestions_are_the_intents_by_the_matcher(node: Any) -> None:
    port = AdminPort(node, None)
    found = await port.suggest_examples("delivery_cost")
    assert found.intent == "delivery_cost"
    examples = {e.lower() for i in node.profile.intents for e in i.examples}
    for s in found.offered:
        looked = (await node.intent_cache.lookup(s.text)).match
        assert (looked.intent or looked.best) == "delivery_cost"
        assert s.answered == (looked.intent == "delivery_cost")
        assert s.text.lower() not in examples
    # The model wrote something; each line was either offered or counted as left out.
    assert found.offered or found.dropped


async def test_one_suggestion_at_a_time(node: Any) -> None:
    port = AdminPort(node, None)
    first = asyncio.create_task(port.suggest_examples("delivery_cost"))
    await asyncio.sleep(0)
    with pytest.raises(NodeUnavailable, match="already"):
        await port.suggest_examples("order_status")
    await first


async def test_what_the_node_cannot_do_is_said(node: Any) -> None:
    port = AdminPort(node, None)
    with pytest.raises(NodeUnavailable, match="does not run intent 'parking'"):
        await port.suggest_examples("parking")
    bare = SimpleNamespace(**{**vars(node), "intent_cache": None})
    with pytest.raises(NodeUnavailable, match="runs no intents"):
        await AdminPort(bare, None).suggest_examples("delivery_cost")
    no_embedder = SimpleNamespace(
        **{**vars(node), "models": SimpleNamespace(llm=None, embedder=None)}
    )
    assert await AdminPort(no_embedder, None).embed(["hello"]) is None


async def test_the_embedder_gives_unit_vectors_in_batches(node: Any) -> None:
    texts = [f"question number {n}" for n in range(40)]
    vectors = np.array(await AdminPort(node, None).embed(texts))
    assert vectors.shape[0] == 40
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


async def test_missed_questions_of_one_meaning_are_above_the_threshold(node: Any) -> None:
    from admin.api.missed import SAME_MEANING  # noqa: PLC0415

    texts = ["do you sell gift cards", "can I buy a gift card", "do you sell bikes"]
    gift, other_gift, bikes = np.array(await AdminPort(node, None).embed(texts))
    assert float(gift @ other_gift) >= SAME_MEANING
    assert float(gift @ bikes) < SAME_MEANING
