"""Whether the caller's words so far are a finished thought: what ends a turn at a pause.

Whisper puts a full stop after any fragment it is given ("I'd like to change."), so its
punctuation alone does not say that a caller has finished. What the words say does: a
dangling "is", "if", "to" or "my", "tell me", a verb still missing its object, a number
being read out with digits still to come, or "hold on" (the caller is looking something
up). ``judge`` reads them from the transcript of the turn so far, made while the caller
pauses (``bot.pipeline.speculation``); the endpointer waits longer on an unfinished
thought and ends a finished one early.

The acoustic end-of-turn classifier Smart Turn v3.2 was measured on 8 kHz telephone
speech and scored mid-sentence fragments as finished (0.90-0.96); it is not used.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from bot.callflow import CollectorConfig
from bot.pipeline.language.spoken_digits import spoken_digits

#: ``finished``: a whole request, end the turn after a short silence; ``unfinished``: the
#: caller is mid-thought, keep listening; ``hold``: the caller asked for time ("hold on");
#: ``open``: nothing says either way (no words, no final punctuation).
Thought = Literal["finished", "unfinished", "hold", "open"]

_WORD = re.compile(r"[a-z0-9']+")
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
_CLAUSE = re.compile(r"[.?!,;:]+")

# fmt: off
#: Words after which a sentence cannot end: articles, possessives, conjunctions, subject
#: pronouns, hesitations.
_DANGLING = frozenset((
    "a", "an", "the", "and", "or", "but", "because", "if", "whether", "unless", "although",
    "than", "my", "your", "our", "their", "its", "his", "i", "we", "they", "he", "she",
    "um", "uh", "er", "erm", "hmm", "also", "very", "really", "just", "plus", "either",
))
#: Words that end a question whose object or complement came first ("what time it is",
#: "who am I talking to", "what do you want") but a statement that is still going ("my
#: order number is", "I'm calling about", "I want").
_AUX = frozenset((
    "is", "are", "was", "were", "am", "be", "been", "being", "do", "does", "did", "have",
    "has", "had", "will", "would", "can", "could", "should", "may", "might", "must", "shall",
))
_PREP = frozenset((
    "to", "of", "for", "from", "with", "without", "about", "in", "on", "at", "by", "as",
    "into", "onto", "via", "per", "until", "regarding",
))
#: Verbs a caller's request goes on after ("I'd like to change ...", "can you check ...").
_TRANSITIVE = frozenset((
    "change", "update", "cancel", "check", "book", "know", "ask", "get", "send", "give",
    "tell", "find", "make", "track", "reset", "report", "add", "remove", "buy", "arrange",
    "confirm", "move", "modify", "amend", "exchange", "renew", "replace", "schedule",
    "reschedule", "request", "see", "have", "need", "want", "like", "order", "discuss",
    "speak", "talk", "enquire", "inquire", "query", "return", "use", "pay", "put",
))
#: What comes before such a verb when the request is still going.
_VERB_LEAD = frozenset((
    "to", "you", "i", "we", "please", "can", "could", "would", "i'd", "we'd", "i'll",
    "we'll", "just", "also", "and", "or", "i'm", "me", "wanna", "gonna",
))
#: "tell me", "give me": the thing told or given is still to come ("can you call me" is not).
_ME_VERBS = frozenset(("tell", "give", "show", "send", "let", "remind", "get", "bring", "find"))
#: A particle that ends a phrasal verb ("log in", "sign up", "check in"), not a preposition.
_PARTICLE_VERBS = frozenset((
    "log", "logged", "sign", "signed", "check", "checked", "turn", "switch", "come", "go",
    "get", "put", "carry", "move", "plug", "drop", "pick", "set", "hang", "call", "hold",
    "stop", "pop", "swing",
))
#: Of those, the verbs that cannot end a sentence without their object unless a wh-word
#: was it ("what do I need?"): "how do I pay?" is whole, "where can I find?" is not.
_NEEDS_OBJECT = frozenset((
    "change", "update", "get", "send", "give", "tell", "find", "make", "track", "reset",
    "add", "remove", "buy", "arrange", "move", "modify", "amend", "exchange", "renew",
    "replace", "request", "need", "want", "like", "discuss", "query", "use", "put",
))
#: Words before a "to" that starts a verb still to come ("able to", "how to"), not a
#: preposition whose object came first ("who am I talking to").
_INFINITIVE_LEAD = frozenset((
    "able", "unable", "going", "gonna", "trying", "try", "hoping", "planning", "supposed",
    "allowed", "meant", "want", "wants", "wanted", "need", "needs", "like", "love", "how",
    "what", "where", "when", "whether",
))
#: Verbs in the past that a caller's story goes on after ("Last week I ordered | a lamp
#: ..."), unless their object came first ("the lamp I ordered").
_PAST_OBJECT = frozenset(("ordered", "bought", "purchased", "received"))
#: Words that show an object before the subject ("the lamp I ordered", "something I bought").
_OBJECT_FIRST = frozenset((
    "the", "a", "an", "this", "that", "these", "those", "something", "everything",
    "anything", "one", "item", "items", "stuff", "thing", "things",
))
#: Words that start a turn but are none ("Right, okay, so | what time do you close?").
_MARKERS = frozenset((
    "right", "okay", "ok", "alright", "so", "well", "now", "oh", "um", "uh", "er", "erm",
    "hmm", "ah", "and",
))
_WH = frozenset(("what", "where", "when", "which", "who", "whom", "whose", "how", "why"))
_WH_OBJECTS = frozenset(("what", "where", "which", "who", "whom", "whose"))
#: Words that belong to the wh-word before them ("how much", "what time").
_WH_TAIL = frozenset(("much", "many", "long", "far", "often", "soon", "old", "big"))
_REPLY = frozenset(("yes", "yeah", "yep", "no", "nope", "nah", "okay", "ok", "sure"))
_HESITATIONS = frozenset(("um", "uh", "er", "erm", "hmm", "oh", "well", "ah"))
#: First words of a reply to an offer ("yes please", "no thanks", "not really").
_ANSWER_LEAD = _REPLY | {"yup", "please", "absolutely", "definitely", "correct", "alright", "not"}
_SUBJECTS = frozenset(("i", "it", "we", "you", "they", "he", "she"))
_PRONOUNS = frozenset(("i", "it", "we", "you", "they", "he", "she", "that", "there", "not"))
#: Words of a caller who did not hear the bot, before a bare "what?" ("sorry, what?").
_REPAIR_LEAD = frozenset(("sorry", "pardon", "excuse", "me", "huh", "eh"))
#: Words that say the caller means a number, so one digit is already a number read out.
_NUMBER_WORDS = frozenset((
    "number", "code", "pin", "account", "postcode", "zip", "phone", "reference",
    "card", "digits", "id",
))
#: Digit words and figures, and what joins them when a number is read out.
_DIGITISH = frozenset((
    "zero", "oh", "o", "nought", "one", "two", "three", "four", "five", "six", "seven",
    "eight", "nine", "double", "triple", "to", "too", "for",
))
# fmt: on

#: "Hold on", "just a second", "let me find it": the caller asked for time.
_HOLD = re.compile(
    r"^(?:(?:um|uh|er|erm|oh|okay|ok|so|yeah|yes|right|sorry|please)\s+)*"
    r"(?:hold on|hang on|hold on a (?:sec|second|moment|minute)|wait|wait a (?:sec|second|moment"
    r"|minute)|(?:just |one |a )?(?:sec|second|moment|minute|mo)|(?:just )?(?:a|one) (?:sec|second"
    r"|moment|minute)|give me (?:a|one) (?:sec|second|moment|minute)|bear with me|let me think"
    r"|let me (?:just )?(?:find|check|look|get|grab|see|fetch|dig)\b.*)"
    r"(?:\s+(?:please|then|now|okay|ok))*$"
)


@dataclass(frozen=True)
class Digits:
    """How long a number the caller may be reading out is: ``minimum`` digits at least,
    ``maximum`` at most (``None``: no known limit); ``asked`` when a collector is taking it."""

    minimum: int
    maximum: int | None = None
    asked: bool = False


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("’", "'"))


def _sentences(text: str) -> list[str]:
    """``text``'s sentences (split after a final mark), those with words only."""
    return [s for s in _SENTENCE_END.split(text) if _words(s)]


