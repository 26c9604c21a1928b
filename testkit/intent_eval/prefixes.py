"""The matcher on partial utterances: the first words of each, as a speculative lookup sees
them when the caller pauses mid-sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.intents.match import IntentIndex, IntentMatchingConfig
from serve import Embedder
from testkit.intent_eval.eval_sets import Items
from testkit.intent_eval.profile_index import decide, embed_queries


@dataclass
class PrefixOutcome:
    """The rule on the first words of each utterance, as a speculative lookup sees them when
    the caller pauses mid-sentence (clean text; every word boundary, a superset of pauses)."""

    paraphrase_prefixes: int = 0
    own_intent: int = 0  # a paraphrase's first words already matched its own intent
    negative_prefixes: int = 0
    #: (first words, whole utterance, intent answered): a negative's start got an answer.
    false_accepts: list[tuple[str, str, str]] = field(default_factory=list)
    #: (first words, whole utterance, its intent, intent answered).
    wrong: list[tuple[str, str, str, str]] = field(default_factory=list)


def word_prefixes(items: Items, min_words: int = 2) -> list[tuple[str, str, str | None]]:
    """(first n words, utterance, truth) for every n from ``min_words`` to all words but one."""
    out = []
    for text, truth in items:
        words = text.split()
        out += [(" ".join(words[:n]), text, truth) for n in range(min_words, len(words))]
    return out


async def evaluate_prefixes(
    index: IntentIndex, embedder: Embedder, items: Items, rule: IntentMatchingConfig
) -> PrefixOutcome:
    prefixes = word_prefixes(items)
    vectors = await embed_queries(embedder, [p for p, _, _ in prefixes])
    out = PrefixOutcome()
    for (prefix, text, truth), vector in zip(prefixes, vectors, strict=True):
        got = decide(index, prefix, vector, rule).intent
        if truth is None:
            out.negative_prefixes += 1
            if got is not None:
                out.false_accepts.append((prefix, text, got))
        else:
            out.paraphrase_prefixes += 1
            if got == truth:
                out.own_intent += 1
            elif got is not None:
                out.wrong.append((prefix, text, truth, got))
    return out
