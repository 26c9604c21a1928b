"""The two-choice question: when two intents (or knowledge entries) are near the caller's
words, one question offers both ("Is this about booking an appointment, or about an
emergency?"), and the caller's answer is read here.

``read_choice`` understands "the first (one)", "the second / last / other one", "the former
/ latter", "number two", "neither", "none of those", a plain "no" (``neither``), the keypad
(``KEY_CHOICES``: 1 the first, 2 the second), and either choice's words: only the words the
other choice lacks count, first those of the topic and name (and an entry's keywords), then,
when those do not tell, those of the examples (an entry's questions) too. Its answers:

- ``first`` / ``second``: the caller chose.
- ``neither``: the caller said it is neither (the honest decline follows, not a guess).
- ``ambiguous``: an answer that chooses nothing: "yes", "both", "either", "not sure", or
  words both choices share. The caller is to be asked again, once; a second
  ``ambiguous`` is taken as ``neither``.
- None: not an answer to the question: words that name something neither choice holds
  ("No, I want to know about delivery"), to be handled as a new turn.
"""

from __future__ import annotations

import re
from typing import Literal

from bot.answers.grounding import Vocabulary, key_words, stem
from bot.answers.text import words_of
from bot.intents.match import normalize
from bot.intents.topic import topic_of, topic_of_entry
from bot.profile import BotProfile, IntentConfig, KnowledgeEntry

Choice = Literal["first", "second", "neither", "ambiguous"] | None
#: What a choice can be given as: the intent, the knowledge entry, or its spoken topic.
Choosable = IntentConfig | KnowledgeEntry | str
#: Keypad answers to the two-choice question: 1 the first, 2 the second.
KEY_CHOICES: dict[str, Choice] = {"1": "first", "2": "second"}
#: An answer longer than this that holds an ordinal ("the first one, ...") and words
#: neither choice holds is a new request.
MAX_WORDS = 6

_ORDINALS: tuple[tuple[str, Literal["first", "second"]], ...] = (
    (r"not (?:the )?first(?: one)?", "second"),
    (r"not (?:the )?(?:second|last|other)(?: one)?", "first"),
    (r"(?:the )?first(?: one)?", "first"),
    (r"(?:the )?former", "first"),
    (r"(?:number|option|press(?:ed)?) (?:one|1)", "first"),
    (r"(?:the )?(?:second|last|latter|other)(?: one)?", "second"),
    (r"(?:number|option|press(?:ed)?) (?:two|2)", "second"),
)
#: Words around a short answer that change nothing ("the first one, please").
_POLITE = words_of(
    """the please thanks thank you it's its it is that's that was i'd i i'm say said mean
    meant like want about well um oh ok okay yes yeah sorry number option"""
)
_NEITHER = (
    r"neither", r"none of (?:those|them|these|it|the two)", r"none", r"something else",
    r"not (?:really|quite|either|those|them|any)", r"nothing like that", r"no", r"nope",
    r"nah", r"wrong", r"another thing",
)  # fmt: skip
_YES = frozenset({"yes", "yeah", "yep", "yup", "ya", "yea", "sure", "correct", "right",
                  "ok", "okay", "absolutely", "definitely", "exactly", "please"})  # fmt: skip
_UNSURE = (r"both", r"either(?: one)?", r"(?:i'm )?not sure", r"i don't know", r"dunno",
           r"maybe", r"whichever", r"any of them", r"doesn't matter")  # fmt: skip
#: Words of the answer itself, never a topic's: "the other one", "option two".
_ANSWER_WORDS = frozenset({"first", "second", "last", "former", "latter", "option",
                           "number", "press", "pressed", "none", "nothing", "wrong",
                           "neither", "either", "both", "sure", "dunno", "whichever",
                           "matter", "maybe", "another", "nah", "nope"})  # fmt: skip
_ANSWER_STEMS = frozenset(stem(w) for w in _ANSWER_WORDS)


def choice_question(first_topic: str, second_topic: str) -> str:
    """The question that offers two topics: "Is this about booking an appointment, or
    about an emergency?": the first topic's first half, a space, the second's second half
    (``choice_halves``)."""
    return f"{choice_halves(first_topic)[0]} {choice_halves(second_topic)[1]}"


