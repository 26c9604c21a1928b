"""The background lines that ship with the product: what callers of any contact center say
that a profile's intents usually do not cover (chit-chat, off-topic requests, near-misses
of common requests). ``background.txt`` holds them; ``bot.intents.fit`` decides which of
them hold for a given profile."""

from __future__ import annotations

from functools import cache
from pathlib import Path

#: One line per utterance; ``#`` starts a comment line.
BACKGROUND_FILE = Path(__file__).with_name("background.txt")


@cache
def background_lines(path: Path = BACKGROUND_FILE) -> tuple[str, ...]:
    """The background utterances, in file order, without comments or blank lines."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return tuple(s for line in lines if (s := line.strip()) and not s.startswith("#"))
