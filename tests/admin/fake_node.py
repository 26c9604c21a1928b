"""A node at the admin API's boundary (``admin.node_port.NodePort``): what a test gives it,
nothing more. What it is not given, it cannot do (``NodeUnavailable``, a 503)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from admin.metrics import NodeMetrics
from admin.node_port import MatchingInUse, NodeUnavailable, SuggestionsRead, TryResult
from bot.calllog.calllog import LiveCallInfo
from telephony.webrtc import WebRtcCalls


@dataclass
class FakeNode:
    metrics: NodeMetrics = field(default_factory=NodeMetrics)
    webrtc: WebRtcCalls | None = None
    calls: list[LiveCallInfo] = field(default_factory=list)
    matching: MatchingInUse | None = None
    #: Suggestions by intent name.
    suggestions: dict[str, SuggestionsRead] = field(default_factory=dict)
    #: The node's embedder (None: it has none).
    embedder: Callable[[list[str]], list[list[float]]] | None = None
    #: The intents asked for suggestions, in order.
    asked: list[str] = field(default_factory=list)

    def live_calls(self) -> list[LiveCallInfo]:
        return list(self.calls)

    def matching_report(self) -> MatchingInUse:
        if self.matching is None:
            raise NodeUnavailable("no matching given to this node")
        return self.matching

    async def try_utterance(self, text: str) -> TryResult:
        raise NodeUnavailable("no matcher given to this node")

    async def suggest_examples(self, intent: str) -> SuggestionsRead:
        self.asked.append(intent)
        if intent not in self.suggestions:
            raise NodeUnavailable(f"the node does not run intent {intent!r} yet")
        return self.suggestions[intent]

    async def embed(self, texts: list[str]) -> list[list[float]] | None:
        return None if self.embedder is None else self.embedder(texts)
