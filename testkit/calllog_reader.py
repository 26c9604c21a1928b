"""The bot's call log as a benchmark reads it: each call's turns and fillers, by SIP Call-ID.

Read after the bot has stopped, from the embedded SQLite call log in its data folder. Stage
times are kept as ``time.time()`` seconds, the clock the bot logged them on.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from bot.calllog.models import Call, CallEvent, TurnRow
from bot.pipeline.turn import STAGES as LOG_STAGES

#: The routes of an intent match: the cache answered with ready audio.
CACHE_ROUTES = frozenset({"exact", "semantic"})
#: The call-log events that end a caller's wait in the call queue.
QUEUE_ENDS = ("dequeued", "queue_timeout", "queue_abandoned", "queue_transfer", "queue_full")


@dataclass(frozen=True)
class LogTurn:
    """One turn in the bot's call log; stage times are ``time.time()`` seconds."""

    seq: int
    route: str
    intent: str | None
    barged_in: bool
    stages: dict[str, float]
    model_ms: dict[str, float]
    #: What the bot's ASR heard in this turn.
    transcript: str | None = None
    #: What failed in the turn (the caller heard the apology), if anything.
    error: str | None = None

    @property
    def route_class(self) -> str:
        """The route class: "cache" for an intent match, else the bot's route ("llm"...)."""
        return "cache" if self.route in CACHE_ROUTES else self.route

    def durations_ms(self) -> dict[str, float]:
        """The bot's stage durations: eot wait, ASR, lookup, first token, first audio.

        ``first_token`` is route decided to the LLM's first token; ``first_audio`` is the
        bot's own voice-to-voice, caller's speech end to its first audio out.
        """
        s = self.stages
        spans = {
            "eot_wait": ("speech_end", "eot_decided"),
            "asr": ("eot_decided", "transcript_ready"),
            "lookup": ("transcript_ready", "route_decided"),
            "first_token": ("route_decided", "first_token"),
            "first_audio": ("speech_end", "first_audio_out"),
        }
        return {name: (s[b] - s[a]) * 1000 for name, (a, b) in spans.items() if a in s and b in s}


@dataclass
class LoggedCall:
    """A call in the bot's call log: its turns in order, and when fillers played."""

    turns: list[LogTurn] = field(default_factory=list)
    #: ``time.time()`` of each filler ("one moment please") played while an answer was due.
    fillers: list[float] = field(default_factory=list)
    #: The call queue (``bot.queue``): when the caller got the bot (``dequeued``), how
    #: long they waited, and how a wait ended (``dequeued``, ``queue_timeout``...). None
    #: for a call that never waited.
    dequeued_at: float | None = None
    queue_wait_s: float | None = None
    queue_outcome: str | None = None


def read_call_log(db: Path) -> dict[str, LoggedCall]:
    """Every call by SIP Call-ID, from the bot's SQLite call log."""
    engine = create_engine(f"sqlite:///{db}")
    out: dict[str, LoggedCall] = {}
    try:
        with Session(engine) as session:
            for sip_call_id in session.scalars(select(Call.sip_call_id)):
                out.setdefault(sip_call_id, LoggedCall())
            fillers = (
                select(Call.sip_call_id, CallEvent.at)
                .join(CallEvent, CallEvent.call_id == Call.id)
                .where(CallEvent.kind == "filler")
                .order_by(CallEvent.at)
            )
            for sip_call_id, at in session.execute(fillers):
                out[sip_call_id].fillers.append(_utc_seconds(at))
            waits = (
                select(Call.sip_call_id, CallEvent.kind, CallEvent.at, CallEvent.detail)
                .join(CallEvent, CallEvent.call_id == Call.id)
                .where(CallEvent.kind.in_(QUEUE_ENDS))
            )
            for sip_call_id, kind, at, detail in session.execute(waits):
                logged = out[sip_call_id]
                logged.queue_outcome = kind
                logged.queue_wait_s = _waited(detail)
                if kind == "dequeued":
                    logged.dequeued_at = _utc_seconds(at)
            query = (
                select(Call.sip_call_id, TurnRow)
                .join(TurnRow, TurnRow.call_id == Call.id)
                .order_by(Call.sip_call_id, TurnRow.seq)
            )
            for sip_call_id, row in session.execute(query):
                stages = {}
                for name in LOG_STAGES:
                    at = getattr(row, f"{name}_at")
                    if at is not None:
                        stages[name] = _utc_seconds(at)
                out[sip_call_id].turns.append(
                    LogTurn(
                        seq=row.seq,
                        route=row.route,
                        intent=row.intent,
                        barged_in=bool(row.barged_in),
                        stages=stages,
                        model_ms=dict(row.model_ms or {}),
                        transcript=row.transcript,
                        error=row.error,
                    )
                )
    finally:
        engine.dispose()
    return out


def _waited(detail: str | None) -> float | None:
    """The seconds of a queue event's detail (``waited 4.2 s``)."""
    parts = (detail or "").split()
    try:
        return float(parts[1]) if len(parts) >= 2 and parts[0] == "waited" else None
    except ValueError:
        return None


def _utc_seconds(at: dt.datetime) -> float:
    """A call-log timestamp (UTC; SQLite hands it back without its zone) as time.time()."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return at.timestamp()
