"""The confirmation turn: the question asked about an intent the matcher is not sure of, and
reading the caller's answer to it ("yes", "no", or something else)."""

from __future__ import annotations

import re
from typing import Literal

from bot.intents.match import normalize
from bot.intents.topic import topic_of
from bot.profile import IntentConfig

Answer = Literal["yes", "no"] | None

_YES = frozenset(
    {
        "yes", "yeah", "yep", "yup", "ya", "yea", "sure", "correct", "right", "exactly",
        "ok", "okay", "please", "absolutely", "definitely", "indeed", "affirmative",
    }
)  # fmt: skip
_NO = frozenset({"no", "nope", "nah", "not", "wrong", "neither", "negative", "don't", "dont"})
#: Phrases that decide by themselves, whatever else is said ("that's not it").
_NO_PHRASES = ("not really", "not quite", "that's not", "that is not", "no thanks", "no thank")
_YES_PHRASES = ("that's right", "that is right", "that's it", "that's correct", "yes please")
#: A "yes" longer than this is a new request ("yes, and where is my order?"); a "no" longer
#: than ``MAX_NO_WORDS`` too ("no, I want to know about delivery"): it is answered as one.
MAX_WORDS = 6
MAX_NO_WORDS = 3
#: Keypad answers to a confirmation question, as IVRs take them: 1 for yes, 2 for no.
KEY_ANSWERS: dict[str, Answer] = {"1": "yes", "2": "no"}


def confirm_question(intent: IntentConfig) -> str:
    """The question for ``intent``: the operator's ``confirm``, or one made from its topic
    (``bot.intents.topic.topic_of``): "Is this about your refund?"."""
    if intent.confirm:
        return intent.confirm
    return about_question(topic_of(intent))


def about_question(topic: str) -> str:
    """The yes-or-no question about one topic: "Is this about booking an appointment?"."""
    return f"Is this about {topic}?"


def read_answer(text: str) -> Answer:
    """``yes`` or ``no`` for a short answer that says so; None for anything else (a new
    request, or words that say both)."""
    said = normalize(text)
    if not said:
        return None
    for phrase in _NO_PHRASES:
        if phrase in said:
            return "no"
    for phrase in _YES_PHRASES:
        if phrase in said:
            return "yes"
    words = said.split()
    yes = any(w in _YES for w in words)
    no = any(w in _NO for w in words)
    if yes == no:
        return None
    if yes:
        return "yes" if len(words) <= MAX_WORDS else None
    return "no" if len(words) <= MAX_NO_WORDS else None


#: The last sentence of an answer that asks whether the caller wants anything more ("Is
#: there anything else I can help with?", "Can I help with anything else today?").
_ASKS_FOR_MORE = re.compile(r"\banything else\b[^.?!]*\?\s*$", re.IGNORECASE)
#: The words of a caller who has nothing more ("No, that's all, thanks.", "I'm good."):
#: every word one of these, and one of ``_DONE`` among them.
_CLOSING = frozenset(
    {
        "no", "nope", "nah", "nothing", "else", "that's", "that", "is", "it", "all",
        "everything", "i'm", "im", "i", "am", "good", "fine", "ok", "okay", "alright",
        "thanks", "thank", "you", "very", "much", "so", "cheers", "great", "perfect",
        "for", "now", "today", "really", "thats", "sorted", "was", "just", "think",
    }
)  # fmt: skip
_DONE = ("no", "nope", "nah", "nothing", "that's all", "that's it", "that's everything",
         "i'm good", "i'm fine", "all good", "i think that's")  # fmt: skip
#: The words of a plain yes to "anything else?" ("Yes please.", "Yeah, I do.", "Yes, one
#: more thing."): any other word is a request of its own ("Yes, where is my order?") or
#: other small talk ("Okay, bye."), decided as such.
_MORE_YES = _YES | {
    "i", "do", "have", "there", "is", "one", "more", "thing", "something", "actually",
    "another", "question", "got", "um", "uh", "er", "well",
}  # fmt: skip
MAX_MORE_YES_WORDS = 4


#: Words of a caller with more to say ("Yes, one more thing.", "No, I have another
#: question.", "Hold on."): to "Are you ready to end the call?", not a yes.
_MORE = ("one more", "another", "something else", "wait", "hold on")
_GOES_ON = _MORE_YES | _NO | {
    "else", "wait", "hold", "on", "please", "sorry", "yet", "just", "a", "sec",
}  # fmt: skip


def goes_on(text: str) -> bool:
    """Whether ``text`` only says the caller has more to say (no request of its own)."""
    said = normalize(text)
    words = said.split()
    return (
        bool(words)
        and all(w in _GOES_ON for w in words)
        and any(f" {m} " in f" {said} " for m in _MORE)
    )


#: Of ``_DONE``, what says the caller is done with nothing asked before it ("I'm fine."
#: answers "How are you?" as well).
_DONE_UNASKED = ("that's all", "that's it", "that's everything", "nothing else", "i think that's")


def says_done(text: str) -> bool:
    """Whether ``text`` only says the caller is done, asked or not ("That's it for now,
    thanks.", "No, that's all."): ``read_more``'s no, with one of ``_DONE_UNASKED``."""
    said = f" {normalize(text)} "
    return read_more(text) == "no" and any(f" {d} " in said for d in _DONE_UNASKED)


def asks_for_more(answer: str) -> bool:
    """Whether ``answer`` ends by asking if the caller wants anything more."""
    return _ASKS_FOR_MORE.search(answer) is not None


def read_more(text: str) -> Answer:
    """The reply to "Is there anything else I can help with?": ``no`` for words that only
    say the caller is done ("No, that's all, thanks.", "I'm good, thank you."), ``yes`` for
    a short yes with no request of its own ("Yes please.", "Yeah."); None for anything else
    (a new request, "yes" with one: decided as a request)."""
    said = normalize(text)
    words = said.split()
    if not words:
        return None
    if all(w in _CLOSING for w in words) and any((f" {d} " in f" {said} ") for d in _DONE):
        return "no"
    plain = all(w in _MORE_YES for w in words) and len(words) <= MAX_MORE_YES_WORDS
    if plain and read_answer(text) == "yes":
        return "yes"
    return None
