"""Outcomes: what the bot came to on its calls, over a time range, and calls and turns as CSV.

Figures over the calls answered in ``[since, until)`` (default: the last 7 days), ended
ones only: how many were resolved by the bot (containment), transferred and abandoned, by
day and by hour of the day (UTC); transfers by reason; abandonment by place; the average
call length and the first answer's latency (P50, P95); the words the bot was "not sure"
about, the most calls first, then the most turns (each one the Missed questions page
filtered to it); the
answers to the optional post-call question; and per intent or knowledge entry, how often
callers asked about it, how often
it answered, how often its confirmation question got a "no", and how often the call was
put through or hung up by the caller within the next turn. Two configuration versions side
by side: ``/outcomes/compare`` gives the same figures for each.

A call with no stored outcome (logged before the outcome columns) is given one by the same
rules (``bot.calllog.outcomes``) from its rows as it is read.
"""

from __future__ import annotations

import csv
import io
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sqlalchemy import Select, select

from admin.api.calls import CallFilters, _filtered, _percentile
from admin.api.pagination import ApiTime, DbText
from admin.db import aware, now, to_utc
from admin.deps import SessionDep, Viewer
from admin.errors import error, error_responses
from bot.calllog.models import Call, CallEvent, TurnRow
from bot.calllog.outcomes import (
    BOT_ENDS,
    CALL_OUTCOMES,
    ENTRY_ROUTES,
    EventFacts,
    Step,
    TurnFacts,
    call_outcome,
    confirm_keys,
    turn_outcomes,
)
from bot.intents.confirm import read_answer
from bot.intents.match import normalize

router = APIRouter(prefix="/api/v1", tags=["calls"])

#: The longest range one request figures over.
MAX_DAYS = 366
DEFAULT_DAYS = 7
#: The most calls one CSV export holds (newest first).
MAX_CSV_CALLS = 50_000
#: The most "not sure" topics a summary lists.
MAX_NOT_SURE = 50


class Rates(BaseModel):
    """Ended calls by outcome, and the shares of all of them."""

    calls: int = 0
    resolved: int = 0
    transferred: int = 0
    abandoned: int = 0
    refused: int = 0
    failed: int = 0
    #: resolved / calls (null without calls).
    containment_rate: float | None = None
    transfer_rate: float | None = None
    abandonment_rate: float | None = None


class DayRates(Rates):
    day: str  # YYYY-MM-DD, UTC


class HourRates(Rates):
    hour: int  # 0..23, UTC


class EntryFigures(BaseModel):
    """One intent or knowledge entry (``name``) in the range's turns."""

    name: str
    #: Turns that named it (answered from it, or asked about it).
    asked: int = 0
    #: Turns it answered (routes exact, semantic, confirmed, knowledge, repeat, and a keypad
    #: option that plays it).
    answered: int = 0
    #: Its confirmation question, answered "no".
    confirmed_no: int = 0
    #: Turns naming it after which the call was put through within the next turn.
    followed_by_transfer: int = 0
    #: ... after which the caller hung up within the next turn.
    followed_by_hangup: int = 0


class NotSureTopic(BaseModel):
    """What callers said on the turns the bot was "not sure" about (turn outcome
    ``declined``), grouped by their words as Missed questions groups them
    (``bot.intents.match.normalize``) and ranked as it ranks them: ``calls``, then
    ``count``, then the most recent first."""

    #: The words as last said.
    text: str
    #: The words as compared: ``GET /missed-questions?words=`` gives their group.
    normalized: str
    #: Distinct calls in the range with such a turn: what the topics are ranked by first.
    calls: int
    #: Turns in the range (a call may ask more than once): the second key of the ranking.
    count: int


class PostCallAnswers(BaseModel):
    """The answers to the optional post-call question ("Did we answer your question?")."""

    #: Calls it was asked on.
    asked: int = 0
    yes: int = 0
    no: int = 0
    #: Asked, and nothing keyed or said in time (or the caller hung up).
    none: int = 0
    #: yes / (yes + no); null without a yes or a no.
    yes_rate: float | None = None


