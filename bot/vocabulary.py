"""The words a caller of this operator is likely to say, for the recognizer to hear by.

Whisper tiny.en mishears the word that names the topic ("Do you ship to Germany?" heard as
"You should send your money."); given text that reads as what came before the audio (its
prompt), it leans towards those words. The prompt holds at most 224 tokens, and a profile's
examples and questions hold thousands, so the recognizer is given them ranked:

- a word's weight is how distinctive it is among the profile's topics (each intent and each
  knowledge entry is one topic): ``log(1 + topics / topics that use it)``, counted on
  crude stems ("deliveries", "delivered" -> "deliver"), twice that for a name (a capital
  letter inside a sentence: "PayPal", "Germany") or a knowledge entry's keyword; words
  that carry no topic (function words, the words of conversation,
  ``bot.answers.grounding``) and words shorter than three letters but names ("UK", "PO")
  weigh nothing; a run of capitalized words is one name ("Hong Kong");
- ``phrases``: the examples and questions, in the order a greedy cover picks them: each
  time the phrase whose words not yet covered weigh most for its length (a phrase of a
  topic already picked counts half as much a time), until every weighed word is covered:
  one phrase per topic first in effect, in the operator's own words;
- ``hotwords``: the weighed words themselves, heaviest first (each in its most frequent
  spelling).

A recognizer takes as many as it holds, in order: Whisper tiny.en the phrases, up to 60
tokens of them by default (``serve.asr_whisper.PROMPT_TOKENS``, ``prompt_text``: a list of
the hotwords before them made it hear worse); a recognizer that boosts single words would
take the hotwords. The
vocabulary is plain data (``serve.asr.Vocabulary``) built from the configuration a call
runs with and passed with each request, so a new configuration version is heard by from
its next call, and a recognizer on the Ray tier needs nothing of its own.
"""

from __future__ import annotations

import functools
import heapq
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.answers.grounding import CONVERSATION, FUNCTION, stem
from bot.profile import BotProfile
from serve.asr import Vocabulary

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")
_SENTENCE_END = re.compile(r"[.!?]\s*$")
_NO_TOPIC = FUNCTION | CONVERSATION
#: A name, or a word the operator marked as a keyword, weighs this many times more.
NAME_WEIGHT = 2.0
#: A topic's second phrase counts this much of its cover, its third this squared...
REPEAT_TOPIC = 0.5
#: Words shorter than this carry no topic ("PO" does, as part of the keyword "PO box").
MIN_LETTERS = 3


@dataclass
class _Topic:
    phrases: list[str]
    keywords: list[str] = field(default_factory=list)


def vocabulary(profile: BotProfile) -> Vocabulary:
    """The profile's words ranked for a recognizer's prompt (module docstring)."""
    topics = [_Topic(list(i.examples)) for i in profile.intents]
    topics += [_Topic(list(e.questions), list(e.keywords)) for e in profile.knowledge]
    if not topics:
        return Vocabulary()
    weights, spelling = _weights(topics)
    return Vocabulary(
        phrases=tuple(_cover(topics, weights)),
        hotwords=tuple(
            spelling[s] for s in sorted(weights, key=lambda s: (-weights[s], spelling[s]))
        ),
    )


@functools.lru_cache(maxsize=8192)
def _content(text: str) -> tuple[tuple[str, str], ...]:
    """(stem, word) of ``text``'s words that can carry a topic, a name as written (a run of
    capitalized words inside a sentence is one name: "Hong Kong"), other words in lower
    case."""
    out: list[tuple[str, str]] = []
    name: list[str] = []

    def end_name() -> None:
        if name:
            joined = " ".join(name)
            out.append((joined.lower(), joined))
            name.clear()

    last, first = 0, True
    for match in _WORD.finditer(text):
        word, between = match.group(), text[last : match.start()]
        last = match.end()
        if between.strip():  # punctuation: a name ends there
            end_name()
        starts = first or _SENTENCE_END.search(between) is not None
        first = False
        lower = word.lower()
        capital = word[0].isupper() and (not starts or any(c.isupper() for c in word[1:]))
        if capital and lower != "i":
            name.append(word)
            continue
        end_name()
        if len(lower) >= MIN_LETTERS and lower not in _NO_TOPIC:
            out.append((stem(lower), lower))
    end_name()
    return tuple(out)


def _weights(topics: list[_Topic]) -> tuple[dict[str, float], dict[str, str]]:
    """Each stem's weight, and the spelling it is written in most often."""
    used: Counter[str] = Counter()
    names: set[str] = set()
    spellings: dict[str, Counter[str]] = {}
    for topic in topics:
        stems: set[str] = set()
        for text in topic.phrases:
            for s, word in _content(text):
                stems.add(s)
                spellings.setdefault(s, Counter())[word] += 1
                if word != word.lower():
                    names.add(s)
        for keyword in topic.keywords:
            for s, word in _content(keyword):
                stems.add(s)
                names.add(s)
                spellings.setdefault(s, Counter())[word] += 1
        used.update(stems)
    n = len(topics)
    weights = {
        s: math.log(1.0 + n / count) * (NAME_WEIGHT if s in names else 1.0)
        for s, count in used.items()
    }
    spelling = {s: forms.most_common(1)[0][0] for s, forms in spellings.items()}
    return weights, spelling


def _cover(topics: list[_Topic], weights: dict[str, float]) -> list[str]:
    """The phrases in the order a greedy cover of the weighed words picks them (lazily: a
    phrase's score only falls as words get covered, so a stale score is an upper bound)."""
    stems_of: list[frozenset[str]] = []
    topic_of: list[int] = []
    phrases: list[str] = []
    for t, topic in enumerate(topics):
        for phrase in _unique(topic.phrases):
            phrases.append(phrase)
            topic_of.append(t)
            stems_of.append(frozenset(s for s, _ in _content(phrase)))
    covered: set[str] = set()
    picked: Counter[int] = Counter()

    def score(i: int) -> float:
        new = sum(weights[s] for s in stems_of[i] - covered)
        return new * REPEAT_TOPIC ** picked[topic_of[i]] / (len(phrases[i].split()) + 2)

    heap = [(-score(i), i) for i in range(len(phrases))]
    heapq.heapify(heap)
    order: list[str] = []
    while heap:
        stale, i = heapq.heappop(heap)
        now = score(i)
        if now <= 0.0:
            continue
        if heap and now < -heap[0][0] and now < -stale:
            heapq.heappush(heap, (-now, i))
            continue
        order.append(phrases[i])
        covered |= stems_of[i]
        picked[topic_of[i]] += 1
    return order


def _unique(phrases: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for phrase in phrases:
        key = phrase.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(phrase.strip())
    return out


_last: tuple[BotProfile, Vocabulary] | None = None
_last_lock = threading.Lock()


def vocabulary_of(profile: BotProfile) -> Vocabulary:
    """``vocabulary(profile)``, built once per configuration: the node's calls share one
    profile object until a new configuration version replaces it, which is built anew."""
    global _last  # noqa: PLW0603 - the one configuration a node runs
    with _last_lock:
        if _last is not None and _last[0] is profile:
            return _last[1]
    built = vocabulary(profile)
    with _last_lock:
        _last = (profile, built)
    return built
