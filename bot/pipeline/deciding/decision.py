"""A turn's decision as a value: what the bot does with the caller's words, and why.

``bot.pipeline.deciding.decider`` makes it, once per words and call state: while the caller pauses
(the speculative pass, ``bot.pipeline.speculation``) and, when the words or the call have
changed since, again at the end of the turn. The stages that carry it out (the router
plays an intent's audio, the responder says the operator's words or has the model answer)
decide nothing of their own, and the turn log writes the decision with the turn
(``Decision.record``), so a call log row says why the bot did what it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from bot.intents.store import CacheEntry
    from bot.knowledge.index import Retrieved
    from bot.profile import KnowledgeEntry

#: ``confirm``: the bot asked whether the caller meant an intent it was not sure of;
#: ``confirmed``: the caller said yes, and the intent's answer played; ``keypad``: a menu
#: key or a number keyed in; ``lookup``: a business lookup's answer; ``ask``: a request
#: for what a lookup is for, answered by asking for the lookup's number (not the model);
#: ``repeat``: the caller asked to hear the last answer again, and heard it.
Route = Literal[
    "exact",
    "semantic",
    "confirm",
    "confirmed",
    "knowledge",
    "small_talk",
    "repeat",
    "llm",
    "fallback",
    "keypad",
    "lookup",
    "ask",
    "none",
]
#: - ``answer``: words the operator wrote (an intent's answer, a knowledge entry, small
#:   talk, a sentence of the last answer);
#: - ``ask``: a question about what the caller may mean: yes or no (an intent, a topic),
#:   or one of two (``Asked.options``: "Is this about X, or about Y?");
#: - ``unsure``: the honest "not sure" (nothing the operator wrote covers the words);
#: - ``decline``: a polite no (words that try to change the bot's instructions);
#: - ``generate``: the model words an answer from the entries retrieved (or, with no
#:   knowledge base, from the conversation);
#: - ``collect``: a number asked for (``Decision.collect``): a request for what one of the
#:   operator's lookups is for ("has my parcel left?") is answered by the lookup, after its
#:   number, not by the model.
Kind = Literal["answer", "ask", "unsure", "decline", "generate", "collect"]
#: Which words the decision was made on: the transcript, the second recognizer's words of
#: the same audio, or, for a turn heard together with the one before, its own words alone.
Heard = Literal["first", "second", "own"]
#: What a question asks about: an intent (its answer and action on a yes), a knowledge
#: entry's topic, after the honest "not sure" a colleague, or two of those (``choice``:
#: the one the caller chooses answers).
AskedKind = Literal["intent", "topic", "offer", "choice", "more"]


@dataclass(frozen=True, slots=True)
class Option:
    """One of the two things a two-choice question offers: an intent or a knowledge entry."""

    #: The intent (its ready answer and action when chosen).
    entry: CacheEntry | None = None
    #: The knowledge entry (said as written when chosen).
    topic: KnowledgeEntry | None = None
    score: float = 0.0

    @property
    def name(self) -> str:
        if self.entry is not None:
            return self.entry.name
        return self.topic.topic if self.topic is not None else ""

    @property
    def key(self) -> str:
        """The single question about it (``Asked.key``): offered once, never asked after."""
        return f"intent:{self.name}" if self.entry is not None else f"topic:{self.name}"


@dataclass(frozen=True, slots=True)
class Asked:
    """A question left waiting for the caller's reply."""

    kind: AskedKind
    #: The caller's words the question was about (answered as said on a "no").
    question: str
    call_id: str
    #: The intent asked about (``intent``, ``offer``: the transfer intent).
    entry: CacheEntry | None = None
    #: The knowledge entry asked about (``topic``).
    topic: KnowledgeEntry | None = None
    score: float = 0.0
    #: The two offered (``choice``), in the order the question says them.
    options: tuple[Option, ...] = ()
    #: The question was asked again after an answer that chose neither clearly ("both",
    #: "not sure"): another such answer is taken as "neither".
    again: bool = False
    #: The caller's yes or no, where the words were read as one when this was made
    #: (``more``: the reply to "anything else?", read once).
    reply: Literal["yes", "no"] | None = None

    @property
    def name(self) -> str:
        """The intent's name or the entry's topic id (a choice: both, ``a|b``)."""
        if self.options:
            return "|".join(option.name for option in self.options)
        if self.entry is not None:
            return self.entry.name
        return self.topic.topic if self.topic is not None else ""

    @property
    def key(self) -> str:
        """What the conversation remembers it by: a question is asked once in a call."""
        return f"{self.kind}:{self.name}"

    @property
    def keys(self) -> tuple[str, ...]:
        """Every question it stands for: a choice offers each option's question too."""
        return (self.key, *(option.key for option in self.options))


@dataclass(frozen=True, slots=True)
class Decision:
    """What the bot does with one turn's words."""

    kind: Kind
    #: What the turn log calls it (``bot.pipeline.turn.Route``).
    route: Route
    #: The words decided on (``heard`` says which).
    words: str
    #: One short reason, in words an operator reads in the call log.
    why: str
    heard: Heard = "first"
    #: The intent or knowledge entry (its topic id) the decision is about, and its score.
    intent: str | None = None
    score: float | None = None
    #: The words to say: an answer, a question, the fallback (None: the model words it).
    say: str | None = None
    #: The intent whose ready audio plays (its answer, or its question), and whose action
    #: follows the answer.
    entry: CacheEntry | None = None
    #: The knowledge entries retrieved for the words, about what was asked: what a
    #: generated answer may state.
    knowledge: tuple[Retrieved, ...] = ()
    #: The question this decision leaves waiting for the caller's reply.
    asks: Asked | None = None
    #: The words asked for a second hearing, and none was there (the pass failed, or the
    #: caller's pause held none): a decision made without it.
    unheard: bool = False
    #: The collector that asks for a number: the decision itself (``collect``), or after
    #: the answer (an intent in a collector's ``after_intents``: "where is my order" and
    #: then the order number).
    collect: str | None = None
    #: The caller asked to hear the last answer again ("Pardon?"): said again word for
    #: word; the conversation stays where it was (the turn before is still the one a
    #: follow-up joins to, a question still waits for its reply).
    said_again: bool = False

    @property
    def action(self) -> str | None:
        """The call action after the answer (``hangup``, ``transfer``), if any."""
        if self.kind != "answer" or self.entry is None:
            return None
        return self.entry.action

    @property
    def from_intent(self) -> bool:
        """The router carries it out: an intent's ready audio (an answer, its question), or
        a sentence of the router's last answer."""
        return self.entry is not None or self.route == "repeat"

    def record(self) -> dict[str, str | None]:
        """The decision as the turn log and the call log keep it (no caller's words)."""
        return {
            "kind": self.kind,
            "route": self.route,
            "why": self.why,
            "heard": self.heard,
            "intent": self.intent,
            "asks": None if self.asks is None else f"{self.asks.kind}:{self.asks.name}",
        }