class OutcomeSummary(BaseModel):
    since: datetime
    until: datetime
    #: The configuration version the figures are limited to, if any.
    config_version: str | None
    totals: Rates
    by_day: list[DayRates]
    by_hour: list[HourRates]
    transfers_by_reason: dict[str, int]
    abandoned_by_place: dict[str, int]
    refused_by_reason: dict[str, int]
    failed_by_reason: dict[str, int]
    #: Mean of ``ended_at - answered_at`` over the ended calls, seconds.
    average_call_s: float | None
    #: The first answer's latency: from the end of the caller's speech (or their key) to
    #: the first audio of the call's first answered turn that has audio, as stored
    #: (``first_audio_out_at - speech_end_at``, ms); P50 and P95 over the calls that had
    #: an answered turn with both times (``first_answer_calls``).
    first_answer_calls: int
    first_answer_p50_ms: float | None
    first_answer_p95_ms: float | None
    #: The words the bot was "not sure" about, the most calls first, then the most turns
    #: (at most 50).
    not_sure_topics: list[NotSureTopic]
    post_call: PostCallAnswers
    entries: list[EntryFigures]


class OutcomeComparison(BaseModel):
    a: OutcomeSummary
    b: OutcomeSummary


@dataclass
class _Call:
    id: uuid.UUID
    answered_at: datetime
    ended_at: datetime
    end_reason: str
    outcome: str
    reason: str
    turns: list[TurnFacts]
    turn_outcomes: list[str]
    #: The first answered turn's end of speech to first audio (ms), if any.
    first_answer_ms: float | None
    #: When each turn was logged (the same order as ``turns``).
    finished: list[datetime]
    post_call_answer: str | None


def _range(since: datetime | None, until: datetime | None) -> tuple[datetime, datetime]:
    """The range asked for, in UTC; 422 naming the parameter when it is not one."""
    end = to_utc(until) or now()
    start = to_utc(since) or end - timedelta(days=DEFAULT_DAYS)
    if start >= end:
        raise error(422, "since must be before until", loc=("query", "since"), type="value_error")
    if end - start > timedelta(days=MAX_DAYS):
        raise error(
            422,
            f"the range is longer than {MAX_DAYS} days",
            loc=("query", "until"),
            type="value_error",
        )
    return start, end


async def _calls(
    session: SessionDep, query: Select[Any], *, limit: int | None = None
) -> list[_Call]:
    """The ended calls ``query`` selects (a ``select(Call)``), each with its outcome, its
    turns and theirs (the rules applied to what has none stored)."""
    if limit is not None:
        query = query.limit(limit)
    calls = (await session.execute(query.where(Call.ended_at.is_not(None)))).scalars().all()
    if not calls:
        return []
    ids = [c.id for c in calls]
    turns: dict[uuid.UUID, list[TurnRow]] = defaultdict(list)
    for chunk in _chunks(ids, 500):
        rows = await session.execute(
            select(TurnRow).where(TurnRow.call_id.in_(chunk)).order_by(TurnRow.seq)
        )
        for row in rows.scalars():
            turns[row.call_id].append(row)
    # Calls logged before outcomes were stored: their events, to decide one now.
    undecided = [c.id for c in calls if c.outcome is None]
    events: dict[uuid.UUID, list[CallEvent]] = defaultdict(list)
    for chunk in _chunks(undecided, 500):
        for ev in (
            await session.execute(
                select(CallEvent).where(CallEvent.call_id.in_(chunk)).order_by(CallEvent.at)
            )
        ).scalars():
            events[ev.call_id].append(ev)
    out = []
    for c in calls:
        call_turns = turns[c.id]
        facts = [_facts(t) for t in call_turns]
        steps = _steps(call_turns, events[c.id]) if c.outcome is None else []
        derived = turn_outcomes(facts, confirm_keys(steps))
        outcomes = [t.outcome or d for t, d in zip(call_turns, derived, strict=True)]
        outcome, reason = c.outcome, c.outcome_reason
        if outcome is None:
            decided = call_outcome(steps, c.end_reason)
            outcome, reason = decided.outcome, decided.reason
        answered, ended = aware(c.answered_at), aware(c.ended_at)
        assert answered is not None and ended is not None
        finished = [aware(t.finished_at) or ended for t in call_turns]
        out.append(
            _Call(
                c.id,
                answered,
                ended,
                c.end_reason or "",
                outcome,
                reason or "",
                facts,
                outcomes,
                _first_answer_ms(call_turns, outcomes),
                finished,
                c.post_call_answer,
            )
        )
    return out


