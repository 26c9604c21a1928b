"""The node as the admin API sees it (``admin.node_port.NodePort``): its live calls and
metrics, its matcher on an operator's words, its model's suggested examples, its embedder.

Built from the ``Node``; it reads the node's parts when asked (a configuration applied
meanwhile is what the next answer uses), and changes nothing in them.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from admin.metrics import NodeMetrics
from admin.node_port import (
    IntentWarningRead,
    MatchingInUse,
    NodeUnavailable,
    SuggestionRead,
    SuggestionsRead,
    TryResult,
)
from bot.calllog import CallLog
from bot.calllog.calllog import LiveCallInfo
from bot.intents.cache import IntentCache
from bot.intents.suggest import suggest_examples
from bot.knowledge.index import KnowledgeIndex
from bot.profile import BotProfile
from serve import ModelSet
from serve.base import unhurried
from telephony.webrtc import WebRtcCalls


class NodeParts(Protocol):
    """What the admin port reads of the node (``node.app.Node``), each time it is asked."""

    @property
    def metrics(self) -> NodeMetrics: ...

    @property
    def call_log(self) -> CallLog | None: ...

    @property
    def intent_cache(self) -> IntentCache | None: ...

    @property
    def models(self) -> ModelSet | None: ...

    @property
    def knowledge(self) -> KnowledgeIndex | None: ...

    @property
    def profile(self) -> BotProfile: ...


#: How long the model may write suggestions before the operator is told to try again.
SUGGEST_TIMEOUT_S = 60.0
#: Texts embedded per call to the embedder (each call has the embedder's own time limit).
EMBED_BATCH = 32


class AdminPort:
    """``NodePort`` over a running ``Node``."""

    def __init__(self, node: NodeParts, webrtc: WebRtcCalls | None) -> None:
        self._node = node
        self._webrtc = webrtc
        #: One suggestion at a time: the model also answers callers.
        self._suggesting = asyncio.Lock()

    @property
    def metrics(self) -> NodeMetrics:
        return self._node.metrics

    @property
    def webrtc(self) -> WebRtcCalls | None:
        return self._webrtc

    def live_calls(self) -> list[LiveCallInfo]:
        call_log = self._node.call_log
        return [] if call_log is None else call_log.live_calls()

    def matching_report(self) -> MatchingInUse:
        """The intents' matching as fitted at load, for the admin API and console."""
        cache = self._node.intent_cache
        fitted = None if cache is None else cache.fitted
        if fitted is None:
            return MatchingInUse(
                threshold=None, confirm_threshold=None, background_lines=0, warnings=[]
            )
        return MatchingInUse(
            threshold=round(fitted.rule.threshold, 4),
            intent_thresholds={k: round(v, 4) for k, v in fitted.thresholds.items()},
            confirm_threshold=fitted.rule.confirm_threshold,
            background_lines=len(fitted.background_texts),
            warnings=[
                IntentWarningRead(intent=w.intent, kind=w.kind, message=w.message)
                for w in fitted.warnings
            ],
        )

    async def try_utterance(self, text: str) -> TryResult:
        """What this node would do with ``text``: its intent cache, then its knowledge base."""
        node = self._node
        if node.intent_cache is not None:
            found = await node.intent_cache.lookup(text)
            m = found.match
            if m.intent is not None:
                return TryResult(
                    route=m.route,
                    intent=m.intent,
                    score=round(m.score, 4),
                    answer=found.entry.answer if found.entry is not None else None,
                    reason=m.reason or "match",
                )
            if m.route == "confirm" and found.entry is not None:
                # Not sure enough to answer: the caller would hear the intent's question.
                return TryResult(
                    route="confirm",
                    intent=m.best,
                    score=round(m.score, 4),
                    answer=found.entry.confirm,
                    reason=m.reason,
                )
            reason, best, score = m.reason or "no match", m.best, round(m.score, 4)
        else:
            reason, best, score = "no intents", None, None
        if node.knowledge is not None:
            hits = await node.knowledge.retrieve(text)
            if hits:
                top = hits[0]
                direct = top.score >= node.profile.knowledge_matching.direct_score
                return TryResult(
                    route="knowledge" if direct else "llm",
                    intent=best,
                    score=score,
                    answer=top.entry.answer if direct else None,
                    reason=reason,
                    knowledge_topic=top.entry.topic,
                    knowledge_score=round(top.score, 4),
                )
        return TryResult(route="llm", intent=best, score=score, answer=None, reason=reason)

    async def suggest_examples(self, intent: str) -> SuggestionsRead:
        """The node's model writes paraphrases of ``intent``; its matcher keeps the ones it
        gives to that intent, uncontested. One at a time, for ``SUGGEST_TIMEOUT_S`` at most."""
        node = self._node
        if node.models is None:
            raise NodeUnavailable("the node's models are still loading")
        if node.intent_cache is None:
            raise NodeUnavailable("the node runs no intents (no intent cache, or no embedder)")
        config = next((i for i in node.profile.intents if i.name == intent), None)
        if config is None:
            raise NodeUnavailable(
                f"the node does not run intent {intent!r} yet: a new version is applied at "
                "its next configuration check"
            )
        if self._suggesting.locked():
            raise NodeUnavailable("the node is writing suggestions already: try again soon")
        async with self._suggesting:
            try:
                # The operator's own limit: not a caller's turn (the model's 10 s to a
                # first word, 2 s an embedding), which a busy node passes.
                async with asyncio.timeout(SUGGEST_TIMEOUT_S):
                    with unhurried():
                        found = await suggest_examples(config, node.models.llm, node.intent_cache)
            except TimeoutError:
                raise NodeUnavailable(
                    f"the model took longer than {SUGGEST_TIMEOUT_S:.0f} s: try again when "
                    "the node is less busy"
                ) from None
        return SuggestionsRead(
            intent=found.intent,
            offered=[
                SuggestionRead(text=s.text, score=s.score, answered=s.answered)
                for s in found.offered
            ],
            dropped=found.dropped,
        )

    async def embed(self, texts: list[str]) -> list[list[float]] | None:
        models = self._node.models
        if models is None or models.embedder is None:
            return None
        out: list[list[float]] = []
        for start in range(0, len(texts), EMBED_BATCH):
            vectors = await models.embedder.embed(texts[start : start + EMBED_BATCH])
            out += vectors.tolist()
        return out
