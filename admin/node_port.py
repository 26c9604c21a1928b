"""What the admin API asks of the node it runs in: the node's side of the console.

The admin app runs inside a node (``switchboard run``) or on its own for a fleet
(``switchboard admin``). In a node, the node hands ``create_app`` one object that keeps
this protocol (``node.admin_port.AdminPort``); on its own there is none, and what needs a
node's models answers 503. The models the hooks return are defined here, by the API that
serves them; the node fills them in.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel

from admin.metrics import NodeMetrics
from bot.calllog.calllog import LiveCallInfo
from telephony.webrtc import WebRtcCalls


class NodeUnavailable(RuntimeError):
    """The node cannot do this now (no language model loaded, no intents, busy): the reason
    is said to the operator, as a 503."""


class TryResult(BaseModel):
    """What the running node would do with these words."""

    route: str
    intent: str | None
    score: float | None
    answer: str | None
    reason: str
    knowledge_topic: str | None = None
    knowledge_score: float | None = None


class IntentWarningRead(BaseModel):
    """Something to fix in one intent, found when the node loaded the intents."""

    intent: str
    #: ``thin`` (few examples), ``close`` (an example nearer to another intent), ``raised``
    #: (a common request the intents would answer raised the threshold).
    kind: str
    message: str


class MatchingInUse(BaseModel):
    """The intents' matching as the node fitted it to this configuration at load."""

    #: The score an answer needs (the configured one).
    threshold: float | None
    #: Intents held to a higher one, raised at load: each would answer a common request.
    intent_thresholds: dict[str, float] = {}
    #: The score from which a caller is asked a confirmation question.
    confirm_threshold: float | None
    #: Background lines the node holds the intents to.
    background_lines: int
    warnings: list[IntentWarningRead]


class SuggestionRead(BaseModel):
    """A paraphrase the node's model wrote and its matcher gives to the intent."""

    text: str
    #: The matcher's calibrated score for the intent.
    score: float
    #: Already answered by the intent (it adds little), or not yet (it widens the intent).
    answered: bool


class SuggestionsRead(BaseModel):
    """Examples suggested for one intent: nothing is added until a person accepts one."""

    intent: str
    offered: list[SuggestionRead]
    #: How many of the model's lines were left out, by reason.
    dropped: dict[str, int]


class NodePort(Protocol):
    """The node, as the admin API uses it."""

    @property
    def metrics(self) -> NodeMetrics:
        """The node's figures for ``/metrics``."""
        ...

    @property
    def webrtc(self) -> WebRtcCalls | None:
        """Browser test calls (None: the node has no webrtc extra)."""
        ...

    def live_calls(self) -> list[LiveCallInfo]:
        """The node's own calls in progress."""
        ...

    def matching_report(self) -> MatchingInUse:
        """The intents' matching as fitted at load."""
        ...

    async def try_utterance(self, text: str) -> TryResult:
        """What the node would do with ``text`` (nothing is said)."""
        ...

    async def suggest_examples(self, intent: str) -> SuggestionsRead:
        """Paraphrases of the intent named ``intent`` in the configuration in use, checked
        by the matcher. ``NodeUnavailable`` when the node cannot write them now (no model,
        no intent cache, another suggestion under way, no such intent in use yet)."""
        ...

    async def embed(self, texts: list[str]) -> list[list[float]] | None:
        """Unit-length sentence vectors of ``texts`` (None: the node has no embedder)."""
        ...
