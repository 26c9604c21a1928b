"""Retrieving the knowledge entries that answer a caller's question.

Each entry's questions are embedded once; a caller's words are embedded (one ``embed`` call)
and each entry scores the cosine similarity of its nearest question. Entries at or above
``min_score`` are retrieved, best first, at most ``max_entries``. Only the questions are
embedded: a row for an entry's answer or topic changed no paraphrase's score and raised an
unrelated one. A keyword of an entry said by the caller (whole words, or with a plural "s")
lifts that entry to ``min_score``, never to ``direct_score``: a name the embedder knows
poorly still finds its entry, and the LLM still words the answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from bot.answers.grounding import common_stems, on_topic
from bot.intents.confirm import about_question
from bot.intents.match import normalize, query_text
from bot.intents.topic import topic_of_entry
from bot.profile import KnowledgeConfig, KnowledgeEntry
from serve.embed import Embedder
from serve.timing import StageTimings


@dataclass(frozen=True)
class Retrieved:
    """An entry retrieved for the caller's words, and how close they were to it."""

    entry: KnowledgeEntry
    #: Cosine similarity of the caller's words to the entry's nearest question.
    score: float


class KnowledgeIndex:
    """The entries' question vectors, and the rule that picks entries for a question."""

    def __init__(
        self,
        entries: list[KnowledgeEntry],
        vectors: npt.NDArray[np.float32],
        owners: npt.NDArray[np.intp],
        embedder: Embedder,
        config: KnowledgeConfig,
    ) -> None:
        """Prefer ``build``; ``vectors`` are unit rows, ``owners`` the entry of each row."""
        self.entries = entries
        self.config = config
        self._vectors = vectors
        self._owners = owners
        self._embedder = embedder
        #: Each entry's own words, and the words common to many entries, for ``on_topic``.
        self._texts = [
            [e.topic.replace("_", " "), *e.questions, e.answer, *e.keywords] for e in entries
        ]
        self._common = common_stems(self._texts)
        self._keywords = [
            [re.compile(rf"(?<!\S){re.escape(normalize(k))}(?:'?s)?(?!\S)") for k in e.keywords]
            for e in entries
        ]

    @classmethod
    async def build(
        cls,
        entries: list[KnowledgeEntry],
        embedder: Embedder,
        config: KnowledgeConfig | None = None,
    ) -> KnowledgeIndex:
        """Embed every entry's questions (one ``embed`` call)."""
        rows = [(k, query_text(q)) for k, e in enumerate(entries) for q in e.questions]
        texts = [text for _, text in rows]
        vectors = await embedder.embed(texts) if texts else np.zeros((0, 0), np.float32)
        owners = np.array([k for k, _ in rows], dtype=np.intp)
        return cls(entries, vectors, owners, embedder, config or KnowledgeConfig())

    def __len__(self) -> int:
        return len(self.entries)

    async def retrieve(self, text: str, *, timings: StageTimings | None = None) -> list[Retrieved]:
        """The entries for the caller's words, best first (none for no words or no entries).

        The embedder's errors (a timeout) are the caller's to handle.
        """
        query = query_text(text)
        if not self.entries or not normalize(query):
            return []
        vector = await self._embedder.embed([query], timings=timings)
        return self.rank(vector, query)

    def rank(self, vector: npt.NDArray[np.float32], text: str) -> list[Retrieved]:
        """The rule on a unit query vector (shape (dim,) or (1, dim)) of ``text``."""
        scores = self.scores(vector)
        said = normalize(text)
        for k, patterns in enumerate(self._keywords):
            if any(p.search(said) for p in patterns):
                scores[k] = max(scores[k], self.config.min_score)
        order = np.argsort(-scores, kind="stable")
        return [
            Retrieved(self.entries[k], float(scores[k]))
            for k in order[: self.config.max_entries]
            if scores[k] >= self.config.min_score
        ]

    def scores(self, vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Per entry, the cosine similarity of its nearest question to a unit query vector."""
        best = np.full(len(self.entries), -1.0, dtype=np.float32)
        if len(self._owners):
            sims = self._vectors @ np.asarray(vector, dtype=np.float32).reshape(-1)
            np.maximum.at(best, self._owners, sims)
        return best

    def on_topic(self, text: str, entry: KnowledgeEntry) -> bool:
        """Whether ``entry`` is about what ``text`` asks, as far as their words tell
        (``bot.answers.grounding.on_topic``): a retrieved entry may be near in meaning and
        name another thing ("gift wrapping" and gift cards)."""
        k = self.entries.index(entry)
        return on_topic(text, self._texts[k], common=self._common)

    def about(self, asked: str, found: Sequence[Retrieved]) -> list[Retrieved]:
        """The retrieved entries that are about what ``asked`` asks (``on_topic``), best
        first."""
        return [r for r in found if self.on_topic(asked, r.entry)]

    def direct(self, retrieved: list[Retrieved]) -> KnowledgeEntry | None:
        """The entry whose own answer may be spoken as is: the best one, when it scores at
        least ``direct_score``; otherwise None (the LLM words the answer)."""
        if retrieved and retrieved[0].score >= self.config.direct_score:
            return retrieved[0].entry
        return None


def topic_question(entry: KnowledgeEntry) -> str:
    """The yes-or-no question about ``entry``'s topic: the operator's ``confirm``, or one
    made from its spoken topic (``bot.intents.topic.topic_of_entry``): "Is this about gift
    cards?"."""
    if entry.confirm:
        return entry.confirm
    return about_question(topic_of_entry(entry))
