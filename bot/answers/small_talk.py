"""Small talk: greetings, thanks, goodbyes, "are you there", "are you a robot".

Two uses. ``is_small_talk`` lets the model answer freely words that ask for no fact, when no
knowledge entry is retrieved; anything else the knowledge base does not cover gets the honest
"I am not sure" rather than the model's guess. ``SmallTalkReplies.reply`` answers the plainest
kinds outright, in the operator's fixed words (synthesized at start): a caller who says "Hi
there." hears "Hello, how can I help you today?", never "I am not sure about that".

A reply is given only when the whole utterance is small talk ("Hello, is anyone there?");
"Hi, where is my order?" is a request and goes on to the intents and the knowledge base.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# What may stand between phrases: spaces and punctuation, nothing else.
_GAP = re.compile(r"^[\s,.!?;:'\"-]*$")

_SMALL_TALK = re.compile(
    r"\b(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening|day)|thank you|thanks?"
    r"|cheers|bye|goodbye|ok(?:ay)?|alright|all right|great|perfect|cool|fine|nice"
    r"|sorry|pardon|excuse me|are you (?:there|still there|a (?:robot|person|human|machine))"
    r"|is (?:anyone|anybody|someone|somebody) there|can you hear me|how are you"
    r"|who (?:is this|am i (?:talking|speaking) to)|what(?:'s| is) your name|yes|no|yeah|nope"
    r"|say that again|come again|what was that|i didn't (?:catch|hear) that|so much|very much"
    r"|there|today|again|please|oh|um|uh|er|well|right|then)\b",
    re.IGNORECASE,
)
#: Longer than this, the words are a request, whatever they start with.
MAX_WORDS = 8


def is_small_talk(text: str) -> bool:
    """Greetings, thanks, "are you there", a yes or no: words that ask for no fact.

    The whole utterance must be such words: "Hi, do you sell gift wrap?" is a request (the
    model must not answer it freely because it starts with a greeting).
    """
    if not text.strip() or len(text.split()) > MAX_WORDS:
        return False
    return bool(_pieces(_SMALL_TALK, text))


def _pieces(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """``pattern``'s matches when they cover ``text`` (nothing but punctuation and spaces
    between and around them); empty when any other word stands in it."""
    found, at = [], 0
    for match in pattern.finditer(text):
        if not _GAP.match(text[at : match.start()]):
            return []
        found.append(match)
        at = match.end()
    return found if _GAP.match(text[at:]) else []


Kind = Literal[
    "greeting", "thanks", "goodbye", "presence", "identity", "how_are_you", "acknowledgement"
]

# Each kind's phrases; an utterance is answered when it is made of these phrases (and the
# filler words below) only. Ordered so that a longer phrase is tried before its prefix.
_PHRASES: tuple[tuple[Kind, str], ...] = (
    ("goodbye", r"(?:good ?bye|bye(?: bye)?|see you|have a (?:nice|good) (?:day|one))"),
    ("thanks", r"(?:thank you(?: (?:so|very) much)?|thanks(?: (?:a lot|so much))?|cheers)"),
    (
        "presence",
        r"(?:are you (?:still )?there|is (?:anyone|anybody|someone|somebody) (?:there|on the line)"
        r"|can you hear me|hello\?{2,})",
    ),
    (
        "identity",
        r"(?:are you an? (?:robot|person|human|machine|real person|bot|computer)"
        r"|am i (?:talking|speaking) to an? (?:robot|person|human|machine|real person|bot)"
        r"|who (?:is this|am i (?:talking|speaking) (?:to|with))|what(?:'s| is) your name)",
    ),
    ("how_are_you", r"(?:how are you(?: doing)?|how's it going)"),
    ("greeting", r"(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening|day))"),
    # A bare yes, no or okay with nothing asked: only a turn's start, or the caller taking
    # in the answer before ("Okay."). Last: "Okay, thanks." is thanks, "Yes, hello?" a
    # greeting.
    (
        "acknowledgement",
        r"(?:yes|yeah|yep|yup|no|nope|nah|okay|ok|alright|all right|right|sure|great|perfect"
        r"|cool|fine|got it|i see|understood|lovely|brilliant)",
    ),
)
_FILLER = r"(?:there|today|again|then|please|so|oh|um|uh|er|okay|ok|well|yes|yeah|right)"
_PIECE = re.compile(
    "|".join(f"(?P<{kind}>\\b{pattern}\\b)" for kind, pattern in _PHRASES) + f"|\\b{_FILLER}\\b",
    re.IGNORECASE,
)


def small_talk_kind(text: str) -> Kind | None:
    """The kind of small talk ``text`` is, when it is nothing but small talk; else None.

    Several kinds in one utterance: a goodbye wins ("thanks, bye"), then thanks, then the
    questions, then the greeting ("hello, are you there?" is a presence check).
    """
    if not text.strip() or len(text.split()) > MAX_WORDS + 2:
        return None
    found = {match.lastgroup for match in _pieces(_PIECE, text)}
    for kind in (
        "goodbye",
        "thanks",
        "presence",
        "identity",
        "how_are_you",
        "greeting",
        "acknowledgement",
    ):
        if kind in found:
            return kind
    return None


class SmallTalkReplies(BaseModel):
    """What the bot says to small talk (``[small_talk]`` in the profile): fixed words,
    synthesized at start. ``{name}`` in ``identity`` is the bot's name. An empty profile
    section keeps these defaults; a reply set to ``""`` leaves that kind to the model."""

    model_config = ConfigDict(extra="forbid")
    greeting: str = Field("Hello, how can I help you today?", max_length=300)
    thanks: str = Field("You're welcome. Is there anything else I can help with?", max_length=300)
    goodbye: str = Field("Thank you for calling. Goodbye.", max_length=300)
    presence: str = Field("Yes, I'm here. How can I help you?", max_length=300)
    identity: str = Field(
        "I'm {name}'s automated assistant. I can answer questions, or put you through to a "
        "colleague. How can I help?",
        max_length=300,
    )
    how_are_you: str = Field("I'm well, thank you. How can I help you today?", max_length=300)
    #: The reply to a yes to an answer that asked "Is there anything else I can help
    #: with?" (``bot.intents.confirm.asks_for_more``): a no to it ends the call as the
    #: profile's goodbye intent does (or with ``goodbye``, where it has none).
    more: str = Field("Of course. What else can I help you with?", max_length=300)
    #: The reply to a bare yes, no or okay with nothing asked, after an answer ("Okay."):
    #: at the start of the call, before any answer, ``greeting``'s reply instead.
    acknowledgement: str = Field("Is there anything else I can help with?", max_length=300)

    def reply(self, text: str, name: str, *, answered: bool = True) -> str | None:
        """The reply to ``text`` when it is small talk this profile answers; else None.
        ``answered``: the bot has answered something in the call (a bare "Yes." before
        that gets the greeting's reply, "How can I help you today?")."""
        kind = small_talk_kind(text)
        if kind is None:
            return None
        if kind == "acknowledgement" and not answered:
            kind = "greeting"
        words: str = getattr(self, kind)
        return words.replace("{name}", name) if words else None

    def phrases(self, name: str) -> list[str]:
        """Every reply, as spoken (what the node synthesizes at start)."""
        kinds = (
            "greeting", "thanks", "goodbye", "presence", "identity", "how_are_you", "more",
            "acknowledgement",
        )  # fmt: skip
        return [getattr(self, k).replace("{name}", name) for k in kinds if getattr(self, k)]
