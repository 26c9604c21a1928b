"""Split streamed LLM text into clauses the synthesizer can start on early."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"[.!?;:](?=\s)|[.!?]$")
_COMMA = re.compile(r",(?=\s)")
_MARKUP = re.compile(r"[*_#`~>|\[\]{}<>]+")
_SPACES = re.compile(r"\s+")


def clean_for_speech(text: str) -> str:
    """Drop markup characters a synthesizer would read out or stumble on."""
    return _SPACES.sub(" ", _MARKUP.sub(" ", text)).strip()


class ClauseSplitter:
    """Accumulates streamed text and yields speakable clauses.

    The first clause is cut at the first comma or sentence end once it has
    ``first_min_words`` words, so the caller hears something as early as possible; later
    clauses are cut at sentence ends, or at a comma once they have ``min_words`` words.
    """

    def __init__(self, first_min_words: int = 1, min_words: int = 8) -> None:
        self._buf = ""
        self._first = True
        self._first_min_words = first_min_words
        self._min_words = min_words

    def feed(self, piece: str) -> list[str]:
        """Add streamed text; return the clauses completed by it."""
        self._buf += piece
        out: list[str] = []
        while True:
            clause = self._take()
            if clause is None:
                return out
            out.append(clause)

    def flush(self) -> str | None:
        """Return whatever is left once the stream is over."""
        rest = clean_for_speech(self._buf)
        self._buf = ""
        return rest or None

    def _take(self) -> str | None:
        min_words = self._first_min_words if self._first else self._min_words
        cut: int | None = None
        for match in _SENTENCE_END.finditer(self._buf):
            if clean_for_speech(self._buf[: match.end()]):
                cut = match.end()
                break
        if cut is None:
            for match in _COMMA.finditer(self._buf):
                if len(self._buf[: match.end()].split()) >= min_words:
                    cut = match.end()
                    break
        if cut is None:
            return None
        clause = clean_for_speech(self._buf[:cut])
        self._buf = self._buf[cut:]
        if not clause:
            return None
        self._first = False
        return clause
