"""The call's conversation as the decision reads it: one state, written in one place.

What was said and answered on the turn before (what a follow-up joins to), the question
waiting for the caller's reply, and what was asked already (a question is never asked
twice in a call). ``Decider.decide`` reads it and changes nothing; the stage that decides
a turn writes the decision into it (``commit``). ``version`` counts the commits: a decision
made in the caller's pause is reused at the end of the turn only while it is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.pipeline.decision import Asked, Decision
    from bot.pipeline.turn import Turn


@dataclass
class Conversation:
    """One call's conversation state."""

    #: The last turn decided (None: none yet). The stages that carry out its decision
    #: fill in its answer (a generated one when it is done).
    last: Turn | None = None
    #: The question waiting for the caller's reply.
    waiting: Asked | None = None
    #: Intents and knowledge topics asked about in this call.
    asked: set[str] = field(default_factory=set)
    version: int = 0

    @property
    def previous_words(self) -> str | None:
        """The caller's words of the last turn: what a follow-up is joined to."""
        last = self.last
        return last.transcript if last is not None and last.transcript else None

    def confirming(self) -> bool:
        """Whether a question about an intent waits for the caller's yes or no (the keypad
        answers it too: 1 yes, 2 no)."""
        return self.waiting is not None and self.waiting.kind == "intent"

    def commit(self, turn: Turn, decision: Decision | None = None) -> None:
        """``turn`` is decided as ``decision`` (None: answered outside the decision, such
        as a key): the question it left waiting, if any, and the turn before the next."""
        self.version += 1
        self.last = turn
        self.waiting = None if decision is None else decision.asks
        if self.waiting is not None and self.waiting.kind != "offer":
            self.asked.add(self.waiting.key)
