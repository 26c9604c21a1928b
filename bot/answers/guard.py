"""What a generated answer may say: the checks between the language model and the speaker.

A small model invents prices, dates and policies with confidence. Before a clause of its
answer is spoken, it is checked against what the bot may rely on: the knowledge-base
entries retrieved for the question and the caller's own words. A clause is refused when it

- states a fact (a number, a price or currency, a weekday or month, a time of day, a policy
  word such as "refund" or "free", or a proper name) that those sources do not contain;
- repeats, word for word, something the model already said in this call (a model that
  copies its own earlier answers loops);
- is the unfinished end of an answer (the model stopped mid-sentence);
- is not speech (a URL, an e-mail address, a list item) that a synthesizer would read out;
- reads out the bot's own instructions (its system prompt), whoever asked for them;
- is not an answer (``bot.answers.not_answer``): the model talking about itself, an apology
  that fits nothing the caller said, an offer or promise no entry makes;
- with entries retrieved, uses a key word (``bot.answers.grounding``) that no entry holds:
  a claim about what the business offers, allows or does ("We offer financing.") must
  stand on the entries' own words, whatever the policy-word list says.

The checks are deliberately strict: a refused clause costs the caller an honest "I am not
sure" or the entry's own answer, a wrong fact spoken with confidence costs much more.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from bot.answers.grounding import Vocabulary, key_words
from bot.answers.not_answer import misplaced_apology, offer, self_talk, unkept_offer
from bot.answers.text import SCALES, TENS, UNITS, WORD, sentences, words

Reason = Literal[
    "unsupported_fact", "not_an_answer", "repeat", "unfinished", "not_speech", "prompt_leak"
]

_UNITS, _TENS, _SCALES = UNITS, TENS, SCALES
#: Words that state a fact by themselves: money, calendar, clock, durations and policies.
#: Topic words ("delivery", "cost") are not facts; a number or a policy word with them is.
_FACT_WORDS = {
    # money
    "dollar", "cent", "euro", "pound", "usd",
    # calendar and clock
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    "weekday", "weekend", "january", "february", "march", "april", "june", "july",
    "august", "september", "october", "november", "december", "noon",
    "midnight", "tomorrow", "tonight", "yesterday",
    # durations
    "minute", "hour", "day", "week", "month", "year",
}  # fmt: skip
#: Policies and promises: facts too, but ones only the operator's entries can grant. A
#: caller's words are no source for them ("give me a voucher code" -> "I can give you a
#: voucher code." is refused).
_POLICY_WORDS = {
    "free", "refund", "discount", "guarantee", "warranty", "compensation", "voucher",
    "coupon", "credit", "promise", "cash", "paypal", "international", "overseas", "abroad",
    "worldwide",
}  # fmt: skip
_FACT_WORDS |= _POLICY_WORDS
#: Inflections folded onto the fact word they state.
_FOLD = {
    "refunds": "refund", "refunded": "refund", "discounts": "discount",
    "guaranteed": "guarantee", "guarantees": "guarantee", "promised": "promise",
    "promises": "promise", "internationally": "international", "weekdays": "weekday",
    "weekends": "weekend", "vouchers": "voucher", "coupons": "coupon", "dollars": "dollar",
    "cents": "cent", "euros": "euro", "pounds": "pound", "minutes": "minute",
    "hours": "hour", "days": "day", "weeks": "week", "months": "month", "years": "year",
}  # fmt: skip
#: With nothing retrieved to stand on, a clause that says what the business does, sells,
#: accepts or allows is a claim the bot cannot back: "We do not sell gift cards." So is a
#: bare yes or no to a question about it ("Do you give a discount to students?" -> "Yes,").
_CLAIM = re.compile(
    r"^\W*(?:yes|yeah|yep|no|nope|sure|of course|absolutely|certainly|definitely)\b|"
    r"\b(?:we|we're|we've|we'll|our|us)\b|\byou (?:can|cannot|can't|will|won't|may|must|need)\b"
    r"|\b(?:available|policy|allowed|accept|accepts|offer|offers|sell|sells)\b",
    re.IGNORECASE,
)
#: Capitalized words that are not names.
_NOT_NAMES = {"i", "i'm", "i'll", "i've", "i'd", "ok", "okay", "ai", "sir", "madam"}
_WORD = WORD
_NOT_SPEECH = re.compile(
    r"https?://|www\.|\b[\w.+-]+@[\w-]+\.\w+|\b\w+\.(?:com|org|net|io|co|us)\b"
    r"|^\s*(?:\d+[.)]|[-•*])\s|[#*_`|<>{}\[\]\\]"
)
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s*$")
#: A repeat is a run of this many words the model already said in the call.
REPEAT_WORDS = 5
#: A shorter clause is a repeat when all its words, this many or more, were said together.
REPEAT_WHOLE_WORDS = 3


@dataclass(frozen=True)
class Refusal:
    """Why a clause is not spoken, and the words that made it so."""

    reason: Reason
    detail: str

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


def _numbers(tokens: Sequence[str]) -> list[str]:
    """Numbers written in digits or in words, each as digits ("fifty" -> "50")."""
    out: list[str] = []
    total, current, in_number = 0, 0, False
    for tok in [*tokens, ""]:
        if tok and tok[0].isdigit():
            out.append(tok.replace(",", "").rstrip(".").removesuffix(".00"))
            continue
        if tok in _UNITS or tok in _TENS:
            if in_number and current % 100 and (tok in _TENS or current % 10 or current < 20):
                # "four ninety-nine", "ten twenty": two numbers said in a row (a price).
                out.append(str(total + current))
                total, current = 0, 0
            current += _UNITS.get(tok, 0) + _TENS.get(tok, 0)
            in_number = True
        elif tok in _SCALES and in_number:
            current = max(current, 1) * _SCALES[tok]
            if _SCALES[tok] >= 1000:
                total, current = total + current, 0
        elif tok == "and" and in_number:
            continue
        elif in_number:
            out.append(str(total + current))
            total, current, in_number = 0, 0, False
    return out


def facts(text: str) -> set[str]:
    """The facts ``text`` states: its numbers (as digits) and its fact words."""
    tokens = words(text)
    found = set(_numbers(tokens))
    found.update(w for w in (_FOLD.get(t, t) for t in tokens) if w in _FACT_WORDS)
    # "am" and "pm" are a time of day only after a number ("9 am"), not in "I am".
    found.update(
        tok
        for prev, tok in itertools.pairwise(tokens)
        if tok in {"am", "pm"} and (prev[0].isdigit() or prev in _UNITS or prev in _TENS)
    )
    return found


def names(text: str) -> set[str]:
    """Capitalized words inside a sentence (not its first word): likely proper names."""
    found: set[str] = set()
    for sentence in sentences(text):
        tokens = _WORD.findall(sentence)
        for tok in tokens[1:]:
            if tok[0].isupper() and tok.lower() not in _NOT_NAMES:
                found.add(tok.lower())
    return found


def _contains_run(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    return any(list(haystack[i : i + n]) == list(needle) for i in range(len(haystack) - n + 1))


def repeated_run(
    clause: str, said: Iterable[str], run: int = REPEAT_WORDS, *, whole: int | None = None
) -> str | None:
    """The first ``run`` words of ``clause`` found word for word in ``said``, if any.

    ``whole``: a clause shorter than ``run`` but of at least ``whole`` words counts when
    all its words are found together ("I can help you." said twice)."""
    tokens = words(clause)
    if whole is not None and whole <= len(tokens) < run:
        run = len(tokens)
    # One stream of words: the model's answer reaches the guard a clause at a time, so a
    # sentence said before may span two of the texts in ``said``.
    earlier = [w for s in said for w in words(s)]
    for i in range(len(tokens) - run + 1):
        piece = tokens[i : i + run]
        if _contains_run(earlier, piece):
            return " ".join(piece)
    return None


#: Introduces a sentence of an entry the caller already heard in this call, said again
#: because the caller asked about it again: said as a repeat, the way a person would.
RECAP = "As I said,"
#: Words too common to tell which sentence of an entry a question is about.
_COMMON = frozenset(
    {"a", "an", "the", "i", "you", "we", "it", "is", "are", "do", "does", "can", "to", "of",
     "and", "or", "in", "on", "for", "my", "your", "our", "what", "how", "if", "be", "that",
     "this", "with", "me", "there", "at", "from", "by", "will", "would", "about", "any"}
)  # fmt: skip


def stems(text: str) -> set[str]:
    """The uncommon words of ``text``, crudely stemmed ("loaded" and "load" meet)."""
    out: set[str] = set()
    for word in words(text):
        if word in _COMMON:
            continue
        suffix = next(
            (s for s in ("ing", "ed", "es", "s") if word.endswith(s) and len(word) - len(s) >= 3),
            "",
        )
        out.add(word.removesuffix(suffix) if suffix else word)
    return out


def closest_sentence(entry: str, asked: set[str]) -> tuple[str | None, int]:
    """The sentence of ``entry`` that shares the most of the ``asked`` stems (``stems``),
    and how many it shares; (None, 0) when none shares any."""
    best, best_overlap = None, 0
    for sentence in sentences(entry):
        overlap = len(asked & stems(sentence))
        if overlap > best_overlap:
            best, best_overlap = sentence, overlap
    return best, best_overlap


def recap(entry: str, question: str, known_names: Iterable[str] = ()) -> str:
    """``entry`` said again to a caller who heard it already and asks about it again: its
    sentence that shares the most words with ``question`` (the whole entry when none
    does), introduced as a repeat ("As I said, ..."). ``known_names`` keep their capital
    at the start of the sentence."""
    closest, _ = closest_sentence(entry, stems(question))
    return _as_recap(closest or entry.strip(), known_names)


def recaps(entry: str, known_names: Iterable[str] = ()) -> list[str]:
    """Every recap ``recap`` can make of ``entry``, whatever the question: one for each of
    its sentences, and the whole entry's (no sentence shares a word with the question).
    Few and known at start, so they are synthesized then, like the entry itself."""
    names = tuple(known_names)
    out = [_as_recap(sentence, names) for sentence in sentences(entry)]
    out.append(_as_recap(entry.strip(), names))
    return list(dict.fromkeys(out))


def _as_recap(best: str, known_names: Iterable[str]) -> str:
    """``best`` introduced as a repeat: "As I said, gift cards ..." (``recap``)."""
    first = _WORD.match(best)
    word = "" if first is None else first.group(0)
    kept = {"i", *(n.lower() for n in known_names)}
    if word.lower() not in kept and word[1:] == word[1:].lower():  # not "I", "Acme", "PayPal"
        best = best[0].lower() + best[1:]  # "Gift cards..." -> "As I said, gift cards..."
    return f"{RECAP} {best}"


def unsaid(entry: str, said: Iterable[str]) -> str:
    """The sentences of ``entry`` whose words were not all said together already."""
    earlier = [w for s in said for w in words(s)]  # clauses of one sentence joined again
    kept = [s for s in sentences(entry) if words(s) and not _contains_run(earlier, words(s))]
    return " ".join(kept)


def check(
    clause: str,
    *,
    sources: Sequence[str],
    caller: str = "",
    said: Sequence[str] = (),
    final: bool = False,
    known_names: Iterable[str] = (),
    strict: bool = False,
    private: Sequence[str] = (),
    stock: Sequence[str] = (),
) -> Refusal | None:
    """Whether ``clause`` of a generated answer may be spoken; ``None`` when it may.

    ``sources``: the texts the answer may draw on (retrieved entries); ``caller``: the
    caller's words, a source for numbers and names but not for a policy or a promise.
    ``said``: what the model already said in this call (this answer's earlier clauses too).
    ``final``: the clause is the end of the answer. ``known_names``: names always allowed
    (the business's own). ``strict``: nothing was retrieved for the question, so the
    clause may not make claims about the business at all. ``private``: texts the caller
    must not hear read out (the system prompt). ``stock``: the bot's own phrases (the
    offer of a colleague), whose words and offers the model may repeat.
    """
    if _NOT_SPEECH.search(clause):
        return Refusal("not_speech", clause.strip())
    allowed = set().union(*(facts(s) for s in sources)) if sources else set()
    allowed |= facts(caller) - _POLICY_WORDS
    missing = sorted(facts(clause) - allowed)
    if missing:
        return Refusal("unsupported_fact", ", ".join(missing))
    source_words = {w for s in (*sources, caller) for w in words(s)}
    allowed_names = source_words | {w for n in known_names for w in words(n)}
    unknown = sorted(names(clause) - allowed_names)
    if unknown:
        return Refusal("unsupported_fact", ", ".join(unknown))
    if strict:
        claim = _CLAIM.search(clause)
        if claim is not None:
            return Refusal("unsupported_fact", f"claim ({claim.group(0).lower()})")
    refusal = _not_an_answer(clause, sources=sources, caller=caller, stock=stock)
    if refusal is not None:
        return refusal
    if sources and not strict:
        # A claim stands on the entries alone; other words may echo the caller's too.
        claims = _CLAIM.search(clause) is not None or offer(clause) is not None
        held = Vocabulary([*sources, *stock, *([] if claims else [caller])])
        ignore = {w for n in known_names for w in words(n)}
        missing = held.missing(key_words(clause, ignore=ignore))
        if missing:
            what = "claim" if claims else "words"
            return Refusal("unsupported_fact", f"{what} ({', '.join(missing)})")
    leaked = repeated_run(clause, private)
    if leaked is not None:
        return Refusal("prompt_leak", leaked)
    again = repeated_run(clause, said, whole=REPEAT_WHOLE_WORDS)
    if again is not None:
        return Refusal("repeat", again)
    if final and not _SENTENCE_END.search(clause):
        return Refusal("unfinished", clause.strip()[-40:])
    return None


def _not_an_answer(
    clause: str, *, sources: Sequence[str], caller: str, stock: Sequence[str]
) -> Refusal | None:
    """Talk about itself, a misplaced apology, or an offer no entry makes."""
    talk = self_talk(clause, caller)
    if talk is not None:
        return Refusal("not_an_answer", f"about itself ({talk})")
    apology = misplaced_apology(clause, caller, sources)
    if apology is not None:
        return Refusal("not_an_answer", f"apology ({apology})")
    promise = unkept_offer(clause, [*sources, *stock])
    if promise is not None:
        return Refusal("not_an_answer", f"offer ({promise})")
    return None