def _clauses(text: str) -> list[str]:
    return [" ".join(_words(c)) for c in _CLAUSE.split(text) if _words(c)]


def is_hold(clause: str) -> bool:
    """True for a clause that asks for time ("hold on", "one moment please")."""
    return _HOLD.match(" ".join(_words(clause))) is not None


def strip_hold(text: str) -> str:
    """``text`` without its clauses that only ask for time: what the caller asked for.

    "Hold on, let me find it. It's four five six." -> "It's four five six."
    """
    parts = re.split(r"(?<=[.?!,;:])\s+", text.strip())
    kept = [p for p in parts if not is_hold(p)]
    out = " ".join(kept).strip()
    return out[:1].upper() + out[1:] if out and out != text.strip() else out


def _trailing_number(words: list[str]) -> str | None:
    """The digits of the number the words end with, if they end with one."""
    start = len(words)
    while start > 0 and (words[start - 1].isdigit() or words[start - 1] in _DIGITISH):
        start -= 1
    if start == len(words):
        return None
    return spoken_digits(" ".join(words[start:]))


def _wh_before(words: list[str], wh: frozenset[str] = _WH) -> bool:
    """A wh-word earlier in the sentence, with words of its own between it and the last
    word: the question's object came first ("where my parcel is"), not "how much is"."""
    for i in range(len(words) - 2, -1, -1):
        if words[i] in wh:
            between = [w for w in words[i + 1 : -1] if w not in _WH_TAIL]
            return bool(between)
    return False


