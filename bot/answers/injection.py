"""Callers who try to change the bot's instructions: recognized before the model hears them.

What the bot may say or do never depends on the caller's words alone (actions come from the
operator's intents, facts from the knowledge base, and the guard checks every generated
clause); a recognized attempt also gets a polite refusal without the model, so that the
caller does not hear a small model play along.
"""

from __future__ import annotations

import re

_ATTEMPT = re.compile(
    r"\b(?:ignore|forget|disregard|override|bypass)\b.{0,40}"
    r"\b(?:instructions?|rules|prompt|guidelines|programming|everything (?:above|before))\b"
    r"|\byou are now\b|\bfrom now on,? you\b|\bnew instructions\b|\bdeveloper mode\b"
    r"|\b(?:system|initial|hidden|original) (?:prompt|instructions?|message)\b"
    r"|\byour (?:prompt|instructions|rules)\b"
    r"|\b(?:promise|guarantee|swear to) me\b|\bpromise (?:that|you(?:'ll| will))\b"
    r"|\bpretend (?:to be|you(?: are|'re)?)\b|\bact as (?:a|an|if)\b|\brole ?play\b"
    r"|\b(?:repeat|read|say|tell me) (?:back )?(?:everything|all|the text|what was) "
    r"(?:above|before|you were told)\b",
    re.IGNORECASE,
)


def is_injection(text: str) -> bool:
    """Whether the caller's words try to change or read out the bot's instructions, or to
    get a promise out of it ("promise me a refund"): what the bot may promise is what the
    operator wrote, never what a caller asks it to say."""
    return _ATTEMPT.search(text) is not None
