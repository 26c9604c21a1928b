"""What a call came to, and what each of its turns did: decided from what the log holds.

Pure functions, written once: the call log decides a call's outcome when it ends (and
stores it with the call and its turns); the admin API applies the same rules to a call
that has none stored (logged before the outcome columns, or closed by crash recovery).
The input is what the call log records: each turn's route, intent, words, barge-in and
error, the call's events in order between them, and the end reason.

Call outcomes (``outcome``, ``outcome_reason``), the first rule that holds:

- ``failed``: the node crashed (``crashed``, ``worker crashed``), or the last turn failed
  with an error other than a lookup's (the caller hung up on an apology).
- ``refused``: the call queue turned it away: ``queue_full`` (no place in line),
  ``draining`` (the node stopped while the caller waited), ``queue_timeout`` (waited the
  longest allowed).
- ``transferred``: put through to a person (a ``bridged`` event, or the end reason
  ``transferred``), with why: ``queue_overflow`` (from the call queue), ``declined`` (the
  caller said no to the bot's question earlier), ``lookup_failed`` (a lookup or a keyed
  number failed before it), ``unsure`` (the bot had said "not sure", and the caller took
  its offer), ``asked`` (the caller asked for a person: an intent named for one,
  ``PERSON_WORDS``), ``intent`` (the profile routes that intent to a person).
- ``abandoned``: the caller hung up (or the silence limit ended the call) before getting
  an answer, with where: ``queue`` (in line), ``silence`` (the silence limit, or a hang-up
  after the silence prompt with nothing said since), ``greeting`` (before saying
  anything), ``not_sure`` (after "not sure"), ``question`` (the bot's confirmation question
  waiting), ``lookup`` (a number asked for, or a lookup, waiting), ``transfer_failed`` (a
  transfer that failed, nothing answered since).
- ``resolved``: the caller's last request was answered: ``goodbye`` (the bot hung up after
  the goodbye intent's answer), ``caller_hangup`` (the caller hung up after an answer),
  ``max_duration`` (the call limit ended a call whose last turn was answered).

A confirmation question answered on the keypad (a ``confirm_key`` event: 1 yes, 2 no) is
answered as if said; the turn the key made has no words of the caller's but is no silence.

Turn outcomes: ``no_speech`` (nothing heard: no words; the call limits' own messages),
``error``, ``cut`` (the caller spoke over the answer), ``repeated`` (said again on request,
or a part of the last answer), ``confirmed_yes`` / ``confirmed_no`` (a confirmation
question, by the caller's reply), ``unanswered`` (a confirmation question with no reply),
``asked`` (the bot asked for a number), ``declined`` ("not sure": route ``fallback``),
``answered`` (any other route: ``exact``, ``semantic``, ``confirmed``, ``knowledge``,
``llm``, ``keypad``, ``lookup``, ``small_talk``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from bot.intents.confirm import read_answer

CallOutcomeKind = Literal["resolved", "transferred", "abandoned", "refused", "failed"]
CALL_OUTCOMES: tuple[CallOutcomeKind, ...] = (
    "resolved",
    "transferred",
    "abandoned",
    "refused",
    "failed",
)
TURN_OUTCOMES = (
    "answered",
    "confirmed_yes",
    "confirmed_no",
    "unanswered",
    "declined",
    "repeated",
    "cut",
    "no_speech",
    "asked",
    "error",
)
#: Every reason a call outcome can carry, per outcome.
REASONS: dict[str, tuple[str, ...]] = {
    "resolved": ("goodbye", "caller_hangup", "max_duration"),
    "transferred": ("asked", "unsure", "declined", "lookup_failed", "intent", "queue_overflow"),
    "abandoned": (
        "greeting",
        "queue",
        "not_sure",
        "question",
        "lookup",
        "silence",
        "transfer_failed",
    ),
    "refused": ("queue_full", "draining", "queue_timeout"),
    "failed": ("crashed", "error"),
}

#: The caller's answers to the optional post-call question ("Did we answer your
#: question?"), stored with the call; ``none``: asked, and nothing keyed or said in time.
POST_CALL_ANSWERS = ("yes", "no", "none")

#: An intent named with one of these words is the caller's request for a person.
PERSON_WORDS = re.compile(
    r"(^|_|\b)(person|people|human|agent|operator|representative|someone|staff|colleague|"
    r"advisor|adviser|transfer)(s)?($|_|\b)",
    re.IGNORECASE,
)
#: End reasons the bot (or the node) chose; anything else is the caller's or the line's.
BOT_ENDS = frozenset(
    {
        "bot_hangup",
        "transferred",
        "silence",
        "max_duration",
        "crashed",
        "worker crashed",
        "queue_full",
        "queue_closed",
        "queue_timeout",
    }
)
CRASHED = frozenset({"crashed", "worker crashed"})
#: Routes on which the bot answered the caller's request.
ANSWER_ROUTES = frozenset(
    {"exact", "semantic", "confirmed", "knowledge", "llm", "keypad", "lookup", "small_talk"}
)
#: Routes that answered from an intent or a knowledge entry (per-entry figures); a keypad
#: turn names one only when its menu option plays that intent's or entry's answer.
ENTRY_ROUTES = frozenset({"exact", "semantic", "confirmed", "knowledge", "repeat", "keypad"})


@dataclass(frozen=True)
class TurnFacts:
    """What the log holds of one turn."""

    seq: int
    route: str
    intent: str | None = None
    transcript: str | None = None
    answer: str | None = None
    barged_in: bool = False
    error: str | None = None


@dataclass(frozen=True)
class EventFacts:
    """What the log holds of one call event."""

    kind: str
    detail: str | None = None


Step = TurnFacts | EventFacts


@dataclass(frozen=True)
class CallOutcome:
    outcome: CallOutcomeKind
    reason: str


#: The keys that answer a confirmation question (``bot.intents.confirm.KEY_ANSWERS``).
CONFIRM_KEYS = {"1": "yes", "2": "no"}


def confirm_keys(steps: Sequence[Step]) -> dict[int, str]:
    """The turns made by a key that answered a confirmation question (a ``confirm_key``
    event): their seq, and the key's answer (``yes`` or ``no``)."""
    keyed: dict[int, str] = {}
    pending: str | None = None
    for step in steps:
        if isinstance(step, EventFacts):
            if step.kind == "confirm_key" and step.detail in CONFIRM_KEYS:
                pending = CONFIRM_KEYS[step.detail]
        elif pending is not None:
            keyed[step.seq] = pending
            pending = None
    return keyed


