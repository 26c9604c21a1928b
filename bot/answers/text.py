"""Words of a text as the answer checks compare them: lower case, punctuation dropped."""

from __future__ import annotations

import re

#: Numbers said in words, read as digits by the fact check.
UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
}  # fmt: skip
TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?|\d+(?:[.,]\d+)*")


def words(text: str) -> list[str]:
    """Lower-case words and numbers of ``text``, punctuation dropped."""
    return [w.lower() for w in WORD.findall(text)]


def words_of(listed: str) -> frozenset[str]:
    """A word class written as one string, its words separated by white space."""
    return frozenset(listed.split())


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, split after a full stop, question or exclamation mark."""
    return [p for p in re.split(r"(?<=[.!?])\s+", text.strip()) if p]
