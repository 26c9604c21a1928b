"""The structured per-turn log line: one JSON object per finished or interrupted turn."""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot.pipeline.turn import Turn

log = logging.getLogger("switchboard.turn")

TurnSink = Callable[[Turn], None]

#: A turn's mark (``Turn.stages``, not one of ``STAGES``) for when the caller began to hear
#: a filler; ``first_audio_out`` stays the first audio of the answer itself.
FILLER_AUDIO_OUT = "filler_audio_out"
#: A turn's model time (``Turn.model_ms``) for words synthesized in the caller's pause
#: (``bot.pipeline.said_ahead``): how long the speaker waited for them once the turn said
#: them (0: they were ready).
SAID_AHEAD_WAIT = "said_ahead_wait"


def _stages_ms(turn: Turn) -> dict[str, float]:
    stages = turn.since_speech_end_ms()
    filler, origin = turn.stages.get(FILLER_AUDIO_OUT), turn.stages.get("speech_end")
    if filler is not None and origin is not None:
        stages[FILLER_AUDIO_OUT] = round((filler - origin) * 1000.0, 1)
    return stages


def _pause_record(turn: Turn) -> dict[str, object] | None:
    """What the speculative pass in the caller's last pause found (flags only, no words):
    why the turn ended when it did."""
    spec = turn.speculation
    if spec is None:
        return None
    return {
        "route": spec.lookup.match.route if spec.lookup is not None else None,
        "heard_again": spec.second is not None,
        # What the pause's words were decided as (reused at the end of the turn when the
        # words and the conversation did not change).
        "decided": spec.decision.kind if spec.decision is not None else None,
        "hit": spec.hit,
        # The operator's words answer the pause's words (a cached intent, a knowledge entry
        # as written): such a turn may end as soon as the line is quiet.
        "answers": spec.answers,
        "doubtful": spec.doubtful,
        "nowhere": spec.nowhere,
        "hangs_up": spec.hangs_up,
        "acts_on_reply": spec.acts_on_reply,
        "greets": spec.greets,
        "acknowledges": spec.acknowledges,
        "failed": spec.failed,
        # The one reading the turn waited by (``bot.pipeline.pause_reading``).
        **(turn.pause_reading.record() if turn.pause_reading is not None else {}),
    }


def turn_record(turn: Turn) -> dict[str, object]:
    """The turn as a flat record. Transcripts are personal data and are left out."""
    return {
        "event": "turn",
        "call_id": turn.call_id,
        "turn": turn.index,
        "route": turn.route,
        "intent": turn.intent,
        "intent_score": turn.intent_score,
        "barge_in": turn.barged_in,
        "eot": turn.eot_reason,
        # What the turn's words were decided as, and why (no words: ``Decision.record``).
        "decision": turn.decision.record() if turn.decision is not None else None,
        "speculated": turn.speculation is not None,
        "pause": _pause_record(turn),
        # The reading the turn waited by, also where the pass is not the turn's (a turn
        # heard together with the one before it: ``goes_on``, that turn's index).
        "reading": turn.pause_reading.record() if turn.pause_reading is not None else None,
        "goes_on": turn.continues.index if turn.continues is not None else None,
        "filler": FILLER_AUDIO_OUT in turn.stages,
        "error": turn.error,
        "stages_ms": _stages_ms(turn),
        "model_ms": {k: round(v, 1) for k, v in turn.model_ms.items()},
        "caller_words": len(turn.transcript.split()),
        "answer_words": len(turn.answer.split()),
        # Why generated clauses were not spoken (reasons only: the details quote words).
        "refusals": [r.split(":", 1)[0] for r in turn.refusals],
    }


def log_turn(turn: Turn) -> None:
    """Write the turn's stage timings as one structured log line."""
    log.info("turn", extra={"record": turn_record(turn)})


def log_turn_with_text(turn: Turn) -> None:
    """Like ``log_turn``, plus a second line with what was said (opt-in: personal data)."""
    log_turn(turn)
    record = {
        "event": "turn_text",
        "call_id": turn.call_id,
        "turn": turn.index,
        "transcript": turn.transcript,
        "answer": turn.answer,
    }
    if turn.speculation is not None:  # the words heard in the pause, by each recognizer
        record["pause_heard"] = turn.speculation.heard
        record["pause_second"] = turn.speculation.second
    if turn.continues is not None:  # heard with the turn before: its own words, alone
        record["own_words"] = turn.own_words
    log.info("turn text", extra={"record": record})
