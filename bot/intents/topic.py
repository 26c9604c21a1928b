"""What an intent or a knowledge entry is about, in the few words a person would say after
"Is this about": "your refund", "our opening hours", "booking an appointment".

The operator's own words come first (``IntentConfig.topic``, ``KnowledgeEntry.about``).
Without them the topic is derived from the name (an intent's ``name``, an entry's id
``topic``) and the way callers say it (its examples, or its questions and keywords):

1. The name's words, in order ("book_appointment": book, appointment); digits are dropped.
2. A first word that is a verb (a common request verb such as book, cancel, change, pay,
   speak, or a word the examples say after "to", "please" or "can I") is said in its -ing
   form, followed by the rest: "booking an appointment", "talking to a person".
   A last word that is a past participle is said after the rest ("card_declined": "your
   card being declined"); a first one followed by out, up, off or in is "being ..."
   ("locked_out": "being locked out").
3. The thing talked about (the words after the verb, or the whole name) takes the word the
   examples put before it most often, seen from the bot's side: the caller's "my" becomes
   "your", the caller's "your" (the business's) becomes "our", "a"/"an" and "the" stay;
   examples that say it bare keep it bare. With no example to go by, a singular noun after
   a describing word takes "a"/"an" ("an unknown payment"); anything else stays bare.
4. Each word is written as the examples write it inside a sentence ("PO boxes", "PayPal").

A name that says nothing the examples say (an opaque id such as "faq_7") is replaced by
the examples' most shared key word, with its determiner as in 3.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from bot.answers.grounding import CONVERSATION, FUNCTION, stem
from bot.answers.text import sentences, words_of
from bot.profile import IntentConfig, KnowledgeEntry

#: Verbs a contact-center request name starts with: "book_appointment" is "booking ...".
VERBS = words_of(
    """add apply arrange block book buy cancel change check claim close collect complain
    confirm contact delete downgrade extend find fix freeze get give join log make move
    open order pay pause postpone put rearrange redirect refer register remove renew
    reorder report request reschedule reset return send set sign speak start stop
    submit switch talk top track transfer unblock unlock update upgrade verify"""
)
#: Of those, the ones that usually name a thing: "order_status" is about an order, unless
#: the examples say "to order".
_NOUN_TOO = frozenset({"order", "return", "transfer", "change", "check", "claim", "report",
                       "request", "top", "log", "contact", "set"})  # fmt: skip
#: -ing forms that are not the word with "ing" or a final e dropped.
_GERUNDS = {"set": "setting", "get": "getting", "put": "putting", "stop": "stopping",
            "log": "logging", "sign": "signing", "top": "topping", "reset": "resetting",
            "submit": "submitting", "refer": "referring", "transfer": "transferring",
            "cancel": "cancelling", "travel": "travelling", "pay": "paying"}  # fmt: skip
_PARTICLES = frozenset({"out", "up", "off", "in", "down", "over", "back"})
_PREPOSITIONS = frozenset({"to", "with", "for", "about", "from", "into", "on", "of", "by"})
#: Words before a verb: "I want to book", "please cancel"; and pairs: "can I change".
_BEFORE_VERB = frozenset({"to", "please"})
_ASKING = frozenset({"can", "could", "do", "may", "should", "would", "how"})
_ASKER = frozenset({"i", "we", "you"})
#: Name words that say nothing of the topic: a name of only these (and digits) is an id.
_OPAQUE = frozenset({"intent", "faq", "topic", "entry", "question", "item", "misc", "other",
                     "general", "q", "x"})  # fmt: skip
#: Describing words that, with nothing else to go by, make a thing "a/an" something.
_DESCRIBING = words_of(
    """new lost stolen missing broken faulty wrong late unknown high low extra second old
    damaged expired blocked double duplicate unexpected strange large big small"""
)
#: Determiners as the caller says them, and as the bot says them back.
_SAID_BACK = {"my": "your", "your": "our", "our": "your", "the": "the", "a": "a", "an": "a",
              "his": "his", "her": "her", "their": "their"}  # fmt: skip
#: Words that may sit between a determiner and the thing ("my new card", "a direct debit").
_BETWEEN = 2
_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")


def topic_of(intent: IntentConfig) -> str:
    """The intent's topic: the operator's, or derived from its name and examples."""
    return intent.topic or derive_topic(intent.name, intent.examples)


def topic_of_entry(entry: KnowledgeEntry) -> str:
    """A knowledge entry's spoken topic: the operator's ``about``, or derived from its id
    and its questions and keywords."""
    return entry.about or derive_topic(entry.topic, [*entry.questions, *entry.keywords])


def derive_topic(name: str, examples: Sequence[str]) -> str:
    """The topic made from ``name`` (words joined by "_") and how ``examples`` say it,
    by the rule in this module's description."""
    said = [_tokens(e) for e in examples]
    parts = [w for w in name.lower().split("_") if w and not w.isdigit()]
    if all(w in _OPAQUE or len(w) < 2 for w in parts):
        shared = _most_shared(said)
        if shared is None:
            return " ".join(parts) or name
        parts = [shared]
    topic = _phrase(parts, said)
    return " ".join(_as_written(w, examples) for w in topic.split())