def _first_answer_ms(rows: list[TurnRow], outcomes: list[str]) -> float | None:
    """The first answered turn's end of speech (a key's: the key) to its first audio (ms);
    an answered turn with no audio of its own (a menu key that puts the caller through) is
    passed over. None without one."""
    for row, outcome in zip(rows, outcomes, strict=True):
        spoke, heard = aware(row.speech_end_at), aware(row.first_audio_out_at)
        if outcome == "answered" and spoke is not None and heard is not None:
            return round((heard - spoke).total_seconds() * 1000.0, 1)
    return None


def _chunks(ids: list[uuid.UUID], n: int) -> Iterable[list[uuid.UUID]]:
    for start in range(0, len(ids), n):
        yield ids[start : start + n]


def _facts(row: TurnRow) -> TurnFacts:
    return TurnFacts(
        seq=row.seq,
        route=row.route,
        intent=row.intent,
        transcript=row.transcript,
        answer=row.answer,
        barged_in=row.barged_in,
        error=row.error,
    )


def _steps(turns: list[TurnRow], events: list[CallEvent]) -> list[Step]:
    """Turns and events in the order they happened (a turn at its ``finished_at``)."""
    timed: list[tuple[datetime, int, Step]] = []
    for row in turns:
        at = aware(row.finished_at)
        assert at is not None
        timed.append((at, 0, _facts(row)))
    for ev in events:
        at = aware(ev.at)
        assert at is not None
        timed.append((at, 1, EventFacts(kind=ev.kind, detail=ev.detail)))
    timed.sort(key=lambda x: (x[0], x[1]))
    return [step for _, _, step in timed]


def _rates(calls: list[_Call]) -> dict[str, Any]:
    n = len(calls)
    counts = Counter(c.outcome for c in calls)
    figures: dict[str, Any] = {"calls": n} | {o: counts.get(o, 0) for o in CALL_OUTCOMES}
    share = (lambda k: round(counts.get(k, 0) / n, 4)) if n else (lambda k: None)
    figures["containment_rate"] = share("resolved")
    figures["transfer_rate"] = share("transferred")
    figures["abandonment_rate"] = share("abandoned")
    return figures


def _entries(calls: list[_Call]) -> list[EntryFigures]:
    entries: dict[str, EntryFigures] = {}
    for call in calls:
        by_caller = call.end_reason not in BOT_ENDS
        for i, (turn, outcome) in enumerate(zip(call.turns, call.turn_outcomes, strict=True)):
            if not turn.intent:
                continue
            e = entries.setdefault(turn.intent, EntryFigures(name=turn.intent))
            e.asked += 1
            if turn.route in ENTRY_ROUTES:
                e.answered += 1
            if outcome == "confirmed_no":
                e.confirmed_no += 1
            near_end = len(call.turns) - 1 - i <= 1
            if near_end and call.outcome == "transferred":
                e.followed_by_transfer += 1
            elif near_end and by_caller:
                e.followed_by_hangup += 1
    return sorted(entries.values(), key=lambda e: (-e.asked, e.name))


