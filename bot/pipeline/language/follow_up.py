"""Whether the caller's words go on with the last answer's topic ("and the fast one?").

A follow-up names its topic only in the turn before: "And the fast one?" after the delivery
prices, "What was the standard price again?", "Is that free?". Such words are matched
again joined to the question that was answered; words that carry a request of their own
("What is the weather like today?") never are (joined, they were taken for the turn
before: "As I said, we cannot take card payments over the phone").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.answers.guard import closest_sentence, stems
from bot.answers.small_talk import is_small_talk
from bot.answers.text import sentences, words_of

if TYPE_CHECKING:
    from bot.knowledge.index import KnowledgeIndex, Retrieved
    from serve import StageTimings

#: Longer than this, the words are a request of their own.
MAX_WORDS = 9
_WORD = re.compile(r"[a-z0-9']+")
#: How a follow-up starts: "and ...", "what about ...", "is that ...".
_LEADS = (
    ("and",), ("but",), ("also",), ("or",), ("plus",), ("so",), ("then",),
    ("what", "about"), ("how", "about"), ("what", "if"), ("same", "for"),
    ("is", "that"), ("is", "it"), ("is", "this"), ("are", "they"), ("does", "that"),
    ("does", "it"), ("will", "that"), ("will", "it"), ("would", "that"), ("can", "it"),
)  # fmt: skip
#: Words that point back at what was just said.
_REFERRING = frozenset((
    "it", "it's", "that", "that's", "this", "those", "these", "they", "them", "one", "ones",
    "again", "too", "instead", "else", "either", "same", "other",
))  # fmt: skip


#: Words that carry no topic of their own.
_FUNCTION = frozenset((
    "a", "an", "the", "and", "or", "but", "so", "then", "also", "plus", "what", "about",
    "how", "if", "is", "are", "was", "were", "be", "do", "does", "did", "will", "would",
    "can", "could", "should", "to", "of", "for", "on", "in", "at", "by", "with", "from",
    "i", "you", "we", "me", "my", "your", "our", "there", "please", "just", "much", "many",
    "which", "who", "where", "when", "why", "tell", "know", "say", "said", "again", "more",
    "any", "some", "all", "its", "it's", "what's", "i'm", "i've", "i'd", "i'll", "you're",
    "you've", "not", "no", "yes", "ok", "okay",
)) | _REFERRING  # fmt: skip


def new_words(text: str, context: str) -> list[str]:
    """The words of ``text`` that carry a topic ``context`` (the question answered and its
    answer) does not: "and can I pay by card" after the order status brings "pay" and
    "card"; "and the fast one?" after the delivery prices brings only "fast"."""
    known = set(_WORD.findall(context.lower()))
    out = []
    for word in _WORD.findall(text.lower()):
        if word in _FUNCTION or word in known or word.rstrip("s") in known:
            continue
        out.append(word)
    return out


def topic_words(text: str) -> list[str]:
    """The words of ``text`` that carry a topic (not function words nor pointing back)."""
    return [w for w in _WORD.findall(text.lower()) if w not in _FUNCTION]


def about_last_answer(text: str, answer: str) -> bool:
    """Short words whose every topic word the last answer said: "Is the label free?" after
    "... print the free return label." A request of its own brings a word of its own."""
    words = _WORD.findall(text.lower())
    topics = topic_words(text)
    if not topics or len(words) > MAX_WORDS or is_small_talk(text):
        return False
    return not new_words(text, answer)


def sentence_about(text: str, answer: str) -> str | None:
    """The sentence of ``answer`` that says every topic word of ``text`` (None when no one
    sentence does): what a follow-up about part of the last answer asks for."""
    asked = stems(" ".join(topic_words(text)))
    best, shared = closest_sentence(answer, asked)
    return best if best is not None and shared == len(asked) else None


#: Words asking for something the bot already said: "what was the price again?", "how long
#: did you say I have?", "remind me of the fee".
_RECALL = re.compile(
    r"\b(?:again|did you (?:just )?say|you (?:just )?(?:said|mentioned|told me)|remind me)\b"
)


#: Words that name a kind of detail an answer gives (an amount, a time or a length of time,
#: one of its options, a list) rather than a topic: "what was the normal *price* again?",
#: "how *long* did you say?", "which *countries* was it?".
_DETAIL = frozenset((
    "price", "prices", "cost", "costs", "fee", "fees", "charge", "charges", "amount", "total",
    "long", "days", "day", "weeks", "week", "hours", "hour", "minutes", "time", "times",
    "deadline", "date", "until", "soon", "option", "options", "cheap", "cheaper",
    "cheapest", "fast", "faster", "fastest", "quick", "quicker", "quickest", "slow", "normal",
    "standard", "regular", "usual", "basic", "countries", "places", "step", "steps", "first",
    "next", "last",
))  # fmt: skip
#: Words around such a request that carry no topic either: "sorry, how long did you say I
#: *had*?", "can you *remind* me what it *takes*?".
_ASIDE = frozenset((
    "sorry", "have", "has", "had", "get", "got", "take", "takes", "took", "need", "mentioned",
    "told", "remind", "think", "thought", "wait", "hang", "on", "like", "mean", "meant",
    "lasts", "lasted",
))  # fmt: skip


def asks_again(text: str, context: str) -> bool:
    """Short words asking to hear part of what was said before, in ``context`` (the
    question answered and its answer): "Sorry, what was the normal price again?", "How
    long did you say I have?". They may name the detail in words of their own ("normal" for
    the answer's "standard"), but only words for a kind of detail: "What's your phone number
    again?" asks for something the answer did not say."""
    words = _WORD.findall(text.lower())
    if not words or len(words) > MAX_WORDS or is_small_talk(text):
        return False
    if _RECALL.search(" ".join(words)) is None:
        return False
    return all(word in _DETAIL or word in _ASIDE for word in new_words(text, context))