def _loops(previous: list[str], words: list[str]) -> bool:
    """``words`` say ``previous`` again, garbled: most of them are its words."""
    if len(words) < 3:
        return False
    return sum(w in previous for w in words) / len(words) >= 0.6


def _dangles(words: list[str], question: bool = False) -> bool:
    """The sentence's last word leaves it unfinished (``question``: it ends with "?")."""
    last = words[-1]
    before = words[-2] if len(words) > 1 else ""
    if last in _DANGLING or all(w in _SUBJECTS for w in words):
        return True  # "You": what Whisper makes of words it cannot hear
    if last in _WH and len(words) > 1 and last != "why":
        # "Sorry, what?" asks the bot to say it again; "can you tell me what" is not done.
        return not (question and all(w in _REPAIR_LEAD for w in words[:-1]))
    if last == "me" and before in _ME_VERBS:
        return True
    if last in _AUX:
        reply = len(words) <= 3 and all(w in _REPLY | _PRONOUNS | _AUX for w in words)
        return not (reply or _wh_before(words))
    if last == "to" and before in _INFINITIVE_LEAD:
        return True  # "what would you be able to", "I'm trying to", "how to"
    if last in _PREP:
        if last in ("in", "on", "by", "over") and before in _PARTICLE_VERBS:
            return False
        # "who am I talking to", "where is it from": the wh-word is the preposition's
        # object; "how long does it take to" has none. "Is there a human I can talk to?":
        # a whole yes-or-no question whose object came first.
        whole_question = question and words[0] in _AUX and len(words) >= 5
        return not (whole_question or _wh_before(words, _WH_OBJECTS))
    if last in _PAST_OBJECT and before in _VERB_LEAD:
        subject = len(words) - 2
        return not (_wh_before(words) or any(w in _OBJECT_FIRST for w in words[:subject]))
    if last in _TRANSITIVE and before in _VERB_LEAD:
        if last in _NEEDS_OBJECT:
            # Only an object's wh-word ("what", "how much") can be the verb's object.
            return not (_wh_before(words, _WH_OBJECTS - {"where"}) or _how_much(words))
        return not _wh_before(words)
    return False


def _how_much(words: list[str]) -> bool:
    """A "how much", "how many" or "how long" asked about: what the verb takes."""
    return any(a == "how" and b in _WH_TAIL for a, b in itertools.pairwise(words))


def judge(text: str, digits: Digits | None = None) -> Thought:
    """What the caller's words so far say about the end of their turn.

    ``digits``: the length of a number the caller may be reading out (the collector under
    way, or the shortest number the profile collects).
    """
    stripped = text.strip()
    clauses = _clauses(stripped)
    if not clauses:
        return "open"
    if is_hold(clauses[-1]):
        return "hold"
    sentences = _sentences(stripped)
    if len(sentences) > 1 and _loops(_words(sentences[-2]), _words(sentences[-1])):
        # Whisper looping on a short question ("And you connect me to a live agent. And you
        # can next me to"): the sentence before is what was said.
        stripped = " ".join(sentences[:-1]).strip()
        sentences = sentences[:-1]
    words = _words(sentences[-1])
    number = _trailing_number(words)
    if number is not None and digits is not None:
        meant = digits.asked or len(number) >= 2 or any(w in _NUMBER_WORDS for w in words)
        if meant and len(number) < digits.minimum:
            return "unfinished"  # digits still to come: pauses between groups are normal
        if digits.maximum is not None and len(number) >= digits.maximum:
            return "finished"
    if stripped.endswith(("...", "…", ",", "-", ":", ";")):
        return "unfinished"
    said = _words(" ".join(sentences))
    if all(w in _MARKERS for w in said) and (len(said) > 1 or said[0] not in _REPLY):
        # "Right, okay", "So.": how a request starts; "Okay." alone may be a reply. Across
        # the recognizer's sentence breaks too: "Right? Okay." is the same two words.
        return "unfinished"
    if _dangles(words, question=stripped.endswith("?")):
        return "unfinished"
    return "finished" if stripped[-1] in ".?!" else "open"


