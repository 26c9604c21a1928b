"""Judging what is not an answer: the model talking about itself, apologies that fit nothing,
offers nobody made, claims no operator text holds, and an entry about another topic.

These are a reader's rules, written apart from the guard's (``bot.answers``): looser where the
guard is strict (a claim's words may come from any operator text, not only the retrieved
entries), so that a count above zero says the guard let something through.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from bot.answers.text import words, words_of

Kind = Literal["meta", "apology", "offer", "claim", "other_topic"]
KINDS: tuple[Kind, ...] = ("meta", "apology", "offer", "claim", "other_topic")

_SENTENCE = re.compile(r"(?<=[.!?,;])\s+")
_META = re.compile(
    r"\b(?:AI|language model|chat ?bot|virtual assistant|as an? (?:\w+ ){0,2}"
    r"(?:assistant|representative|agent|model)|not equipped|(?:unable|not able) to "
    r"(?:access|provide|assist|process|see|check)|(?:don't|do not) have access"
    r"|my (?:programming|training)|I'?m (?:just|only) an?)\b",
    re.IGNORECASE,
)
_ASKED_ABOUT_BOT = re.compile(r"\b(?:robot|bot|human|person|machine|who is this)\b", re.I)
_CONDOLENCE = re.compile(r"\byour loss\b|\bcondolence|\bsympath", re.IGNORECASE)
_DEATH = re.compile(r"\b(?:died|death|passed away|funeral)\b", re.IGNORECASE)
_SORRY = re.compile(
    r"\bsorry (?:for|about) (?:any|the) (?:confusion|misunderstanding|inconvenience|trouble)"
    r"|\bsorry to hear\b|\bapologi[sz]e for\b",
    re.IGNORECASE,
)
#: A caller who complained or said no: an apology to them is in place.
_COMPLAINT = re.compile(
    r"\b(?:not|never|no|didn't|hasn't|haven't|wrong|broken|damaged|late|lost|missing|stopped"
    r"|problem|issue|complain\w*|upset|angry)\b",
    re.IGNORECASE,
)
_OFFER = re.compile(
    r"\b(?:I|we)(?:'ll| will| can| could|'d be happy to| would be happy to| am going to"
    r"|'m going to)\s+(?!not\b|never\b|rather\b)\w+|\blet me\b",
    re.IGNORECASE,
)
#: The one offer the bot's own phrases make: a colleague.
_COLLEAGUE = re.compile(r"\bcolleague|\bput you through|\btransfer you", re.IGNORECASE)
_CLAIM = re.compile(
    r"\b(?:we|we're|we've|our)\b|\byou (?:can|can't|cannot|may|will)\b"
    r"|\b(?:offer|offers|accept|accepts|available|allowed)\b",
    re.IGNORECASE,
)
#: Words a claim may use without any operator text holding them.
_PLAIN = words_of(
    """the and but you your our we us can cannot can't will would could also any this that
    with from have has for are not don't do does what when where which there here they them
    their about just only please sure thank thanks like want need help able offer offers
    accept available allowed also some other more other it's that's what's i'm we're you're
    if so or of to in on at by is be it a an as up no yes yeah"""
)


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") else word


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text.strip()) if s]


def _has_run(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    return n > 0 and any(
        list(haystack[i : i + n]) == list(needle) for i in range(len(haystack) - n + 1)
    )


def judge(
    generated: Sequence[str],
    spoken: str,
    caller: str,
    *,
    entries: dict[str, str],
    operator_texts: Sequence[str],
    expected: str | None,
) -> list[tuple[Kind, str]]:
    """What in one turn is not an answer, each as (kind, the words).

    ``generated``: the model's clauses the caller heard; ``spoken``: all they heard;
    ``caller``: their words; ``entries``: each knowledge topic's answer; ``operator_texts``:
    every text the operator wrote (answers, entries, the bot's phrases); ``expected``: the
    topic or intent that answers the question (None: the profile does not cover it)."""
    out: list[tuple[Kind, str]] = []
    vocabulary = {_stem(w) for t in operator_texts for w in words(t)}
    for sentence in _sentences(" ".join(generated)):
        meta = _META.search(sentence)
        if meta is not None and not _ASKED_ABOUT_BOT.search(caller):
            out.append(("meta", meta.group(0)))
        condolence = _CONDOLENCE.search(sentence)
        if condolence is not None and not _DEATH.search(caller):
            out.append(("apology", condolence.group(0)))
        sorry = _SORRY.search(sentence)
        if sorry is not None and not _COMPLAINT.search(caller):
            out.append(("apology", sorry.group(0)))
        offer = _OFFER.search(sentence)
        if offer is not None and not _COLLEAGUE.search(sentence):
            out.append(("offer", offer.group(0)))
        if _CLAIM.search(sentence):
            new = [
                w
                for w in words(sentence)
                if len(w) > 3 and w not in _PLAIN and not w[0].isdigit()
                and _stem(w) not in vocabulary
            ]  # fmt: skip
            if new:
                out.append(("claim", ", ".join(new)))
    heard = words(spoken)
    for topic, answer in entries.items():
        if topic == expected:
            continue
        for sentence in _sentences(answer):
            said = words(sentence)
            if len(said) >= 4 and _has_run(heard, said):
                out.append(("other_topic", topic))
                break
    return out
