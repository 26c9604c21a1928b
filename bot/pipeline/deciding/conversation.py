"""The call's conversation as the decision reads it: one state, written in one place.

What was said and answered on the turn before (what a follow-up joins to), the question
waiting for the caller's reply, and what was asked already (a question is never asked
twice in a call). ``Decider.decide`` reads it and changes nothing; the stage that decides
a turn writes the decision into it (``commit``). ``version`` counts the commits: a decision
made in the caller's pause is reused at the end of the turn only while it is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bot.pipeline.deciding.decision import Asked, Decision


class Said(Protocol):
    """A turn as the conversation reads it (``bot.pipeline.turn.Turn``): its words, the
    answer the stages gave (filled in as they give it), and what answered."""

    call_id: str
    transcript: str
    answer: str
    intent: str | None

    @property
    def route(self) -> str: ...


#: Answers the call remembers (the latest; one per intent or entry).
REMEMBERED = 8
#: The routes whose answer is the operator's words about one intent or entry.
_REMEMBERED_ROUTES = ("exact", "semantic", "confirmed", "knowledge")


@dataclass(frozen=True, slots=True)
class Answered:
    """An answer given earlier in the call, as the operator wrote it: what a follow-up
    ("What was the standard price again?", "Can I get that for free?") may be about."""

    #: The caller's words it answered (for a "yes" or a choice: the words asked about).
    words: str
    answer: str
    #: The intent's name or the knowledge entry's topic id.
    name: str
    #: An intent (its ready answer) or a knowledge entry.
    intent: bool


@dataclass
class Conversation:
    """One call's conversation state."""

    #: The last turn decided (None: none yet). The stages that carry out its decision
    #: fill in its answer (a generated one when it is done).
    last: Said | None = None
    #: The question waiting for the caller's reply.
    waiting: Asked | None = None
    #: Intents and knowledge topics asked about in this call.
    asked: set[str] = field(default_factory=set)
    #: The intents and entries answered in this call, oldest first (``REMEMBERED``).
    answered: list[Answered] = field(default_factory=list)
    version: int = 0

    #: The words each turn was decided on, oldest first (a reply's: the words asked
    #: about), the last ``REMEMBERED``.
    said: list[str] = field(default_factory=list)

    @property
    def previous_words(self) -> str | None:
        """The words of the last turn's request (for a "yes" or "no", the words the question
        was about): what a follow-up is joined to."""
        return self.said[-1] if self.said and self.said[-1] else None

    @property
    def words_before_question(self) -> str | None:
        """The request before the one the waiting question is about (the question's own
        turn is the last one said): what a "no" to it joins its words to."""
        return self.said[-2] if len(self.said) > 1 and self.said[-2] else None

    def confirming(self) -> bool:
        """Whether a question the keypad answers waits: about an intent (1 yes, 2 no), or
        a choice of two (1 the first, 2 the second)."""
        return self.waiting is not None and self.waiting.kind in ("intent", "choice")

    def commit(self, turn: Said, decision: Decision | None = None) -> None:
        """``turn`` is decided as ``decision`` (None: answered outside the decision, such
        as a key): the question it left waiting, if any, and the turn before the next. The
        last answer said again changes nothing but the version: the turn before it is still
        the one a follow-up joins to, and a question still waits for its reply."""
        self.version += 1
        if decision is not None and decision.said_again:
            return
        self.last = turn
        self.said.append(decision.words if decision is not None else turn.transcript)
        del self.said[:-REMEMBERED]
        if decision is not None:
            self._remember(decision)
        self.waiting = None if decision is None else decision.asks
        if self.waiting is not None and self.waiting.kind != "offer":
            self.asked.update(self.waiting.keys)

    def _remember(self, decision: Decision) -> None:
        """Keep an answer about one intent or entry; the same one again moves it last, with
        the words that first asked for it (a follow-up's own words name no topic)."""
        said = decision.say
        if decision.kind != "answer" or decision.route not in _REMEMBERED_ROUTES:
            return
        if decision.intent is None or not said:
            return
        words = decision.words
        if decision.route == "confirmed" and self.waiting is not None:
            words = self.waiting.question
        earlier = next((a for a in self.answered if a.name == decision.intent), None)
        if earlier is not None:
            self.answered.remove(earlier)
            words = earlier.words
        self.answered.append(Answered(words, said, decision.intent, decision.entry is not None))
        del self.answered[:-REMEMBERED]