#: Words a caller may use for one of an answer's options, and the words an answer may say it
#: with: "the fast one", "the quick one" for "Express delivery ..."; "the normal price" for
#: "Standard delivery ...".
_SAME = (
    words_of("fast faster fastest quick quicker quickest express expedited rush speedy"),
    words_of("normal standard regular usual basic ordinary slow slower slowest"),
)
#: What a sentence says to state an amount, a length of time, a time of day or of the week.
_AMOUNT = words_of(
    "cost costs price prices fee fees charge charges dollar dollars cent cents pound pounds "
    "euro euros free"
)
_LENGTH = words_of("minute minutes hour hours day days week weeks month months year years")
_CLOCK = words_of(
    "morning afternoon evening noon midnight am pm monday tuesday wednesday thursday friday "
    "saturday sunday weekday weekdays weekend weekends"
)
#: Words for which of an answer's options or steps: they name no detail of their own.
_ORDER = words_of("first next last step steps option options")
_DAYS = words_of("day days monday tuesday wednesday thursday friday saturday sunday")
#: The words a caller names a kind of detail with, and what a sentence that gives it says:
#: "what was the *price* again?" asks for a sentence with an amount, "how *long* did you
#: say?" for one with a length of time, "how many *weeks*?" for one in weeks, "what were
#: the *hours*?" for one with a time of day (not "a 1 year warranty").
_KINDS: dict[str, frozenset[str]] = {
    **dict.fromkeys(
        ("price", "prices", "cost", "costs", "fee", "fees", "charge", "charges", "amount",
         "total", "much", "cheap", "cheaper", "cheapest", "expensive"),
        _AMOUNT,
    ),
    **dict.fromkeys(("long", "soon"), _LENGTH),
    **dict.fromkeys(("time", "times", "deadline", "until", "date"), _LENGTH | _CLOCK),
    **dict.fromkeys(("hour", "hours"), _CLOCK | {"hour", "hours"}),
    **dict.fromkeys(("day", "days"), _DAYS),
    **{unit: words_of(f"{unit.rstrip('s')} {unit.rstrip('s')}s")
       for unit in ("minute", "minutes", "week", "weeks", "month", "months", "year", "years")},
}  # fmt: skip


def _same(word: str) -> frozenset[str]:
    """The words of the same option as ``word`` (``_SAME``), none when it names none."""
    return next((kind for kind in _SAME if word in kind), frozenset())


def unsaid(text: str, context: str) -> list[str]:
    """The topic words of ``text`` that ``context`` (a question answered and its answer)
    says neither as written, nor in a word for the same option, nor (a word for a kind of
    detail) in a word that gives one: "and the fast one?" after the delivery prices ("...
    Express delivery costs ...") brings none, after the opening hours "fast"."""
    said = set(_WORD.findall(context.lower()))
    return [
        word
        for word in new_words(text, context)
        if word not in _ASIDE
        and not _same(word) & said
        and not _KINDS.get(word, frozenset()) & said
    ]


