"""One call's lookups of the caller's words: each words looked up once.

The decision reads the intent cache and the knowledge base for the words heard, for the
second recognizer's words, for a follow-up joined to the words before; it runs in the
caller's pause and, when something changed, again at the end of the turn. Every lookup
goes through here, so the same words are embedded and matched once in a call: the pause's
lookups are the end of turn's. A failed lookup is not kept (the next asks again).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from bot.intents.match import normalize
from bot.pipeline.language.follow_up import joins_words_before

if TYPE_CHECKING:
    from bot.intents.cache import IntentCache, Lookup
    from bot.knowledge.index import KnowledgeIndex, Retrieved

T = TypeVar("T")

#: Words kept per kind of lookup: a call's last few turns, heard once or twice, alone and
#: joined to the words before.
KEPT = 64


class CallLookups:
    """The intent cache and knowledge base as one call's decision reads them."""

    def __init__(self, cache: IntentCache | None, knowledge: KnowledgeIndex | None) -> None:
        self.cache = cache
        self.knowledge = knowledge
        self._intents: OrderedDict[str, Lookup] = OrderedDict()
        self._entries: OrderedDict[str, list[Retrieved]] = OrderedDict()
        #: Lookups run (not answered from what was kept), by kind: what a turn cost.
        self.runs = {"intent": 0, "knowledge": 0}

    async def intent(self, words: str) -> Lookup:
        """The intent cache's decision for ``words`` (its errors are the caller's)."""
        assert self.cache is not None
        cache = self.cache
        if not cache.fresh:
            # The shared store is away: its copy may be out of date, and the lookup says so
            # (an error: the caller hears the model, not a cached answer kept here).
            self.runs["intent"] += 1
            return await cache.lookup(words)
        key = f"{cache.version}:{normalize(words)}"
        return await self._kept(self._intents, "intent", key, lambda: cache.lookup(words))

    async def entries(self, words: str) -> list[Retrieved]:
        """The knowledge base's entries for ``words``, best first (none without one)."""
        index = self.knowledge
        if index is None:
            return []
        key = normalize(words)
        return await self._kept(self._entries, "knowledge", key, lambda: index.retrieve(words))

    async def following(self, words: str, previous: str | None) -> tuple[list[Retrieved], str]:
        """The entries for ``words`` and the words they were retrieved for: alone or, when
        they retrieve nothing and read as a follow-up, joined to ``previous``
        (``bot.pipeline.language.follow_up.retrieve_following``)."""
        found = await self.entries(words)
        if found or not previous or not joins_words_before(words, previous):
            return found, words
        asked = f"{previous} {words}"
        return await self.entries(asked), asked

    async def _kept(
        self,
        kept: OrderedDict[str, T],
        kind: str,
        key: str,
        run: Callable[[], Awaitable[T]],
    ) -> T:
        if key in kept:
            kept.move_to_end(key)
            return kept[key]
        self.runs[kind] += 1
        value = await run()
        kept[key] = value
        if len(kept) > KEPT:
            kept.popitem(last=False)
        return value