def turn_outcomes(turns: Sequence[TurnFacts], keyed: Mapping[int, str] | None = None) -> list[str]:
    """Each turn's outcome, in order (a confirmation question's by the reply after it);
    ``keyed``: the turns a key answered a question with (``confirm_keys``)."""
    keyed = keyed or {}
    out = []
    for i, turn in enumerate(turns):
        after = turns[i + 1] if i + 1 < len(turns) else None
        key = keyed.get(after.seq) if after is not None else None
        out.append(turn_outcome(turn, after, keyed=turn.seq in keyed, reply_key=key))
    return out


def step_turn_outcomes(steps: Sequence[Step]) -> list[str]:
    """The outcomes of the turns among ``steps`` (turns and events in order)."""
    turns = [s for s in steps if isinstance(s, TurnFacts)]
    return turn_outcomes(turns, confirm_keys(steps))


def turn_outcome(
    turn: TurnFacts,
    after: TurnFacts | None = None,
    *,
    keyed: bool = False,
    reply_key: str | None = None,
) -> str:
    """One turn's outcome; ``after``: the turn that followed it (the reply to a question);
    ``keyed``: the turn was made by a key answering a question (no words, no silence);
    ``reply_key``: the answer (``yes``, ``no``) keyed to this turn's question, if any."""
    if turn.error and turn.route != "lookup":
        return "error"
    words = (turn.transcript or "").strip()
    if turn.route == "none" or (
        not words and not keyed and turn.route not in ("keypad", "confirmed")
    ):
        return "no_speech"
    if turn.route == "confirm":
        # Answered, even over the question ("press 1 for yes" stops it as it is said).
        if (after is not None and after.route == "confirmed") or reply_key == "yes":
            return "confirmed_yes"
        if reply_key == "no" or (after is not None and _reads(after) == "no"):
            return "confirmed_no"
    if turn.barged_in:
        return "cut"
    if turn.route == "repeat":
        return "repeated"
    if turn.route == "confirm":
        return "unanswered"
    if turn.route == "ask":
        return "asked"
    if turn.route == "fallback":
        return "declined"
    return "answered"


def _reads(turn: TurnFacts) -> str | None:
    return read_answer(turn.transcript or "") if turn.transcript else None


def is_person_intent(name: str | None) -> bool:
    """An intent whose name says it is the request for a person (``talk_to_person``)."""
    return name is not None and PERSON_WORDS.search(name) is not None