def sentences_asked(text: str, answer: str, question: str = "") -> str | None:
    """The sentences of ``answer`` (to ``question``) that words asking for part of it again
    (``asks_again``) ask for: those that give every kind of detail the words name (an
    amount for "price", a length of time for "how long"), in the answer's word for the
    option they name ("normal" for "Standard ...") and with every other word of theirs the
    answer says; the whole answer when the words name nothing of it. None: no sentence
    gives what they ask for, or they name a thing neither the answer nor its question said
    ("which countries was it?" after the delivery prices)."""
    known = stems(answer)
    topic = stems(question)
    needs: list[frozenset[str]] = []
    topics: set[str] = set()
    said = _WORD.findall(text.lower())
    for at, word in enumerate(said):
        if _same(word):
            needs.append(_same(word))
        elif at and said[at - 1] == "many" and word in _KINDS:
            # A count: "how many days" asks for days, not for weekdays.
            needs.append(frozenset((word, word.rstrip("s"), f"{word.rstrip('s')}s")))
        elif word in _KINDS:
            needs.append(_KINDS[word] | {word})
        elif word in _FUNCTION or word in _ASIDE or word in _ORDER:
            continue
        elif stems(word) <= known:
            topics |= stems(word)
        elif not stems(word) <= topic:
            return None
    kept = [
        sentence
        for sentence in sentences(answer)
        if all(need & set(_WORD.findall(sentence.lower())) for need in needs)
        and topics <= stems(sentence)
    ]
    return " ".join(kept) if kept else None


def is_follow_up(text: str) -> bool:
    """Short words that lead like a follow-up or point back at the last answer."""
    return _follow_up_words(text) is not None


def _follow_up_words(text: str) -> list[str] | None:
    """The words of ``text`` if they read as a follow-up (``is_follow_up``), else None."""
    words = _WORD.findall(text.lower())
    if not words or len(words) > MAX_WORDS or is_small_talk(text):
        return None
    if _leads(words) or any(word in _REFERRING for word in words):
        return words
    return None


def _leads(words: list[str]) -> bool:
    return any(tuple(words[: len(lead)]) == lead for lead in _LEADS)


def follows_up(text: str, context: str) -> bool:
    """Whether short words go on with the topic of ``context`` (the question answered and
    its answer), to be matched joined to that question: words that lead like a follow-up
    and bring at most one topic word of their own ("and the fast one?", "what about
    Sunday?"), or that only point back at it and name no thing of their own but a kind of
    detail or an aside ("how much is that one?", "was that the cheapest?"). Words that
    only point back and name a thing of their own are a statement or a request of their
    own ("It's possible.", heard in a caller's pause; "Can I return it?"): joined to a
    question, they matched it and got its answer again."""
    words = _follow_up_words(text)
    if words is None:
        return False
    own = new_words(text, context)
    if _leads(words):
        return len(own) <= 1
    return _only_details(own)


def joins_words_before(text: str, previous: str) -> bool:
    """Whether words that retrieve nothing alone are retrieved joined to ``previous``, the
    caller's words before: words that lead like a follow-up ("and to a PO box?"), that
    ask about what they point back at ("what's the most I can load on one?"), or that only
    point back and name no thing of their own but a kind of detail. A statement that
    points back and names a thing of its own is not: "It's all your number" (a caller's
    "It's order number |", heard in the pause), joined to "How long does a refund take?",
    got the refund entry again."""
    words = _follow_up_words(text)
    if words is None:
        return False
    return (
        _leads(words)
        or text.rstrip().endswith("?")
        or words[0] in _ASKING
        or _only_details(new_words(text, previous))
    )


#: How a question starts.
_ASKING = frozenset((
    "what", "what's", "how", "how's", "which", "when", "where", "where's", "who", "why",
    "can", "could", "do", "does", "did", "is", "are", "was", "were", "will", "would",
    "should", "may", "has", "have",
))  # fmt: skip


def _only_details(words: list[str]) -> bool:
    return all(word in _DETAIL or word in _ASIDE for word in words)


async def retrieve_following(
    index: KnowledgeIndex,
    text: str,
    previous: str | None,
    *,
    timings: StageTimings | None = None,
) -> tuple[list[Retrieved], str]:
    """The entries for the caller's words and the words they were retrieved for, as the
    responder retrieves: the words alone or, when they retrieve nothing and read as a
    follow-up (``joins_words_before``), joined to ``previous`` (the caller's words before;
    None: nothing to join).
    The embedder's errors are the caller's to handle."""
    found = await index.retrieve(text, timings=timings)
    if found or not previous or not joins_words_before(text, previous):
        return found, text
    asked = f"{previous} {text}"
    return await index.retrieve(asked, timings=timings), asked
