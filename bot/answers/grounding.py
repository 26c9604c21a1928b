"""Which words of a sentence carry what it is about, and whether a text holds them.

The guard's fact words catch numbers, prices and a list of policy words; a sentence such as
"We offer financing." states a policy in words no list can hold. So a generated sentence's
key words (what is left once the word classes that carry no topic are taken out: function
words, the words of conversation, generic verbs) must be found in what the bot may rely on,
folded crudely so that "deliver", "delivery" and "delivered" meet. The same key words tell
whether an entry is about what the caller asked (``on_topic``).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Collection, Iterable, Sequence

from bot.answers.text import SCALES, TENS, UNITS, words, words_of

#: Words that carry no topic: pronouns, determiners, prepositions, conjunctions, auxiliaries,
#: negations and degree words.
FUNCTION = words_of(
    """a an the i i'm i'll i've i'd me my mine myself you you're you'll you've you'd your
    yours yourself we we're we'll we've we'd us our ours it it's its they they're they'll
    them their he she him her his this that that's these those there there's here what
    what's which who whom whose when where why how if then than so as and or but nor of to
    in on at by for from with without about into onto over under up down out off after
    before until till within between through via per be is am are was were been being do
    does did doing done have has had having can can't cannot could couldn't will won't would
    wouldn't shall should shouldn't may might must not no yes yeah yep nope don't doesn't
    didn't isn't aren't wasn't weren't haven't hasn't hadn't all any some every each other
    another more most much many few lot lots also just only even still already too very
    really quite again once both either neither such own same one ones s t"""
)
#: Words of conversation: politeness, hedges, requests and generic verbs. They say nothing
#: the caller could act on, whatever the sentence is about.
CONVERSATION = words_of(
    """please thanks thank welcome hello hi hey sure okay ok well oh great glad happy sorry
    question questions help helping know knowing think like want wanting wish let tell
    telling say saying said ask asking asked mean understand hear see look looking check
    find moment anything something everything nothing thing things way course certainly
    absolutely definitely kind sort bit get getting got make making made take taking took
    give giving go going gone come coming use using able possible need needed wondering
    wonder hope right now today actually maybe perhaps probably fine good nice instead
    else goes gets takes makes gives comes uses helps needs wants likes knows thinks says
    asks tells looks checks finds hopes means afraid apologies apologise apologize loss
    condolences sympathy inconvenience confusion misunderstanding"""
)
_NUMBERS = frozenset({*UNITS, *TENS, *SCALES})
_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ed", "es", "s",
             "ly")  # fmt: skip
#: A shorter stem than this never matches a longer one by prefix ("ord" is not "order").
_PREFIX_MIN = 4
#: How many letters a stem may have beyond another that is its prefix and still match.
_PREFIX_SLACK = 3


def stem(word: str) -> str:
    """``word`` folded crudely: lower case, one inflection off, a final e or y dropped
    ("deliveries", "delivery", "delivered" -> "deliver"; "payment" -> "pay")."""
    w = word.lower().removesuffix("'s")
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            if suffix == "s" and w.endswith("ss"):
                continue
            w = w[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            break
    if len(w) > 3 and w[-1] in "ey":
        w = w[:-1]
    return w


#: Every form of the words above: "ways" folds onto "way".
_STOP = FUNCTION | CONVERSATION | _NUMBERS
_STOP_STEMS = frozenset(stem(w) for w in _STOP)


def key_words(text: str, *, ignore: Iterable[str] = ()) -> list[str]:
    """The stems of ``text``'s words that carry its topic, in order (numbers left out: the
    guard's fact check holds them). ``ignore``: words that never count (the business's
    name)."""
    return [k for k in _adjacent_keys(text, ignore) if k]


def _match(a: str, b: str) -> bool:
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return (
        len(short) >= _PREFIX_MIN
        and long_.startswith(short)
        and len(long_) - len(short) <= _PREFIX_SLACK
    )


class Vocabulary:
    """The stems of some texts, for asking whether a key word is among them."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._stems = {stem(w) for t in texts for w in words(t)}

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and any(_match(key, s) for s in self._stems)

    def missing(self, keys: Iterable[str]) -> list[str]:
        """The keys this vocabulary does not hold, each once, in order."""
        out: list[str] = []
        for k in keys:
            if k not in self and k not in out:
                out.append(k)
        return out


def on_topic(
    question: str,
    entry: Sequence[str],
    *,
    common: Collection[str] = frozenset(),
    ignore: Iterable[str] = (),
) -> bool:
    """Whether an entry (its texts: topic, questions, answer, keywords) is about what
    ``question`` asks, as far as its words tell.

    Retrieval scores meaning, and a shared word can carry a wrong entry over the line:
    "Do you do gift wrapping?" is near "Do you sell gift cards?". A question with key words
    the entry lacks is not about it when the words it shares are all ``common`` ones (stems
    found in many entries, such as "order": they name no one topic), or when a shared word
    that is not common is followed at once by one the entry lacks ("gift wrapping", "pay
    later", "time slot": a thing the entry does not name). A question that shares no key
    word was retrieved on meaning alone, and is trusted; so is one the entry holds whole."""
    keys = _adjacent_keys(question, ignore)
    vocabulary = Vocabulary(entry)
    missing = set(vocabulary.missing(k for k in keys if k))
    shared = {k for k in keys if k and k not in missing}
    if not shared or not missing:
        return True
    telling = {k for k in shared if k not in common}
    if not telling:
        return False
    return not any(a in telling and b in missing for a, b in itertools.pairwise(keys))


def common_stems(entries: Sequence[Sequence[str]]) -> frozenset[str]:
    """The stems found in a quarter of the entries or more (in two at least): words such as
    "order" that name no one entry's topic."""
    counts: Counter[str] = Counter()
    for texts in entries:
        counts.update({stem(w) for t in texts for w in words(t)})
    least = max(2.0, len(entries) / 4)
    return frozenset(s for s, n in counts.items() if n >= least)


def _adjacent_keys(text: str, ignore: Iterable[str]) -> list[str]:
    """The stems of ``text``'s words in order, a non-key word as an empty gap."""
    skip = {w.lower() for w in ignore}
    out: list[str] = []
    for w in words(text):
        s = stem(w)
        key = not (w in _STOP or w in skip or w[0].isdigit() or len(w) < 2 or s in _STOP_STEMS)
        out.append(s if key else "")
    return out