def call_outcome(steps: Sequence[Step], end_reason: str | None) -> CallOutcome:
    """A call's outcome from its turns and events in order and its end reason."""
    reason = end_reason or ""
    turns = [s for s in steps if isinstance(s, TurnFacts)]
    kinds = [s.kind for s in steps if isinstance(s, EventFacts)]
    keyed = confirm_keys(steps)
    outcomes = turn_outcomes(turns, keyed)
    if reason in CRASHED:
        return CallOutcome("failed", "crashed")
    if reason == "queue_full":
        return CallOutcome("refused", "queue_full")
    if reason == "queue_closed":
        return CallOutcome("refused", "draining")
    if reason == "queue_timeout":
        return CallOutcome("refused", "queue_timeout")
    if "queue_transfer" in kinds:
        return CallOutcome("transferred", "queue_overflow")
    if reason == "transferred" or "bridged" in kinds:
        return CallOutcome("transferred", _transfer_reason(steps, turns, outcomes))
    if "queue_abandoned" in kinds:
        return CallOutcome("abandoned", "queue")
    # The caller's (or the limits') end: what the call had come to by then.
    spoken = [(t, o) for t, o in zip(turns, outcomes, strict=True) if o != "no_speech"]
    last_step = _last_meaningful(steps, keyed)
    if reason == "silence":
        return CallOutcome("abandoned", "silence")
    if spoken and spoken[-1][1] == "error":
        return CallOutcome("failed", "error")
    if isinstance(last_step, EventFacts) and last_step.kind == "silence_prompt":
        return CallOutcome("abandoned", "silence")
    if isinstance(last_step, EventFacts) and last_step.kind in _TRANSFER_FAILED:
        return CallOutcome("abandoned", "transfer_failed")
    if isinstance(last_step, EventFacts) and last_step.kind in _COLLECTING:
        return CallOutcome("abandoned", "lookup")
    if not spoken:
        return CallOutcome("abandoned", "greeting")
    last, last_outcome = spoken[-1]
    if last_outcome in ("unanswered",):
        return CallOutcome("abandoned", "question")
    if last_outcome == "asked" or (last.route == "lookup" and last.error):
        return CallOutcome("abandoned", "lookup")
    if last_outcome == "declined":
        return CallOutcome("abandoned", "not_sure")
    if last_outcome == "cut" and not _answered_before(spoken[:-1]):
        return CallOutcome("abandoned", "not_sure" if last.route == "fallback" else "greeting")
    if reason == "bot_hangup":
        return CallOutcome("resolved", "goodbye")
    if reason == "max_duration":
        return CallOutcome("resolved", "max_duration")
    return CallOutcome("resolved", "caller_hangup")


#: Turn outcomes on which the caller's request was answered.
ANSWERED = frozenset({"answered", "repeated", "confirmed_yes"})


def _answered_before(spoken: Sequence[tuple[TurnFacts, str]]) -> bool:
    return any(o in ANSWERED for _, o in spoken)


_TRANSFER_FAILED = frozenset({"transfer_failed", "transfer_refused"})
_COLLECTING = frozenset({"collect_started", "collect_retry", "lookup_asked"})
#: Events that say nothing about where the call stood (kept out of "what came last").
_QUIET = frozenset(
    {
        "dtmf",
        "confirm_key",
        "filler",
        "barge_in",
        "max_call_warning",
        "call_limit",
        "guard_refused",
        "error",
        "post_call_answer",
    }
)


def _last_meaningful(steps: Sequence[Step], keyed: Mapping[int, str]) -> Step | None:
    """The last step that tells where the call stood: a turn the caller spoke (or keyed)
    in, or an event other than a digit, a filler, a barge-in..."""
    for step in reversed(steps):
        if isinstance(step, EventFacts):
            if step.kind not in _QUIET:
                return step
        elif turn_outcome(step, keyed=step.seq in keyed) != "no_speech":
            return step
    return None


def _transfer_reason(
    steps: Sequence[Step], turns: Sequence[TurnFacts], outcomes: Sequence[str]
) -> str:
    """Why the call was put through: what came before its (first) transfer."""
    before: list[Step] = []
    for step in steps:
        if isinstance(step, EventFacts) and step.kind == "transfer":
            break
        before.append(step)
    seqs = {s.seq for s in before if isinstance(s, TurnFacts)}
    prior = [(t, o) for t, o in zip(turns, outcomes, strict=True) if t.seq in seqs]
    if any(o == "confirmed_no" for _, o in prior):
        return "declined"
    failed_lookup = any(t.route == "lookup" and t.error for t, _ in prior)
    if failed_lookup or any(
        isinstance(s, EventFacts) and s.kind in ("collect_failed", "collect_abandoned")
        for s in before
    ):
        return "lookup_failed"
    spoken = [(t, o) for t, o in prior if o != "no_speech"]
    if not spoken:
        return "intent"
    last = spoken[-1][0]
    earlier = spoken[:-1]
    if last.route == "confirmed" and earlier and earlier[-1][0].route != "confirm":
        return "unsure"  # the bot's offer of a colleague, after it was unsure
    if any(o == "declined" for _, o in earlier):
        return "unsure"
    if is_person_intent(last.intent):
        return "asked"
    return "intent"
