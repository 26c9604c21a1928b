"""Deciding which intent, if any, a caller's words mean: exact match, then semantic match.

Pure functions over vectors already computed: no model, no storage. The rule (see
docs/intent-cache.md): an exact match of the normalized text with one intent's example wins;
otherwise each intent is scored by the mean similarity of its ``top_k`` nearest examples,
less ``calibration`` times how much more alike its own examples are than usual (its
cohesion, ``COHESION_REFERENCE``). The best intent wins only if that score is at least
``threshold`` (``action_threshold`` for an intent with an action: a hang-up or a transfer),
leads the best other intent by ``margin``, and none of that intent's negative examples
comes within ``negative_margin`` of its similarity.

Two more checks make a profile safe that has few examples and no negatives of its own
(docs/intent-cache.md): the background lines that ship with the product (``background.py``)
veto a match whose words are nearer to one of them than to the intent's nearest example (by
``background_margin`` for an answer, ``confirm_background_margin`` for a question), and a
best intent that is not sure enough to answer but scores at least ``confirm_threshold`` is
offered to the caller as a question ("Do you want to know where your order is?") instead of
being dropped. A question needs the best intent to lead the runner-up by ``confirm_margin``;
one that scores as a hit and leads it by ``clear_margin`` is asked about even when a
background line is up to ``-clear_background_margin`` nearer than its nearest example.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "`": "'"})
_NOT_WORD = re.compile(r"[^a-z0-9' ]+")
_SPACES = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
#: Hesitations that speech recognition writes out ("Um, where is my order?"): no meaning.
FILLERS = frozenset({"um", "umm", "uh", "uhh", "uhm", "er", "erm", "ah", "hmm", "hm", "mm"})
_EDGE = "\"'.,;:!?-…()[]"
#: A typical cohesion (see ``IntentIndex.cohesion``) of an intent's examples with MiniLM:
#: calibration moves the score of an intent whose examples are more alike than this down,
#: and of one whose examples are more varied up.
COHESION_REFERENCE = 0.7

Vectors = npt.NDArray[np.float32]


def normalize(text: str) -> str:
    """Lower case, punctuation and hesitations dropped, spaces collapsed:
    ``"Um, where's my order?"`` -> ``"where's my order"``."""
    lowered = text.lower().translate(_APOSTROPHES)
    words = _SPACES.sub(" ", _NOT_WORD.sub(" ", lowered)).strip(" '").split(" ")
    return " ".join(w for w in words if w.strip("'") not in FILLERS)


def query_text(text: str) -> str:
    """The text that is embedded: the words as said, without hesitations and their
    punctuation (``"Um, where's my order?"`` -> ``"where's my order?"``) and without a
    sentence said again. Case and the rest of the punctuation stay: the embedder was trained
    on written sentences."""
    words = text.translate(_APOSTROPHES).split()
    kept = " ".join(w for w in words if w.strip(_EDGE).lower() not in FILLERS)
    # Whisper sometimes loops on a short utterance ("Good morning. Good morning! Good"): keep
    # a sentence once, and drop a repeat cut short.
    sentences: list[str] = []
    for sentence in _SENTENCE_END.split(kept):
        key = normalize(sentence)
        if not key:
            continue
        if sentences and normalize(sentences[-1]).startswith(key):
            continue
        sentences.append(sentence)
    return " ".join(sentences).lstrip(_EDGE + " ")


@dataclass(frozen=True)
class IntentVectors:
    """One intent's example and negative-example embeddings (unit rows)."""

    name: str
    examples: tuple[str, ...]
    negatives: tuple[str, ...]
    example_vectors: Vectors
    negative_vectors: Vectors
    #: What the bot does after the answer (``transfer``, ``hangup``), if anything.
    action: str | None = None


