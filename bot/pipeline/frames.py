"""Every event in a call as one small typed frame.

System frames (``SystemFrame``) are handled at once, ahead of queued work; data frames
(``DataFrame``) are processed in order and dropped when the caller interrupts the bot.
Frames flow both ways: downstream from the caller's audio to the call's actions, and
upstream (``Processor.push_upstream``) for what a later stage asks of an earlier one: a
number to collect (``CollectNumber``), words to say (a ``Speak`` or ``PlayAudio`` the
speaker takes from a stage after it), the caller put through to an agent (``Bridged``),
whether a question about an intent waits for its answer (``QuestionWaiting``), the number
under way (``Collecting``), whether a stage has the line (``LineHeld``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from bot.pipeline.turn import Turn
from telephony.events import AudioIn, DataFrame, DtmfIn, Frame, SystemFrame

if TYPE_CHECKING:
    from bot.pipeline.deciding.decision import Decision


__all__ = [
    "AnswerPending",
    "AudioIn",
    "Bridged",
    "CallAction",
    "CallFinished",
    "CollectNumber",
    "Collected",
    "Collecting",
    "DataFrame",
    "DtmfIn",
    "EndOfTurn",
    "Frame",
    "Interrupt",
    "LineHeld",
    "PlayAudio",
    "QuestionWaiting",
    "ResponseDone",
    "Speak",
    "StageFailed",
    "SystemFrame",
    "Transcript",
    "UserStartedSpeaking",
    "UserStoppedSpeaking",
]


# -- from the caller ---------------------------------------------------------------
# The caller's 20 ms of audio (``AudioIn``, a data frame) and keys (``DtmfIn``, a system
# frame) are the line's own events (``telephony.events``), taken as they come.


@dataclass(frozen=True)
class UserStartedSpeaking(SystemFrame):
    """The caller began a turn."""

    at: float


@dataclass(frozen=True)
class UserStoppedSpeaking(SystemFrame):
    """The caller's voiced audio ended (the turn may not be over yet)."""

    at: float


@dataclass(frozen=True)
class EndOfTurn(DataFrame):
    """The caller finished a turn; ``turn.audio`` holds what they said."""

    turn: Turn


@dataclass(frozen=True)
class Transcript(DataFrame):
    """What the caller said, as text, and, once the router decided it, the decision the
    stages after it carry out (``bot.pipeline.deciding.decider``; None: not decided yet)."""

    turn: Turn
    text: str
    decision: Decision | None = None


# -- the bot's answer --------------------------------------------------------------


@dataclass(frozen=True)
class Speak(DataFrame):
    """One clause for the speaker to say."""

    turn: Turn | None
    text: str
    #: Written by the model (checked by the answer guard) rather than by the operator.
    generated: bool = False
    #: The last clause of the answer.
    final: bool = False


@dataclass(frozen=True)
class PlayAudio(DataFrame):
    """Ready telephone audio to play as it is (greeting, fillers, apologies)."""

    turn: Turn | None
    pcm: bytes
    text: str


@dataclass(frozen=True)
class ResponseDone(DataFrame):
    """The answer to ``turn`` has been fully handed to the speaker."""

    turn: Turn


@dataclass(frozen=True)
class AnswerPending(SystemFrame):
    """The LLM has started on the answer to ``turn``: the speaker may have to fill the wait."""

    turn: Turn


@dataclass(frozen=True)
class CallAction(DataFrame):
    """What to do with the call once the answer to ``turn`` has been heard.

    It follows the answer's ``ResponseDone``: a barge-in over the answer drops it.
    """

    turn: Turn
    action: Literal["transfer", "hangup"]
    #: The transfer's SIP target (``transfer`` only).
    target: str | None = None
    #: The call's end reason for a ``hangup`` (default ``bot_hangup``).
    reason: str | None = None


@dataclass(frozen=True)
class StageFailed(DataFrame):
    """A model stage failed during ``turn``; the bot should apologise, not go silent."""

    turn: Turn
    stage: str
    error: str


# -- control -----------------------------------------------------------------------


@dataclass(frozen=True)
class Interrupt(SystemFrame):
    """The caller spoke over the bot: stop talking, drop queued answers, listen."""

    at: float


@dataclass(frozen=True)
class CallFinished(SystemFrame):
    """The call is over; processors stop."""

    reason: str
    at: float


# -- call flows (keypad menus, collectors, lookups) ---------------------------------


@dataclass(frozen=True)
class Collected(DataFrame):
    """A number the caller keyed in or said, complete (``bot.pipeline.stages.digit_collector``).

    ``value`` is in clear for the lookup that needs it; it is never logged, and a
    sensitive one is masked everywhere the caller's words are kept.
    """

    turn: Turn
    collector: str
    value: str
    sensitive: bool = False
    #: The lookup to run with it (``[[lookups]]``), if any.
    lookup: str | None = None
    #: The lookup parameter that takes ``value``.
    param: str = ""


# -- upstream: what a later stage asks of an earlier one ------------------------------


@dataclass(frozen=True)
class CollectNumber(SystemFrame):
    """Ask the caller for the number of collector ``name`` (the digit collector takes it)."""

    name: str


@dataclass(frozen=True)
class Bridged(SystemFrame):
    """The caller is with an agent on a bridged call: every stage it passes leaves the call
    (``Processor.on_bridged``)."""


@dataclass(frozen=True)
class QuestionWaiting(SystemFrame):
    """Whether a yes-or-no question about the caller's words waits for its answer (from the
    router, after each turn): a key 1 or 2 then answers it (the keypad menu)."""

    waiting: bool


@dataclass(frozen=True)
class Collecting(SystemFrame):
    """The number the digit collector asks for now (its collector's name; None: none), for
    the end of turn before it (digits still to come keep a turn open)."""

    name: str | None


@dataclass(frozen=True)
class LineHeld(SystemFrame):
    """Stage ``by`` has the line (``held``), or has let go of it: the speaker while it
    speaks or its audio waits to be played, the responder while the model answers, the
    call control while the caller is on hold, with an agent or asked the post-call
    question. Sent upstream on each change; the stages before it keep what they are told
    (``bot.pipeline.line_state.LineState``): the bot has the line while any stage holds it."""

    held: bool
    by: str
