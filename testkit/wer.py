"""Word error rate of a transcript against what was said."""

from __future__ import annotations


def wer(reference: str, hypothesis: str) -> tuple[int, int]:
    """Word edit distance and reference length, ignoring case and punctuation."""
    ref, hyp = _words(reference), _words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1], len(ref)


def _words(text: str) -> list[str]:
    kept = "".join(c if c.isalnum() or c in " '" else " " for c in text.lower())
    return kept.replace("'", "").split()
