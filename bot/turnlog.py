"""The structured per-turn log line: one JSON object per finished or interrupted turn."""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot.turn import Turn

log = logging.getLogger("switchboard.turn")

TurnSink = Callable[[Turn], None]


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
        "error": turn.error,
        "stages_ms": turn.since_speech_end_ms(),
        "model_ms": {k: round(v, 1) for k, v in turn.model_ms.items()},
        "caller_words": len(turn.transcript.split()),
        "answer_words": len(turn.answer.split()),
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
    log.info("turn text", extra={"record": record})