#: Below this share of words in common (difflib's ratio over the word lists), two
#: recognizers made different sentences of the same audio. Measured on espeak-ng requests
#: and flite questions over G.711 through tiny.en and base: a fragment misheard as a
#: sentence by both ("What can not you" and "What time do you have?" for "What time does
#: your") at 0.44; most whole requests heard by both at 0.6-1.0.
AGREEMENT = 0.5


def heard_alike(first: str, second: str) -> bool:
    """Whether two recognizers' words for the same audio are much the same sentence.

    When they are not, neither is to be trusted on where the caller's thought ends: a
    full stop put after words nobody said is no sign that the caller has finished."""
    a, b = _words(first), _words(second)
    if not a or not b:
        return False
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= AGREEMENT


def count_words(text: str) -> int:
    """How many words ``text`` holds (as the rules here read them)."""
    return len(_words(text))


#: Words a question must have to be taken as asked whole (``whole_question``). The first
#: halves of the paused sets heard as a finished question are shorter ("Can you help me?",
#: "Can you hack it?" for "Could you check if"); the knowledge entries' questions callers
#: ask are not ("Do you sell gift cards?").
WHOLE_QUESTION_WORDS = 5


#: "how long", "how much": the question's auxiliary comes a word later.
_HOW_MEASURES = frozenset(("long", "much", "many", "often", "soon", "far", "late", "early"))
#: What follows an auxiliary that opens a question ("do you", "is there", "can my order").
_ASKED_SUBJECTS = _SUBJECTS | {"there", "my", "your", "this", "that", "the", "a", "an"}
#: Auxiliaries that also open a request ("Have the driver call me.", "Do the return for
#: me.", "Be quick."): a question only before a pronoun ("Have you ...", "Do I ...").
_IMPERATIVE_AUX = frozenset(("do", "have", "be"))


def asked_as_question(text: str) -> bool:
    """Words in a question's order, whatever the final mark: a wh-word and its auxiliary
    ("When does ...", "How long does ..."), or an auxiliary before its subject ("Do you
    ...", "Is there ...", "Can my order ..."). The recognizer's question mark is a guess:
    tiny.en heard "When does my money come back?" with a full stop in one call of eight."""
    words = [w for w in _words(text) if w not in _HESITATIONS]
    if len(words) < 2:
        return False
    first, second = words[0], words[1]
    if first in _WH:
        if first == "how" and second in _HOW_MEASURES:
            return len(words) > 2 and words[2] in _AUX
        return second in _AUX
    if first in _IMPERATIVE_AUX:
        return second in _SUBJECTS or second == "there"
    return first in _AUX and second in _ASKED_SUBJECTS


def whole_question(text: str) -> bool:
    """One sentence, a question (a final question mark, or a full stop on words in a
    question's order, ``asked_as_question``) of at least ``WHOLE_QUESTION_WORDS`` words,
    that reads finished: what a caller asks whole. Half a request heard as a sentence is
    most often a statement ("I got an email.") or a short question ("Can you help me?")."""
    stripped = text.strip()
    sentences = _sentences(stripped)
    asked = stripped.endswith("?") or (stripped.endswith(".") and asked_as_question(stripped))
    return (
        len(sentences) == 1
        and asked
        and len(_words(stripped)) >= WHOLE_QUESTION_WORDS
        and judge(stripped) == "finished"
    )


def leads_with_answer(text: str) -> bool:
    """The words start as a reply to a yes-or-no offer ("yes please", "no thanks"), rather
    than going on with the caller's own sentence ("my refund has gone through yet")."""
    words = [w for w in _words(text) if w not in _HESITATIONS]
    return bool(words) and (words[0] in _ANSWER_LEAD or words[:2] == ["that's", "right"])


class ThoughtJudge:
    """``judge`` with what the call knows of the number being read out."""

    def __init__(self, digits: Callable[[], Digits | None] = lambda: None) -> None:
        self._digits = digits

    def __call__(self, text: str) -> Thought:
        return judge(text, self._digits())


def expected_digits(
    collectors: Sequence[CollectorConfig], collecting: str | None, fallback: int
) -> Digits | None:
    """The length of a number the caller may be reading out: the collector's under way,
    else the shortest the profile collects, else ``fallback`` digits (0: none)."""
    for col in collectors:
        if col.name == collecting:
            return Digits(col.min_length, col.max_length, asked=True)
    shortest = min((c.min_length for c in collectors), default=fallback)
    return Digits(shortest) if shortest > 0 else None