def _summary(
    calls: list[_Call], since: datetime, until: datetime, version: str | None
) -> OutcomeSummary:
    days: dict[str, list[_Call]] = defaultdict(list)
    hours: dict[int, list[_Call]] = defaultdict(list)
    for c in calls:
        days[c.answered_at.date().isoformat()].append(c)
        hours[c.answered_at.hour].append(c)

    def reasons(outcome: str) -> dict[str, int]:
        return dict(Counter(c.reason for c in calls if c.outcome == outcome).most_common())

    lengths = [(c.ended_at - c.answered_at).total_seconds() for c in calls]
    first = [c.first_answer_ms for c in calls if c.first_answer_ms is not None]
    return OutcomeSummary(
        since=since,
        until=until,
        config_version=version,
        totals=Rates(**_rates(calls)),
        by_day=[DayRates(day=d, **_rates(days[d])) for d in sorted(days)],
        by_hour=[HourRates(hour=h, **_rates(hours[h])) for h in sorted(hours)],
        transfers_by_reason=reasons("transferred"),
        abandoned_by_place=reasons("abandoned"),
        refused_by_reason=reasons("refused"),
        failed_by_reason=reasons("failed"),
        average_call_s=round(sum(lengths) / len(lengths), 3) if lengths else None,
        first_answer_calls=len(first),
        first_answer_p50_ms=_percentile(first, 50),
        first_answer_p95_ms=_percentile(first, 95),
        not_sure_topics=_not_sure(calls),
        post_call=_post_call(calls),
        entries=_entries(calls),
    )


def _not_sure(calls: list[_Call]) -> list[NotSureTopic]:
    """The declined turns' words, grouped by what the matcher compares, the most calls
    first (then the most turns, then the most recent), as Missed questions ranks them."""
    groups: dict[str, tuple[NotSureTopic, datetime]] = {}
    seen: dict[str, set[uuid.UUID]] = {}  # the calls of each group
    for call in calls:
        before: TurnFacts | None = None
        for turn, outcome, at in zip(call.turns, call.turn_outcomes, call.finished, strict=True):
            asked, before = before, turn
            key = normalize(turn.transcript or "")
            if outcome != "declined" or not key:
                continue
            if asked is not None and asked.route == "confirm" and read_answer(key) is not None:
                continue  # the caller's "no" to the question before: no question itself
            found = groups.get(key)
            text = (turn.transcript or "").strip()
            if found is None:
                groups[key] = (NotSureTopic(text=text, normalized=key, calls=1, count=1), at)
                seen[key] = {call.id}
            else:
                topic, last = found
                topic.count += 1
                seen[key].add(call.id)
                topic.calls = len(seen[key])
                if at >= last:
                    topic.text = text
                    groups[key] = (topic, at)
    ranked = sorted(groups.values(), key=lambda g: (-g[0].calls, -g[0].count, -g[1].timestamp()))
    return [topic for topic, _ in ranked[:MAX_NOT_SURE]]


def _post_call(calls: list[_Call]) -> PostCallAnswers:
    counts = Counter(c.post_call_answer for c in calls if c.post_call_answer is not None)
    yes, no = counts.get("yes", 0), counts.get("no", 0)
    return PostCallAnswers(
        asked=sum(counts.values()),
        yes=yes,
        no=no,
        none=counts.get("none", 0),
        yes_rate=round(yes / (yes + no), 4) if yes + no else None,
    )


async def _figures(
    session: SessionDep, since: datetime, until: datetime, version: str | None
) -> OutcomeSummary:
    query = select(Call).where(Call.answered_at >= since, Call.answered_at < until)
    if version is not None:
        query = query.where(Call.config_version == version)
    return _summary(await _calls(session, query), since, until, version)


Since = Annotated[ApiTime | None, Query(description="answered at or after (ISO 8601)")]
Until = Annotated[ApiTime | None, Query(description="answered before (ISO 8601)")]
Version = Annotated[DbText | None, Query(max_length=64, description="configuration version")]


@router.get(
    "/outcomes/summary",
    response_model=OutcomeSummary,
    summary="Containment, transfers and abandonment over a time range",
    responses=error_responses(422),
)
async def outcomes_summary(
    session: SessionDep,
    _who: Viewer,
    since: Since = None,
    until: Until = None,
    config_version: Version = None,
) -> OutcomeSummary:
    start, end = _range(since, until)
    return await _figures(session, start, end, config_version)


