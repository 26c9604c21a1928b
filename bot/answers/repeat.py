"""A caller asking to hear the last answer again: "Could you repeat that?", "Sorry, what was
that?", "Pardon?".

On a phone line this is one of the commonest turns, and it asks for no new fact: the bot says
its last answer again, word for word. Left to the rest of the pipeline it matched no intent,
retrieved the last answer's entry and was refused as a repeat ("not sure") or answered freely
by the model as small talk.

The whole utterance must be such a request: "Could you repeat the opening hours?" names what
to repeat and is a request of its own.
"""

from __future__ import annotations

import re

_FILLER = r"(?:sorry|oh|um|uh|er|yes|yeah|ok(?:ay)?|hello|hi|excuse me|please|again|then|so)"
_REQUEST = (
    r"(?:(?:could|can|would|will) you |please )?"
    r"(?:repeat (?:that|it|this|what you said|the (?:last )?(?:answer|bit|part))"
    r"|say (?:that|it|this) (?:again|once more)(?: for me)?|say again|run that by me again"
    r"|go over (?:that|it) again|read (?:that|it) (?:again|back))"
)
_QUESTION = (
    r"(?:pardon(?: me)?|come again|what was that|what did you (?:just )?say"
    r"|what was (?:that|it) again|i didn'?t (?:catch|hear|get) (?:that|it|what you said)"
    r"|i missed that|you broke up|i couldn'?t hear you)"
)
_REPEAT = re.compile(
    rf"^(?:{_FILLER}\W+)*(?:{_REQUEST}|{_QUESTION})(?:\W+(?:{_FILLER}|{_REQUEST}|{_QUESTION}))*"
    r"\W*$",
    re.IGNORECASE,
)
#: Longer than this, the words are a request of their own.
MAX_WORDS = 12


def asks_to_repeat(text: str) -> bool:
    """Whether the whole of ``text`` asks to hear the last answer again."""
    said = " ".join(text.replace("’", "'").split())
    if not said or len(said.split()) > MAX_WORDS:
        return False
    return _REPEAT.match(said) is not None
