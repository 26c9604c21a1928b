"""Sentences that are not an answer: the model talking about itself, apologies that fit
nothing the caller said, and offers the bot cannot keep.

A small model fills its answers with a chat assistant's habits: "as a customer service AI,
I'm not equipped to...", "I'm sorry for your loss", "I'll give you a credit card". None of
them is a fact the guard's fact words would catch, and each misleads a caller (a promise
nobody keeps) or wastes their time. Each rule here is a class of words, not a list of
sentences: what the model says of its own nature or abilities, an apology with nothing to
apologise for, an offer or promise in the first person.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.answers.grounding import Vocabulary, key_words, stem
from bot.answers.text import words, words_of

#: The model's own nature or workings ("as an AI", "I'm just a virtual assistant").
_NATURE = re.compile(
    r"\b(?:ai|a\.i\.|artificial intelligence|(?:large )?language model|chat ?bot|virtual "
    r"assistant|digital assistant|automated (?:assistant|system|agent)|computer program)\b"
    r"|\bas an? (?:customer (?:service|support|care) |virtual |digital |automated )"
    r"(?:ai|assistant|agent|representative|bot|system|model)\b"
    r"|\bmy (?:training|programming|creators?|developers?|knowledge cut-?off)\b"
    r"|\bI(?:'m| am) (?:just|only|merely|not) an? (?:real |actual )?"
    r"(?:ai|bot|robot|machine|program|assistant|person|human)\b"
    r"|\bI(?:'m| am| was) (?:programmed|trained|designed|built) to\b",
    re.IGNORECASE,
)
#: What the model says it can or cannot do ("I'm not equipped to", "I'm unable to access
#: your account"): the caller hears about a program's limits instead of an answer.
_ABILITY = re.compile(
    r"\bI(?:'m| am) (?:not |un)(?:able|equipped|capable|authori[sz]ed|allowed|permitted)\b"
    r"|\bI (?:can't|cannot|can not|do not|don't|won't|am not going to) (?:have )?"
    r"(?:access|see|view|browse|look (?:up|into|at)|retrieve|pull up|process|perform)\b"
    r"|\b(?:don't|do not) have (?:access|the (?:ability|capability|means|tools))\b"
    r"|\b(?:real-time|realtime|live) (?:access|data|information)\b",
    re.IGNORECASE,
)
#: A caller asking what they are talking to: then the model may say what it is.
_ASKS_WHAT_I_AM = re.compile(
    r"\b(?:robot|bot|machine|human|real person|computer|automated|ai|recording)\b"
    r"|\bwho (?:is this|am i (?:talking|speaking))|\bwhat are you\b|\byour name\b",
    re.IGNORECASE,
)
_APOLOGY = re.compile(
    r"\b(?:sorry|apologi[sz]e|apologi[sz]ing|apologies|apology|regret)\b", re.IGNORECASE
)
#: Condolences: they fit only a caller who spoke of a death.
_CONDOLENCE = re.compile(
    r"\b(?:condolences?|sympathy|sympathies)\b|\bsorry (?:for|about) your loss\b|\byour loss\b",
    re.IGNORECASE,
)
_BEREAVEMENT = re.compile(
    r"\b(?:died|dies|dead|death|passed away|passed on|funeral|bereave\w*|widow\w*)\b",
    re.IGNORECASE,
)
#: Words of a caller with a problem (or a "no"): an apology to them fits.
_TROUBLE = words_of(
    """not no never nothing didn't hasn't haven't hadn't isn't wasn't won't can't cannot
    don't doesn't couldn't wrong broken broke damaged faulty late lost missing stopped problem
    problems issue issues complaint complain complaining angry upset annoyed disappointed
    frustrated terrible awful bad mistake error twice waiting cancelled rude pardon"""
)
#: An apology that comes with a "no" or a "not sure" is part of a decline: it fits.
_DECLINES = words_of(
    """not no never cannot can't don't doesn't won't unfortunately afraid unable"""
)
#: An offer or promise in the first person: "I'll give you", "I can help with that",
#: "let me book that", "we'll send". A negated one ("I would rather not guess") is none.
_OFFER = re.compile(
    r"\b(?:I|we)(?:'ll| will| shall| can| could| would|'d| am going to|'m going to|'re going to"
    r"| are going to| am able to|'m able to| am happy to|'m happy to| would be happy to"
    r"|'d be happy to| would love to|'d love to| am glad to|'m glad to)\s+"
    r"(?!not\b|never\b|rather\b|like to know\b)([a-z]+)"
    r"|\blet me ([a-z]+)"
    r"|\bI(?:'m| am) (?:now )?(sending|arranging|booking|processing|issuing|giving|refunding"
    r"|ordering|putting|transferring|adding|changing|cancelling|canceling)\b",
    re.IGNORECASE,
)


def self_talk(clause: str, caller: str) -> str | None:
    """What ``clause`` says about the bot itself, if it talks about itself rather than
    answer: its nature (unless the caller asked what they are talking to) or what it can
    and cannot do."""
    ability = _ABILITY.search(clause)
    if ability is not None:
        return ability.group(0).lower()
    nature = _NATURE.search(clause)
    if nature is not None and _ASKS_WHAT_I_AM.search(caller) is None:
        return nature.group(0).lower()
    return None


def misplaced_apology(clause: str, caller: str, sources: Sequence[str]) -> str | None:
    """The apology or condolence in ``clause`` that fits nothing, if there is one.

    Condolences fit only a caller who spoke of a death. Another apology fits a caller with
    a problem (or a "no"), a clause that declines ("Sorry, I'm not sure"), or an operator
    entry that apologises itself ("Sorry, we do not match other shops' prices.")."""
    condolence = _CONDOLENCE.search(clause)
    if condolence is not None:
        return None if _BEREAVEMENT.search(caller) else condolence.group(0).lower()
    apology = _APOLOGY.search(clause)
    if apology is None:
        return None
    if any(_APOLOGY.search(s) for s in sources):
        return None
    if _TROUBLE & set(words(caller)) or _DECLINES & set(words(clause)):
        return None
    return apology.group(0).lower()


def offer(clause: str) -> tuple[str, str] | None:
    """The first-person offer or promise in ``clause``: (the phrase, its verb's stem)."""
    found = _OFFER.search(clause)
    if found is None:
        return None
    verb = next(g for g in found.groups() if g)
    return found.group(0).lower(), stem(verb)


def unkept_offer(clause: str, makers: Sequence[str]) -> str | None:
    """An offer or promise in ``clause`` that none of ``makers`` (the retrieved entries and
    the bot's own phrases, such as the offer of a colleague) makes: one of them must offer
    with the same verb, and hold every key word of the clause."""
    found = offer(clause)
    if found is None:
        return None
    phrase, verb = found
    made = {stem(next(g for g in m.groups() if g)) for t in makers for m in _OFFER.finditer(t)}
    if verb in made and not Vocabulary(makers).missing(key_words(clause)):
        return None
    return phrase
