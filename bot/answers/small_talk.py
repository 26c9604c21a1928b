"""Small talk: what the model may answer freely when no knowledge entry is retrieved.

Anything else the knowledge base does not cover gets the honest "I am not sure" rather
than the model's guess: a small model answers an uncovered question with a claim ("The
blue hoodie is still in stock.") that no guard can tell from a fact.
"""

from __future__ import annotations

import re

_SMALL_TALK = re.compile(
    r"^\W*(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening|day)|thanks?|thank you"
    r"|cheers|bye|goodbye|ok(?:ay)?|alright|all right|great|perfect|cool|fine|nice"
    r"|sorry|pardon|excuse me|are you (?:there|still there|a (?:robot|person|human|machine))"
    r"|is (?:anyone|anybody|someone|somebody) there|can you hear me|how are you"
    r"|who (?:is this|am i (?:talking|speaking) to)|what(?:'s| is) your name|yes|no|yeah|nope)\b",
    re.IGNORECASE,
)
#: Longer than this, the words are a request, whatever they start with.
MAX_WORDS = 8


def is_small_talk(text: str) -> bool:
    """Greetings, thanks, "are you there", a yes or no: words that ask for no fact."""
    return len(text.split()) <= MAX_WORDS and _SMALL_TALK.search(text) is not None