class IntentMatchingConfig(BaseModel):
    """When a semantic match is trusted: the rule's parameters, from the profile's
    ``[intent_matching]`` to the matcher, their defaults written here only
    (docs/intent-cache.md says how they were chosen)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: An intent's similarity: mean cosine similarity of its ``top_k`` nearest examples.
    top_k: int = Field(4, ge=1, le=10)
    #: Its score: that similarity less ``calibration`` times how much more alike its own
    #: examples are than usual (``IntentIndex.cohesion``); 0: no calibration.
    calibration: float = Field(0.0, ge=0.0, le=2.0)
    #: Score needed for a hit.
    threshold: float = Field(0.45, gt=0.0, le=1.0)
    #: Score needed for a hit on an intent with an ``action`` (hang up, transfer), when
    #: higher than ``threshold`` (0: no more): acting on a misheard caller costs more than
    #: a wrong answer. ``hangup_threshold``, its earlier name, is still read.
    action_threshold: float = Field(
        0.65, ge=0.0, le=1.0, validation_alias=AliasChoices("action_threshold", "hangup_threshold")
    )
    #: Lead over the best other intent's score needed for a hit.
    margin: float = Field(0.1, ge=0.0, le=1.0)
    #: The hit is refused when one of the intent's negative examples is at least as similar
    #: as the intent's similarity less ``negative_margin``.
    negative_margin: float = Field(0.05, ge=-1.0, le=1.0)
    #: Hold the profile to the background lines that ship with the product
    #: (``bot/intents/background.txt``): a match is refused when the caller's words are
    #: nearer to one of them, and the threshold is raised at load above any of them the
    #: intents would answer (``bot.intents.fit``).
    background: bool = True
    #: An intent with an action that asks for what one of the requests every contact
    #: center gets asks for ("let me talk to a person", "goodbye") is matched with the
    #: product's stock phrasings of it too (``bot.intents.stock``).
    stock_phrasings: bool = True
    #: Words the rule does not answer are matched clause by clause too ("I've just moved |
    #: and I need to close the account at my old place."), for the intent the whole is
    #: nearest to only (``bot.intents.clauses``).
    clauses: bool = True
    #: At load, raise ``threshold`` just above the score of any background line the intents
    #: would answer (each line held to the others: ``bot.intents.fit``).
    fit_threshold: bool = True
    #: An answer needs the intent's similarity to lead the nearest background line's by this.
    background_margin: float = Field(0.1, ge=-1.0, le=1.0)
    #: A best intent refused for its score or its lead, but scoring at least this, is asked
    #: about ("Do you want to know where your order is?"): a "yes" plays its answer. 0: never.
    confirm_threshold: float = Field(0.35, ge=0.0, le=1.0)
    #: A question needs the intent's similarity to lead the nearest background line's by this
    #: (may be negative: more lenient than ``background_margin``).
    confirm_background_margin: float = Field(0.0, ge=-1.0, le=1.0)
    #: A question needs the best intent's score to lead the best other intent's by this: of
    #: two intents about as near, the question would be a coin toss.
    confirm_margin: float = Field(0.03, ge=0.0, le=1.0)
    #: A best intent that scores as a hit (``threshold``) and leads the best other intent by
    #: ``clear_margin`` is asked about even when a background line is nearer than its
    #: nearest example, by up to ``-clear_background_margin``: with three examples an
    #: intent, a line worded like the caller ("I want to buy a car." for "I need a loan to
    #: buy a car.") is often nearer than any example, though the intent is clearly the one.
    #: ``clear_background_margin`` at or above ``confirm_background_margin``: never.
    clear_margin: float = Field(0.15, ge=0.0, le=1.0)
    clear_background_margin: float = Field(-0.1, ge=-1.0, le=1.0)

    @model_validator(mode="after")
    def _confirm_below_threshold(self) -> IntentMatchingConfig:
        if self.confirm_threshold > self.threshold:
            raise ValueError(
                f"intent_matching: confirm_threshold ({self.confirm_threshold}) is above "
                f"threshold ({self.threshold}): nothing would be answered without a question"
            )
        return self

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> IntentMatchingConfig:
        """Validate the rule as another node stored it: fields this code does not know (a
        newer node's) are left out, so that a rolling upgrade does not refuse the index."""
        known = set(cls.model_fields) | {"hangup_threshold"}
        return cls.model_validate({k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class Match:
    """The outcome of one lookup; ``intent`` is None when the cache must not answer."""

    #: ``confirm``: not sure enough to answer; ``best`` is worth asking the caller about.
    route: Literal["exact", "semantic", "confirm", "none"]
    intent: str | None
    score: float
    #: The best intent and its score even when refused (for evaluation and logs).
    best: str | None = None
    runner_up_score: float = 0.0
    negative_score: float = -1.0
    reason: str = ""
    #: The best intent's similarity before calibration (what its negatives are held to).
    similarity: float = 0.0
    #: The similarity of the nearest background line (-1 when there are none).
    background_score: float = -1.0
    #: Refused only because one of the intent's negative examples is as near, though it
    #: scores as a hit: worth asking the caller about if nothing else answers them (the
    #: knowledge base has no entry), rather than saying "not sure".
    ask_if_unanswered: bool = False
    #: The runner-up intent (the best other one, whose score is ``runner_up_score``): with
    #: the best, what a question offering two intents names (None: one intent, or exact).
    runner_up: str | None = None
    #: The clause of the words that decided (``bot.intents.clauses``); None: the whole.
    clause: str | None = None


@dataclass(frozen=True)
class Scores:
    """One query against every intent: the step of the rule that needs the vectors."""

    top_k: int
    #: Per intent: the mean similarity of its ``top_k`` nearest examples.
    intent: npt.NDArray[np.float32]
    #: Per intent: the similarity of its nearest negative example (-1 when it has none).
    negative: npt.NDArray[np.float32]
    #: The similarity of the nearest background line (-1 when there are none).
    background: float = -1.0
    #: Per intent: the similarity of its nearest example (None: taken as ``intent``).
    nearest: npt.NDArray[np.float32] | None = None


class IntentIndex:
    """The matching side of the cache: normalized examples and stacked example vectors."""

    def __init__(
        self,
        intents: list[IntentVectors],
        background: Vectors | None = None,
        thresholds: Mapping[str, float] | None = None,
    ) -> None:
        self.intents = intents
        #: Intents held to a threshold of their own (raised at load, ``bot.intents.fit``)
        #: rather than the rule's.
        self.thresholds: Mapping[str, float] = dict(thresholds or {})
        self._exact: dict[str, str] = {}
        self._exact_negative: set[str] = set()
        for intent in intents:
            for example in intent.examples:
                self._exact.setdefault(normalize(example), intent.name)
            self._exact_negative.update(normalize(n) for n in intent.negatives)
        dim = intents[0].example_vectors.shape[1] if intents else 0
        self._vectors = (
            np.concatenate([i.example_vectors for i in intents]).astype(np.float32)
            if intents
            else np.zeros((0, dim), np.float32)
        )
        self._negatives = (
            np.concatenate([i.negative_vectors.reshape(-1, dim) for i in intents]).astype(
                np.float32
            )
            if intents
            else np.zeros((0, dim), np.float32)
        )
        # Each intent's rows are contiguous: (start, end) per intent.
        self._rows = _spans([len(i.example_vectors) for i in intents])
        self._negative_rows = _spans([len(i.negative_vectors) for i in intents])
        self._cohesion: dict[int, npt.NDArray[np.float32]] = {}
        #: The background lines this profile is held to (``bot.intents.fit``), unit rows.
        self.background = (
            np.zeros((0, dim), np.float32)
            if background is None or not len(background)
            else np.asarray(background, dtype=np.float32)
        )

    def __len__(self) -> int:
        return len(self.intents)

    def exact(self, text: str) -> Match | None:
        """The exact-match decision, or None when the text needs the semantic step."""
        key = normalize(text)
        if not key:
            return Match(route="none", intent=None, score=0.0, reason="no words")
        name = self._exact.get(key)
        if name is not None:
            return Match(route="exact", intent=name, score=1.0, best=name)
        if key in self._exact_negative:
            return Match(route="none", intent=None, score=0.0, reason="exact negative")
        return None

    def scores(self, vector: Vectors, top_k: int) -> Scores:
        """Score one unit query vector (shape (dim,) or (1, dim)) against every intent."""
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        sims = self._vectors @ q
        negative_sims = self._negatives @ q
        per_intent = np.full(len(self.intents), -1.0, dtype=np.float32)
        nearest = np.full(len(self.intents), -1.0, dtype=np.float32)
        negative = np.full(len(self.intents), -1.0, dtype=np.float32)
        for k, (start, end) in enumerate(self._rows):
            if end > start:
                own = sims[start:end]
                n = min(top_k, end - start)
                per_intent[k] = np.partition(own, end - start - n)[-n:].mean()
                nearest[k] = own.max()
        for k, (start, end) in enumerate(self._negative_rows):
            if end > start:
                negative[k] = negative_sims[start:end].max()
        background = float((self.background @ q).max()) if len(self.background) else -1.0
        return Scores(
            top_k=top_k,
            intent=per_intent,
            negative=negative,
            background=background,
            nearest=nearest,
        )

    def cohesion(self, top_k: int) -> npt.NDArray[np.float32]:
        """Per intent: the median, over its examples, of each example's mean similarity to
        its ``top_k`` nearest other examples (``COHESION_REFERENCE`` with fewer than two)."""
        found = self._cohesion.get(top_k)
        if found is None:
            found = np.full(len(self.intents), COHESION_REFERENCE, dtype=np.float32)
            for k, (start, end) in enumerate(self._rows):
                n = end - start
                if n >= 2:
                    own = self._vectors[start:end]
                    sims = own @ own.T
                    np.fill_diagonal(sims, -np.inf)
                    m = min(top_k, n - 1)
                    nearest = -np.sort(-sims, axis=1)[:, :m]
                    found[k] = float(np.median(nearest.mean(axis=1)))
            self._cohesion[top_k] = found
        return found

    def judge(self, scores: Scores, rule: IntentMatchingConfig) -> Match:
        """The semantic rule on scores already computed (``scores``)."""
        if not self.intents:
            return Match(route="none", intent=None, score=0.0, reason="no intents")
        per_intent = scores.intent
        if rule.calibration:
            shift = rule.calibration * (self.cohesion(scores.top_k) - COHESION_REFERENCE)
            per_intent = per_intent - shift
        if len(per_intent) > 1:
            top2 = np.argpartition(per_intent, len(per_intent) - 2)[-2:]
            best, second = (int(top2[1]), int(top2[0]))
            if per_intent[second] > per_intent[best]:
                best, second = second, best
            runner_up = float(per_intent[second])
            runner_up_name: str | None = self.intents[second].name
        else:
            best, runner_up, runner_up_name = 0, -1.0, None
        score = float(per_intent[best])
        similarity = float(scores.intent[best])
        negative = float(scores.negative[best])
        name = self.intents[best].name
        threshold = self.thresholds.get(name, rule.threshold)
        needed = threshold
        if self.intents[best].action is not None:
            needed = max(needed, rule.action_threshold)
        # How far the intent's nearest example leads the nearest background line (no lines:
        # no limit): one example against one line. Against the mean of the intent's top_k
        # examples, an intent of three examples lost callers to any line as near as its
        # best example (docs/intent-cache.md).
        nearest = similarity if scores.nearest is None else float(scores.nearest[best])
        lead = nearest - scores.background if scores.background > -1.0 else np.inf
        # Clearly this intent, though a background line is a little nearer: worth a question
        # (held to ``threshold``, not ``action_threshold``: a question acts on nothing).
        clear = (
            score >= threshold
            and score - runner_up >= rule.clear_margin
            and lead >= rule.clear_background_margin
        )
        askable = False
        unanswered = False
        if negative >= similarity - rule.negative_margin:
            reason = "negative example closer"
            unanswered = (
                rule.confirm_threshold > 0.0
                and score >= needed
                and lead >= rule.confirm_background_margin
            )
        elif lead < min(rule.background_margin, rule.confirm_background_margin):
            reason = "background closer"
            askable = clear
        elif score < needed:
            reason = "below threshold"
            askable = True
        elif score - runner_up < rule.margin:
            reason = "margin too small"
            askable = True
        elif lead < rule.background_margin:
            reason = "background closer"
            askable = True
        else:
            reason = ""
        route: Literal["semantic", "confirm", "none"] = "semantic"
        if reason:
            route = "none"
            if (
                askable
                and rule.confirm_threshold > 0.0
                and score >= rule.confirm_threshold
                and score - runner_up >= rule.confirm_margin
                and (lead >= rule.confirm_background_margin or clear)
            ):
                route = "confirm"
        return Match(
            route=route,
            intent=None if reason else name,
            score=score,
            best=name,
            runner_up_score=runner_up,
            negative_score=negative,
            reason=reason,
            similarity=similarity,
            background_score=scores.background,
            ask_if_unanswered=unanswered,
            runner_up=runner_up_name,
        )

    def semantic(self, vector: Vectors, rule: IntentMatchingConfig) -> Match:
        """Match one unit query vector (shape (dim,) or (1, dim)) against the examples."""
        if not self.intents:
            return Match(route="none", intent=None, score=0.0, reason="no intents")
        return self.judge(self.scores(vector, rule.top_k), rule)


def _spans(sizes: list[int]) -> list[tuple[int, int]]:
    ends = np.cumsum(sizes).tolist() if sizes else []
    return [(end - size, end) for size, end in zip(sizes, ends, strict=True)]
