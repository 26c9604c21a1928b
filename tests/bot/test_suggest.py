"""Suggested examples: the model's lines, read as requests, offered only when the matcher
gives them to the intent uncontested (bot/intents/suggest.py).

The language model is scripted (the boundary: its lines are what a small model wrote for
these intents, kept as written); the check runs the default profile's intents through the
real MiniLM embedder.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from bot.intents.cache import IntentCache
from bot.intents.suggest import lines_of, suggest_examples
from bot.profile import DEFAULT_PROFILE, load_profile
from tests.bot.fakes import ScriptedLLM
from tests.bot.published import published

if TYPE_CHECKING:
    from serve.embed_minilm import MiniLMEmbedder

pytestmark = pytest.mark.models

#: What SmolLM2-135M wrote for delivery_cost, with what it wrote around it.
WRITTEN = """Here are 6 more ways a caller could ask:
1. **What is the shipping fee?**
2. How much does it cost to ship?
3. What is the shipping fee?
- Where is my order?
- You have to pay shipping for shipping.
- Cost?
- How much does shipping cost?
- Can I talk to a real person please?
"""


def test_the_models_lines_are_read_as_requests() -> None:
    assert lines_of(WRITTEN) == [
        "What is the shipping fee?",
        "How much does it cost to ship?",
        "Where is my order?",
        "Cost?",
        "How much does shipping cost?",
        "Can I talk to a real person please?",
    ]


@pytest.fixture(scope="module")
async def cache(minilm: MiniLMEmbedder) -> AsyncIterator[IntentCache]:
    async with published(load_profile(DEFAULT_PROFILE), minilm) as built:
        yield built


async def test_only_lines_the_matcher_gives_to_the_intent_are_offered(
    cache: IntentCache,
) -> None:
    profile = load_profile(DEFAULT_PROFILE)
    intent = next(i for i in profile.intents if i.name == "delivery_cost")
    llm = ScriptedLLM([WRITTEN])
    await llm.load()
    found = await suggest_examples(intent, llm, cache, count=6)
    texts = [s.text for s in found.offered]
    assert "What is the shipping fee?" in texts and "How much does it cost to ship?" in texts
    # Another intent's request, a line of one word and one of the intent's own examples
    # are not offered; the model was shown the intent's examples and answer.
    assert "Where is my order?" not in texts and "Can I talk to a real person please?" not in texts
    assert "Cost?" not in texts
    assert "How much does shipping cost?" not in texts
    assert found.dropped["another intent"] >= 2
    assert found.dropped["not a request"] == 1
    assert found.dropped["already an example"] == 1
    shown = llm.prompts[0][-1].content
    assert intent.answer in shown and intent.examples[0] in shown
    # Each offered line is the intent's by the matcher, with the score it would get today.
    for s in found.offered:
        looked = (await cache.lookup(s.text)).match
        assert (looked.intent or looked.best) == "delivery_cost"
        assert s.answered == (looked.intent == "delivery_cost")
