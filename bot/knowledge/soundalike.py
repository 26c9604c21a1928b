"""Whether the caller's words sound like an entry's keyword, as the speech recognizer heard them.

A small recognizer spells a name it does not know as the nearest words it does ("PayPal" ->
"paper", "PO box" -> "pob box"). A keyword is compared with every run of the caller's words of
as many words as it has, or one more (a name heard as two words: then at half the distance),
by an edit distance over their letters (spaces left out, a doubled letter once) in which the
slips of hearing are cheap: a vowel for a vowel, a consonant for a near one ("b"/"p",
"d"/"t", "l"/"r"), a vowel dropped or added. The run sounds like the keyword when that
distance is at most ``max_distance`` times the keyword's letters, and both begin with the
same kind of sound.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

#: Letters that carry little of a word's sound to a recognizer: dropped, added or swapped for
#: one another cheaply.
_VOWELS = frozenset("aeiouyhw")
#: Consonants a recognizer confuses for one another (place of articulation, voicing).
_CLASSES = ("bp", "dt", "cgkq", "fv", "csxz", "mn", "lr", "jg")
#: Cost of a vowel swapped for a vowel.
_VOWEL_SWAP = 0.25
#: Cost of a vowel dropped or added.
_VOWEL_GAP = 0.5
#: Cost of a consonant swapped for one of its class.
_NEAR_SWAP = 0.5
#: Keywords shorter than this (in letters) are matched exactly only: in a few letters any
#: slip is a different word.
MIN_LETTERS = 5


def _near(a: str, b: str) -> bool:
    return any(a in c and b in c for c in _CLASSES)


def _swap(a: str, b: str) -> float:
    if a == b:
        return 0.0
    if a in _VOWELS and b in _VOWELS:
        return _VOWEL_SWAP
    if _near(a, b):
        return _NEAR_SWAP
    return 1.0


def _gap(a: str) -> float:
    return _VOWEL_GAP if a in _VOWELS else 1.0


def distance(heard: str, keyword: str, limit: float = math.inf) -> float:
    """The edit distance from ``keyword`` to ``heard`` (letters), mistakes of hearing cheap;
    ``math.inf`` as soon as it must exceed ``limit``."""
    previous = [0.0]
    for b in keyword:
        previous.append(previous[-1] + _gap(b))
    for a in heard:
        current = [previous[0] + _gap(a)]
        for j, b in enumerate(keyword, 1):
            current.append(
                min(
                    previous[j] + _gap(a),
                    current[j - 1] + _gap(b),
                    previous[j - 1] + _swap(a, b),
                )
            )
        if min(current) > limit:
            return math.inf
        previous = current
    return previous[-1]


def _letters(words: Sequence[str]) -> str:
    """The letters of the words, spaces left out and a doubled letter once (one sound)."""
    letters = [c for w in words for c in w if c.isalpha()]
    return "".join(c for k, c in enumerate(letters) if k == 0 or c != letters[k - 1])


def _same_onset(a: str, b: str) -> bool:
    """Both begin with a vowel, or with the same consonant or one of its class."""
    x, y = a[0], b[0]
    if x in _VOWELS or y in _VOWELS:
        return x in _VOWELS and y in _VOWELS
    return x == y or _near(x, y)


@dataclass(frozen=True)
class SoundAlike:
    """The rule: at most ``max_distance`` per letter of the keyword (0 never matches)."""

    max_distance: float

    @staticmethod
    def runs(said: Sequence[str], size: int) -> Iterator[str]:
        """The letters of each run of ``size`` consecutive words."""
        for start in range(len(said) - size + 1):
            yield _letters(said[start : start + size])

    def matches(self, said: Sequence[str], keyword: Sequence[str]) -> bool:
        """Whether some run of the (normalized) words ``said`` sounds like ``keyword``."""
        target = _letters(keyword)
        if self.max_distance <= 0 or len(target) < MIN_LETTERS:
            return False
        for n in (len(keyword), len(keyword) + 1):
            # A keyword heard as more words than it has must be nearer: "pay for" is not
            # "PayPal", "pay pal" is.
            limit = self.max_distance * len(target) / (n - len(keyword) + 1)
            for heard in self.runs(said, n):
                # A run much longer or shorter than the keyword cannot be within the limit.
                if not heard or abs(len(heard) - len(target)) > limit / _VOWEL_GAP:
                    continue
                if _same_onset(heard, target) and distance(heard, target, limit) <= limit:
                    return True
        return False