@router.get(
    "/outcomes/compare",
    response_model=OutcomeComparison,
    summary="The outcome figures of two configuration versions side by side",
    responses=error_responses(422),
)
async def outcomes_compare(
    session: SessionDep,
    _who: Viewer,
    a: Annotated[DbText, Query(min_length=1, max_length=64, description="one version")],
    b: Annotated[DbText, Query(min_length=1, max_length=64, description="the other")],
    since: Since = None,
    until: Until = None,
) -> OutcomeComparison:
    start, end = _range(since, until)
    return OutcomeComparison(
        a=await _figures(session, start, end, a), b=await _figures(session, start, end, b)
    )


class ExportFilters(CallFilters):
    """The Calls page's filters, and the outcome."""

    outcome: DbText | None = Field(None, max_length=32, description="the call's outcome")
    outcome_reason: DbText | None = Field(None, max_length=32)


def _cell(value: object) -> str:
    """A CSV cell; text a spreadsheet would take for a formula is quoted with ``'``."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _csv(header: list[str], rows: Iterable[list[Any]], name: str) -> Response:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([_cell(v) for v in row])
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


CSV: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/csv": {}}, "description": "CSV, one row a line"}
}


@router.get(
    "/outcomes/calls.csv",
    summary="Ended calls with their outcomes, as CSV (the Calls page's filters)",
    response_class=Response,
    responses=CSV | error_responses(422),
)
async def calls_csv(
    session: SessionDep, _who: Viewer, filters: Annotated[ExportFilters, Query()]
) -> Response:
    calls = await _exported_calls(session, filters)
    rows = await _call_rows(session, [c.id for c in calls])
    header = [
        "id",
        "sip_call_id",
        "caller",
        "callee",
        "node",
        "config_version",
        "answered_at",
        "ended_at",
        "length_s",
        "end_reason",
        "outcome",
        "outcome_reason",
        "post_call_answer",
        "first_answer_ms",
        "turns",
    ]
    lines = []
    for c in calls:
        row = rows[c.id]
        length = round((c.ended_at - c.answered_at).total_seconds(), 3)
        lines.append(
            [
                c.id,
                row.sip_call_id,
                row.caller,
                row.callee,
                row.node,
                row.config_version,
                c.answered_at,
                c.ended_at,
                length,
                c.end_reason,
                c.outcome,
                c.reason,
                c.post_call_answer,
                c.first_answer_ms,
                len(c.turns),
            ]
        )
    return _csv(header, lines, "calls.csv")


@router.get(
    "/outcomes/turns.csv",
    summary="The turns of ended calls with their outcomes, as CSV (the Calls page's filters)",
    response_class=Response,
    responses=CSV | error_responses(422),
)
async def turns_csv(
    session: SessionDep, _who: Viewer, filters: Annotated[ExportFilters, Query()]
) -> Response:
    calls = await _exported_calls(session, filters)
    header = [
        "call_id",
        "seq",
        "route",
        "intent",
        "outcome",
        "barged_in",
        "error",
        "transcript",
        "answer",
        "call_outcome",
        "call_outcome_reason",
    ]
    lines = [
        [
            c.id,
            t.seq,
            t.route,
            t.intent,
            o,
            t.barged_in,
            t.error,
            t.transcript,
            t.answer,
            c.outcome,
            c.reason,
        ]
        for c in calls
        for t, o in zip(c.turns, c.turn_outcomes, strict=True)
    ]
    return _csv(header, lines, "turns.csv")


async def _exported_calls(session: SessionDep, filters: ExportFilters) -> list[_Call]:
    if filters.since is not None and filters.until is not None:
        _range(filters.since, filters.until)
    query = _filtered(select(Call), filters).order_by(Call.answered_at.desc(), Call.id)
    calls = await _calls(session, query, limit=MAX_CSV_CALLS)
    if filters.outcome:
        calls = [c for c in calls if c.outcome == filters.outcome]
    if filters.outcome_reason:
        calls = [c for c in calls if c.reason == filters.outcome_reason]
    return calls


async def _call_rows(session: SessionDep, ids: list[uuid.UUID]) -> dict[uuid.UUID, Call]:
    rows: dict[uuid.UUID, Call] = {}
    for chunk in _chunks(ids, 500):
        found = await session.execute(select(Call).where(Call.id.in_(chunk)))
        rows.update({c.id: c for c in found.scalars()})
    return rows