def choice_halves(topic: str) -> tuple[str, str]:
    """The two halves of a two-choice question that ``topic`` can fill: as the first
    choice ("Is this about booking an appointment,") and as the second ("or about
    booking an appointment?"). Each is synthesized at start, so that a question no call
    has asked yet is played from its halves (``bot.pipeline.prompts``) instead of being
    synthesized while its caller waits."""
    return f"Is this about {topic},", f"or about {topic}?"


def choice_topics(profile: BotProfile) -> list[str]:
    """The spoken topic of every intent and knowledge entry of ``profile``, each once."""
    topics = [topic_of(i) for i in profile.intents] + [topic_of_entry(e) for e in profile.knowledge]
    return list(dict.fromkeys(topics))


def all_choice_halves(profile: BotProfile) -> list[str]:
    """Both halves of the question for every topic of ``profile`` (``choice_topics``): any
    two-choice question it can ask, made of ready phrases."""
    return [half for topic in choice_topics(profile) for half in choice_halves(topic)]


def choice_topic(choice: Choosable) -> str:
    """The spoken topic of an intent, a knowledge entry or a topic given as is."""
    if isinstance(choice, IntentConfig):
        return topic_of(choice)
    if isinstance(choice, KnowledgeEntry):
        return topic_of_entry(choice)
    return choice


def read_choice(text: str, first: Choosable, second: Choosable) -> Choice:
    """What the caller's ``text`` answers to the two-choice question about ``first`` and
    ``second`` (see the module's description): ``first``, ``second``, ``neither``,
    ``ambiguous``, or None for a new request."""
    said = normalize(text)
    if not said:
        return None
    words = said.split()
    core = [w for w in words if w not in _POLITE]
    if len(core) == 1 and core[0] in ("1", "2", "one", "two"):
        return KEY_CHOICES["1" if core[0] in ("1", "one") else "2"]
    keys = [k for k in key_words(said) if k not in _ANSWER_STEMS]
    names = _vocabulary(first, named=True), _vocabulary(second, named=True)
    alls = _vocabulary(first), _vocabulary(second)
    foreign = [k for k in keys if k not in alls[0] and k not in alls[1]]
    ordinal = _ordinal(said)
    if ordinal is not None and (not foreign or len(words) <= MAX_WORDS):
        return ordinal
    shared = {k for k in keys if k in alls[0] and k in alls[1]}
    for vocab in (names, alls):
        a = {k for k in keys if k in vocab[0] and k not in vocab[1]}
        b = {k for k in keys if k in vocab[1] and k not in vocab[0]}
        a, b = _negated(said, a, b)
        if len(a) != len(b) and (vocab is names or len(foreign) <= len(a | b)):
            return "first" if len(a) > len(b) else "second"
        if (a or b) and vocab is alls:
            return "ambiguous" if len(a) == len(b) else None
    if foreign:
        return None  # words of something else: a new request
    if _has(said, _NEITHER):
        return "neither"
    if shared or _has(said, _UNSURE) or any(w in _YES for w in words):
        return "ambiguous"
    return None


def _vocabulary(choice: Choosable, *, named: bool = False) -> Vocabulary:
    """The choice's words: its topic and name (``named``), or those with its examples (an
    entry's questions and keywords)."""
    texts = [choice_topic(choice)]
    if isinstance(choice, IntentConfig):
        texts.append(choice.name.replace("_", " "))
        texts += [] if named else choice.examples
    elif isinstance(choice, KnowledgeEntry):
        texts += [choice.topic.replace("_", " "), *choice.keywords]
        texts += [] if named else choice.questions
    return Vocabulary(texts)


def _negated(said: str, a: set[str], b: set[str]) -> tuple[set[str], set[str]]:
    """Key words after "not" count for the other choice: "not the emergency" (of two)
    chooses the first."""
    after_not = set()
    for m in re.finditer(r"\bnot (?:the |an? |about )?(\S+)(?: (\S+))?", said):
        after_not |= set(key_words(" ".join(g for g in m.groups() if g)))
    return (a - after_not) | (b & after_not), (b - after_not) | (a & after_not)


def _ordinal(said: str) -> Literal["first", "second"] | None:
    for pattern, which in _ORDINALS:
        if re.search(rf"(?<!\S){pattern}(?!\S)", said):
            return which
    return None


def _has(said: str, patterns: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<!\S){p}(?!\S)", said) for p in patterns)