def gerund(verb: str) -> str:
    """``verb``'s -ing form: "book" -> "booking", "change" -> "changing"."""
    if verb in _GERUNDS:
        return _GERUNDS[verb]
    if verb.endswith("ie"):
        return verb[:-2] + "ying"
    if verb.endswith("e") and not verb.endswith(("ee", "ye", "oe")) and len(verb) > 2:
        return verb[:-1] + "ing"
    return verb + "ing"


def _phrase(parts: list[str], said: list[list[str]]) -> str:
    first, rest = parts[0], parts[1:]
    if rest and first.endswith("ed") and rest[0] in _PARTICLES:
        return " ".join(["being", *parts])
    if rest and _is_verb(first, said):
        if rest[0] in _PREPOSITIONS:
            return " ".join([gerund(first), rest[0], _thing(rest[1:], said, unsaid="a")])
        return f"{gerund(first)} {_thing(rest, said, unsaid='your')}"
    if len(parts) > 1 and parts[-1].endswith("ed") and parts[-1] not in _DESCRIBING:
        return f"{_thing(parts[:-1], said)} being {parts[-1]}"
    return _thing(parts, said)


def _is_verb(word: str, said: list[list[str]]) -> bool:
    """Whether the name's first word is a verb: a request verb that is not as often a
    thing, or one the examples say as a verb ("to order", "please cancel")."""
    if word.endswith(("ed", "ing")):
        return False
    if word in VERBS and word not in _NOUN_TOO:
        return True
    forms = {word, word + "s", gerund(word)}
    for tokens in said:
        for k, w in enumerate(tokens):
            if w == gerund(word):
                return True
            if w not in forms or k == 0:
                continue
            if tokens[k - 1] in _BEFORE_VERB:
                return True
            if k > 1 and tokens[k - 1] in _ASKER and tokens[k - 2] in _ASKING:
                return True
    return False


def _thing(words: list[str], said: list[list[str]], unsaid: str = "") -> str:
    """``words`` with the determiner the examples use for them, said back; ``unsaid``
    when no example says them (a singular thing only)."""
    phrase = " ".join(words)
    head = words[-1]
    singular = not head.endswith("s") or head.endswith(("ss", "us"))
    if head.endswith("ing") and len(words) == 1:
        return phrase
    whole, det = _determiner(words, said)
    if len(words) > 1 and words[0] in _DESCRIBING and not whole and singular:
        det = "a"  # "a lost card": the caller's "my card" is not "my lost card"
    if det is None:
        det = unsaid if singular else ""
    if det == "a" and not singular:
        det = ""  # "a PO box": "PO boxes"
    if det == "":
        return phrase
    if det == "a":
        det = "an" if phrase[0] in "aeiou" else "a"
    return f"{det} {phrase}"


def _determiner(words: list[str], said: list[list[str]]) -> tuple[bool, str | None]:
    """The determiner the examples put before the thing, said back ("" for none), the
    most frequent; looked for before the whole phrase, else before its last word, else
    before its first. Whether the whole phrase was found, and None when nothing was."""
    for whole, looked in ((True, words), (False, words[-1:]), (False, words[:1])):
        if not whole and len(words) == 1:
            break
        votes: Counter[str] = Counter()
        for tokens in said:
            for k in range(1, len(tokens) - len(looked) + 1):
                if all(_same(a, b) for a, b in zip(looked, tokens[k:], strict=False)):
                    votes[_before(tokens, k)] += 1
        if votes:
            order = ["your", "a", "", "the", "our", "his", "her", "their"]
            return whole, max(votes, key=lambda d: (votes[d], -order.index(d)))
    return False, None


def _before(tokens: list[str], k: int) -> str:
    """The determiner before ``tokens[k]`` (over at most ``_BETWEEN`` describing words),
    said back; "" for none. The start of a sentence is not looked at."""
    for back in range(1, _BETWEEN + 2):
        if k - back < 0:
            break
        before = tokens[k - back]
        if before in _SAID_BACK:
            return _SAID_BACK[before]
        if before in FUNCTION or before in CONVERSATION:
            break
    return ""


def _same(a: str, b: str) -> bool:
    """The same word, or its plural: "box", "boxes"."""
    return a == b or b in (a + "s", a + "es") or a in (b + "s", b + "es")


def _most_shared(said: list[list[str]]) -> str | None:
    """The key word (not a function or conversation word) in the most examples (the
    first of those found, on a tie)."""
    counts: Counter[str] = Counter()
    forms: dict[str, Counter[str]] = {}
    for tokens in said:
        seen = set()
        for w in tokens:
            if w in FUNCTION or w in CONVERSATION or w.isdigit() or len(w) < 3:
                continue
            key = stem(w)
            forms.setdefault(key, Counter())[w] += 1
            if key not in seen:
                seen.add(key)
                counts[key] += 1
    if not counts:
        return None
    key, _ = counts.most_common(1)[0]
    # Its most frequent form, the longest of those: "delivery" rather than "deliver".
    found = forms[key]
    best: str = max(found, key=lambda w: (found[w], len(w)))
    return best


def _tokens(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text.replace("’", "'"))]


def _as_written(word: str, examples: Sequence[str]) -> str:
    """``word`` as the examples write it inside a sentence ("PO", "PayPal"), else as is."""
    for text in examples:
        for sentence in sentences(text):
            found: list[str] = _WORD.findall(sentence)
            for k, w in enumerate(found):
                if k > 0 and w.lower() == word and w != word:
                    return w
    return word
