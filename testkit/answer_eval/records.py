"""What one caller turn of the evaluation produced: the words fed in and what came out."""

from __future__ import annotations

from dataclasses import dataclass

from testkit.answer_eval.questions import Ask, Case, Category

#: The input label of written questions fed as they are.
TEXT = "text"


@dataclass(frozen=True)
class Said:
    """One text the caller would hear (a Speak or PlayAudio frame's text)."""

    text: str
    #: Written by the model and let through by the answer guard (not an operator text).
    generated: bool = False


@dataclass(frozen=True)
class TurnRecord:
    """One ask of a case, as the pipeline answered it."""

    case: Case
    #: Index of the ask within ``case.asks``.
    turn: int
    #: The transcript fed to the pipeline (the written text, or Whisper's).
    heard: str
    said: tuple[Said, ...]
    #: ``Turn.route``: exact, semantic, knowledge, llm, fallback ("none": no words heard).
    route: str
    #: The intent or knowledge topic that answered (routes exact, semantic, knowledge).
    intent: str | None = None
    #: The knowledge topics retrieved for the turn, best first.
    retrieved: tuple[str, ...] = ()
    #: The guard's and the responder's refusals, each "reason: detail".
    refusals: tuple[str, ...] = ()
    #: Call actions taken (transfer, hangup).
    actions: tuple[str, ...] = ()
    #: From the transcript in to the answer's end out, in milliseconds.
    ms: float = 0.0
    #: ``TEXT``, or the flite voice the question was spoken in.
    input: str = TEXT
    error: str | None = None
    #: The intent or knowledge topic a confirmation question asked about (the last, when
    #: there were two), when one was asked (the caller answered "yes" if it was what they
    #: meant, else "no"; ``said`` holds the questions and the answer).
    asked: str | None = None

    @property
    def ask(self) -> Ask:
        return self.case.asks[self.turn]

    @property
    def category(self) -> Category:
        return self.case.category(self.ask)

    @property
    def spoken(self) -> str:
        """Everything the caller heard, in order."""
        return " ".join(s.text for s in self.said)
