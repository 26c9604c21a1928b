"""A reply is decided on the words it answers: what the next turn's follow-up joins to.

Found on the follow-up set (g23): "How long until my refund comes through?" answered, then
"Is that working days or calendar days?" asked about another intent, and the caller's "no"
sent those words on joined to themselves ("not sure"); before one decision a turn, they were
joined to the refund question. The default profile, through the real MiniLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from bot.intents.cache import IntentCache
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.deciding.decider import Decider
from bot.pipeline.deciding.decision import Decision
from bot.profile import DEFAULT_PROFILE, load_profile
from tests.bot.deciding import decided, decider_for
from tests.bot.published import published

if TYPE_CHECKING:
    from serve.embed_minilm import MiniLMEmbedder

pytestmark = pytest.mark.models

PROFILE = load_profile(DEFAULT_PROFILE)


@pytest.fixture(scope="module")
async def cache(minilm: MiniLMEmbedder) -> AsyncIterator[IntentCache]:
    async with published(PROFILE, minilm) as built:
        yield built


@pytest.fixture(scope="module")
async def knowledge(minilm: MiniLMEmbedder) -> KnowledgeIndex:
    return await KnowledgeIndex.build(PROFILE.knowledge, minilm, PROFILE.knowledge_matching)


async def said(decider: Decider, words: str) -> Decision:
    """Decide ``words`` and commit them, as the router does."""
    _, decision = await decided(decider, words)
    return decision


async def test_a_no_joins_the_words_asked_about_to_the_request_before(
    cache: IntentCache, knowledge: KnowledgeIndex
) -> None:
    decider = decider_for(cache, knowledge=knowledge)
    first = await said(decider, "How long until my refund comes through?")
    assert (first.kind, first.intent) == ("answer", "refund_time")
    follow = "Is that working days or calendar days?"
    asked = await said(decider, follow)
    assert asked.kind == "ask" and asked.intent != "refund_time"
    no = await said(decider, "No.")
    assert (no.kind, no.intent, no.words) == ("answer", "refund_time", follow)
    assert "working days" in (no.say or "")
    # The next follow-up joins to the words the "no" answered, not to "No.".
    assert decider.conversation.previous_words == follow


async def test_a_reply_to_a_choice_is_remembered_as_the_words_asked_about(
    cache: IntentCache, knowledge: KnowledgeIndex
) -> None:
    decider = decider_for(cache, knowledge=knowledge)
    words = "my delivery address"
    asked = await said(decider, words)
    assert asked.asks is not None and asked.asks.kind == "choice"
    neither = await said(decider, "Neither of those.")
    assert (neither.kind, neither.words) == ("unsure", words)
    assert decider.conversation.previous_words == words


async def test_neither_of_two_intents_gets_the_entry_written_for_the_words(
    cache: IntentCache, knowledge: KnowledgeIndex
) -> None:
    # Two intents near the words, neither meant: the knowledge base's entry answers them
    # as written (as a "no" to one intent's question would find it), never a second
    # question.
    decider = decider_for(cache, knowledge=knowledge)
    words = "How can I check my order actually went through?"
    asked = await said(decider, words)
    assert asked.asks is not None and asked.asks.kind == "choice"
    neither = await said(decider, "Neither.")
    assert (neither.kind, neither.route, neither.intent) == (
        "answer",
        "knowledge",
        "order_confirmation",
    )
    assert neither.asks is None and neither.why.startswith("neither of ")
