"""Digits in what a caller said: "one two three four", "1234", "12-34", "oh seven"."""

from __future__ import annotations

import re

_WORDS = {
    "zero": "0",
    "oh": "0",
    "o": "0",
    "nought": "0",
    "one": "1",
    "two": "2",
    "to": "2",
    "too": "2",
    "three": "3",
    "four": "4",
    "for": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
}
_MULTIPLIERS = {"double": 2, "triple": 3}
_TOKEN = re.compile(r"[a-z]+|\d+")
#: Words a caller says around a number they read out ("my order number is ...", "uh, it's").
_AROUND = frozenset(
    (  # noqa: SIM905 (one word list reads better than 45 lines)
        "a again an and are digits ends er erm hang here i in is it its let me my no number of "
        "oh ok okay on order account right s see so sorry sure that the then there think um uh "
        "was wait yeah yes"
    ).split()
)


def spoken_digits(text: str) -> str | None:
    """The digits of ``text`` in order, or None when it holds no digit at all.

    Digit words and figures count; words that are homophones of digits ("to", "for", "oh")
    count only next to another digit, so "I want to talk" has none. "double three" is "33".
    Other words ("my number is") are skipped.
    """
    tokens = _TOKEN.findall(text.lower())
    out: list[str] = []
    strong = False
    repeat = 1
    for i, tok in enumerate(tokens):
        if tok.isdigit():
            out.append(tok * repeat if len(tok) == 1 else tok)
            strong, repeat = True, 1
        elif tok in _MULTIPLIERS:
            repeat = _MULTIPLIERS[tok]
        elif tok in _WORDS:
            weak = tok in ("oh", "o", "to", "too", "for")
            if weak and not _next_to_digit(tokens, i):
                repeat = 1
                continue
            out.append(_WORDS[tok] * repeat)
            strong = strong or not weak
            repeat = 1
        else:
            repeat = 1
    return "".join(out) if out and strong else None


def _is_digit(tok: str) -> bool:
    return tok.isdigit() or (tok in _WORDS and tok not in ("to", "too", "for", "o", "oh"))


def _next_to_digit(tokens: list[str], i: int) -> bool:
    before = i > 0 and _is_digit(tokens[i - 1])
    after = i + 1 < len(tokens) and _is_digit(tokens[i + 1])
    return before or after


def digits_and_others(text: str) -> tuple[int, int]:
    """How many words of ``text`` are digits (figures count each digit) and how many are
    neither a digit nor a word said around a number ("parcel", "left", "return").

    A short digit run inside a sentence of other words ("the parcel 1 left") is a request,
    not a try at the number; "my order number is 4 5" is a number read out in part.
    """
    digits = others = 0
    for tok in _TOKEN.findall(text.lower()):
        if tok.isdigit():
            digits += len(tok)
        elif tok in _WORDS or tok in _MULTIPLIERS:
            digits += tok not in ("to", "too", "for", "o", "oh")
        elif tok not in _AROUND:
            others += 1
    return digits, others
