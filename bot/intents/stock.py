"""Stock phrasings: requests every contact center gets, in the product's own words. An
operator's intent that asks for the same thing is matched with them too.

"Let me talk to a person" and "goodbye" mean the same at a broadband provider, a bank and a
shop. A new operator writes three examples for such an intent ("Can I speak to a person?",
"I want to talk to someone.", "Agent please."), and callers who say "Put me through to an
operator." miss it: a background line is nearer ("Are you human?"), or the score stays below
the threshold a transfer needs. The default profile's intents with an action hold 36
phrasings of the first and 13 of the second, with negatives ("Are you a robot?", "Wait,
don't hang up."), measured on its evaluation sets: they are the stock requests.

An intent adopts a stock request when both do the same thing (``transfer``, ``hangup``)
and its own examples are worded like the request's: the median, over its examples, of each
one's nearest phrasing is at least ``ADOPT_SIMILARITY``. Measured on four profiles
(2026-11-27): the intents asking for a person score 0.84-0.87, every other intent 0.48 or
less, a transfer for fraud ("Someone took money from my account.") among them (0.38).
Of the request's phrasings, those nearer the intent's own examples than any other intent's
by ``ADOPT_LEAD``, or that no other intent's example comes within ``ADOPT_ALONE`` of, join
its examples (in a thin profile an intent of 39 examples draws the other intents' callers:
"I want to terminate my contract" was asked about a person; a lead alone, held to the
intent's three examples, left out "Human." and "Operator please.", which no other intent
is near, and new callers saying "Operator." or "Human." were not put through), and
its negatives join the intent's negatives, in the index it is matched with: each negative
only with the phrasing nearest to it among the request's (adopted, or one of the intent's
own examples), the one it was written against. Alone, "I'd like to talk about my
account." vetoed "I'd like to talk to customer service please." on a new operator's
broadband profile, and "Is there a real person I could speak with about my account?" on an
energy supplier's. Its
configuration, its answer and its action stay as the operator wrote them.
``intent_matching.stock_phrasings = false`` turns this off.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from bot.intents.match import IntentVectors, Vectors, normalize
from bot.profile import DEFAULT_PROFILE, load_profile

#: The median nearest-phrasing similarity from which an intent adopts a stock request.
ADOPT_SIMILARITY = 0.7
#: A phrasing is adopted only when it is nearer its intent's own examples than any other
#: intent's by this much.
ADOPT_LEAD = 0.2
#: ... or when no other intent's example is this similar to it (single words such as
#: "Human." are near no example of an intent's three, its own included).
ADOPT_ALONE = 0.3


@dataclass(frozen=True)
class StockRequest:
    """One request every contact center gets, and what the bot does on it."""

    name: str
    action: str
    examples: tuple[str, ...]
    negatives: tuple[str, ...]


@cache
def stock_requests() -> tuple[StockRequest, ...]:
    """The default profile's intents with an action: the stock requests."""
    return tuple(
        StockRequest(i.name, i.action, tuple(i.examples), tuple(i.negatives))
        for i in load_profile(DEFAULT_PROFILE).intents
        if i.action is not None
    )


@dataclass(frozen=True)
class EmbeddedRequest:
    request: StockRequest
    example_vectors: Vectors
    negative_vectors: Vectors


async def embed_requests(
    embed: Callable[[list[str]], Awaitable[Vectors]],
    requests: Sequence[StockRequest] | None = None,
) -> tuple[EmbeddedRequest, ...]:
    """The stock requests with their phrasings and negatives embedded (one batch)."""
    requests = stock_requests() if requests is None else tuple(requests)
    texts = [t for r in requests for t in (*r.examples, *r.negatives)]
    vectors = await embed(texts) if texts else np.zeros((0, 0), np.float32)
    out, at = [], 0
    for r in requests:
        n, m = len(r.examples), len(r.negatives)
        out.append(EmbeddedRequest(r, vectors[at : at + n], vectors[at + n : at + n + m]))
        at += n + m
    return tuple(out)


def adopted(intent: IntentVectors, request: EmbeddedRequest) -> bool:
    """Whether ``intent`` asks for what ``request`` does (same action, worded alike)."""
    if intent.action != request.request.action:  # a stock request always has one
        return False
    if not len(intent.example_vectors) or not len(request.example_vectors):
        return False
    nearest = (intent.example_vectors @ request.example_vectors.T).max(axis=1)
    return float(np.median(nearest)) >= ADOPT_SIMILARITY


def with_stock_phrasings(
    intents: Sequence[IntentVectors], requests: Sequence[EmbeddedRequest]
) -> tuple[list[IntentVectors], list[str]]:
    """``intents`` with each adopted request's phrasings and negatives added (those its own
    examples and negatives do not already say), and a note per adoption."""
    out, notes = [], []
    for intent in intents:
        matched = intent
        others = [i.example_vectors for i in intents if i is not intent and len(i.example_vectors)]
        for request in requests:
            if not adopted(matched, request):
                continue
            matched, added = _adopt(matched, request, others)
            if added:
                notes.append(
                    f"intent {intent.name!r} also matches the product's {added} phrasings of "
                    f"{request.request.name!r} (stock phrasings)"
                )
        out.append(matched)
    return out, notes


def _adopt(
    intent: IntentVectors, request: EmbeddedRequest, others: Sequence[Vectors]
) -> tuple[IntentVectors, int]:
    said = {normalize(t) for t in (*intent.examples, *intent.negatives)}
    r = request.request
    own = (request.example_vectors @ intent.example_vectors.T).max(axis=1)
    other = np.full(len(r.examples), -1.0, np.float32)
    for vectors in others:
        other = np.maximum(other, (request.example_vectors @ vectors.T).max(axis=1))
    examples = [
        i
        for i, t in enumerate(r.examples)
        if normalize(t) not in said and (own[i] - other[i] >= ADOPT_LEAD or other[i] < ADOPT_ALONE)
    ]
    said.update(normalize(r.examples[i]) for i in examples)
    # A negative was written against the phrasing nearest to it ("I'd like to talk about
    # my account." against "I'd like to talk to your staff."): without that phrasing among
    # the intent's examples it vetoes the callers the phrasing stood for ("I'd like to
    # talk to customer service please.").
    own_words = {normalize(t) for t in intent.examples}
    has = set(examples) | {i for i, t in enumerate(r.examples) if normalize(t) in own_words}
    counterpart = nearest_rows(request.negative_vectors, request.example_vectors)
    negatives = [
        i for i, t in enumerate(r.negatives) if normalize(t) not in said and counterpart[i] in has
    ]
    if not examples and not negatives:
        return intent, 0
    return (
        replace(
            intent,
            examples=(*intent.examples, *(r.examples[i] for i in examples)),
            negatives=(*intent.negatives, *(r.negatives[i] for i in negatives)),
            example_vectors=np.concatenate(
                [intent.example_vectors, request.example_vectors[examples]]
            ),
            negative_vectors=_rows(intent.negative_vectors, request.negative_vectors[negatives]),
        ),
        len(examples),
    )


def nearest_rows(rows: Vectors, among: Vectors) -> list[int]:
    """Per row of ``rows``, the index of its nearest row in ``among`` (unit rows)."""
    if not len(rows) or not len(among):
        return [-1] * len(rows)
    return [int(k) for k in (rows @ among.T).argmax(axis=1)]


def _rows(a: Vectors, b: Vectors) -> Vectors:
    if not len(a):
        return np.ascontiguousarray(b, dtype=np.float32)
    if not len(b):
        return a
    return np.concatenate([a, b])
