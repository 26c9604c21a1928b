"""Suggested examples for a thin intent: paraphrases written by the node's own language
model, checked by the intent matcher, for an operator to accept one by one.

The model writes; it decides nothing. A paraphrase is offered only when the matcher, with
the profile's intents, negatives and background lines as they are in use, finds the intent
itself nearest to it and nothing that contests it (another intent within the margin, one of
the intent's negative examples, a background line). What it would do today is shown beside
it: "answered" (already matched: it adds little) or "not yet answered" (below the threshold
or only worth a question: the example that widens what the intent catches). Nothing is added
to the profile here: the console adds what a person picks, as any other change.

The small CPU models write weak paraphrases (off-topic lines, repeats, lists of their own);
the check is what makes the list worth reading.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Literal

from bot.intents.cache import IntentCache
from bot.intents.match import normalize
from bot.profile import IntentConfig
from serve import LLM, ChatMessage

#: Lines the model writes before and around its list ("Here are 6 ways..."), and lines
#: said to the caller rather than by one ("You can request...", "Your return policy is...").
_PREAMBLE = re.compile(
    r"^(?:here|these|sure|this|note|calls? |you(?:'re| are| can| have|r ))", re.IGNORECASE
)
_BULLET = re.compile(r"^\s*(?:[-*•]+|\d+[.)]|[a-z][.)])\s*")
MIN_WORDS, MAX_WORDS = 3, 20

SYSTEM = (
    "You write what callers say to a business's phone line. Reply with a list only, one "
    "caller request per line, nothing else."
)

#: Why a paraphrase the model wrote was not offered (for the console's count).
Dropped = Literal["not a request", "already an example", "another intent", "contested"]


@dataclass(frozen=True)
class Suggestion:
    """A paraphrase the matcher gives to the intent, and what it would do with it today."""

    text: str
    #: The matcher's calibrated score for the intent.
    score: float
    #: Already answered by the intent, or not yet (the examples that widen it).
    answered: bool


@dataclass(frozen=True)
class Suggestions:
    intent: str
    offered: list[Suggestion]
    #: How many of the model's lines were left out, by reason.
    dropped: dict[str, int]


def prompt(intent: IntentConfig, count: int) -> list[ChatMessage]:
    """The model's instructions: the intent's examples and answer, and how many to write."""
    examples = "\n".join(f"- {e}" for e in intent.examples[:8])
    return [
        ChatMessage("system", SYSTEM),
        ChatMessage(
            "user",
            f"Callers who get this answer:\n{intent.answer}\n\nasked for it like this:\n"
            f"{examples}\n\nWrite {count} more ways a caller could ask for the same thing, "
            "in everyday spoken words, one per line, each different from the others.",
        ),
    ]


def lines_of(text: str) -> list[str]:
    """The requests in the model's reply: list marks and emphasis removed, its own
    sentences around the list left out, each request once."""
    out: list[str] = []
    seen: set[str] = set()
    for raw in text.splitlines():
        line = _BULLET.sub("", raw.strip()).replace("**", "").strip().strip("\"'").strip()
        if not line or line.endswith(":") or _PREAMBLE.match(line):
            continue
        key = normalize(line)
        if key and key not in seen:
            seen.add(key)
            out.append(line)
    return out


async def suggest_examples(
    intent: IntentConfig,
    llm: LLM,
    cache: IntentCache,
    *,
    count: int = 6,
    max_tokens: int = 200,
    temperature: float = 0.8,
) -> Suggestions:
    """Paraphrases of ``intent`` the model writes and the matcher gives to it."""
    text = ""
    async for piece in llm.stream(
        prompt(intent, count), max_tokens=max_tokens, temperature=temperature
    ):
        text += piece
    given = {normalize(t) for t in (*intent.examples, *intent.negatives)}
    offered: list[Suggestion] = []
    dropped: dict[str, int] = {}

    def drop(reason: Dropped) -> None:
        dropped[reason] = dropped.get(reason, 0) + 1

    for line in lines_of(text):
        if not MIN_WORDS <= len(line.split()) <= MAX_WORDS:
            drop("not a request")
            continue
        if normalize(line) in given:
            drop("already an example")
            continue
        match = (await cache.lookup(line)).match
        if (match.intent or match.best) != intent.name:
            drop("another intent")
            continue
        if match.reason in ("negative example closer", "background closer", "margin too small"):
            drop("contested")
            continue
        offered.append(
            Suggestion(text=line, score=round(match.score, 4), answered=match.intent is not None)
        )
        await asyncio.sleep(0)
    # The ones that widen the intent first, then the surest.
    offered.sort(key=lambda s: (s.answered, -s.score))
    return Suggestions(intent=intent.name, offered=offered, dropped=dropped)
