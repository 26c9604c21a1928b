"""The call log read back: calls with filters, one call in full, live calls, a summary."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field
from sqlalchemy import Select, exists, func, select

from admin.api.pagination import ApiTime, DbText, Page, PageDep
from admin.audit import record
from admin.db import aware, now, to_utc
from admin.deps import Editor, SessionDep, Viewer
from admin.errors import error, error_responses
from admin.node_port import NodePort
from bot.calllog.models import Call, CallEvent, TurnRow
from bot.pipeline.turn import STAGES
from bot.recording.files import inside_folder, partial_path

router = APIRouter(prefix="/api/v1", tags=["calls"])

#: Routes answered from the intent cache's ready audio.
CACHE_ROUTES = frozenset({"exact", "semantic"})


class CallRead(BaseModel):
    id: uuid.UUID
    sip_call_id: str
    caller: str
    callee: str
    node: str
    config_version: str
    answered_at: datetime
    ended_at: datetime | None
    end_reason: str | None
    #: What the call came to and why (docs/calllog.md, "Outcomes"); null while it is on.
    outcome: str | None = None
    outcome_reason: str | None = None
    #: The caller's answer to the post-call question, if it was asked (``yes``, ``no``,
    #: ``none``: no answer in time); shown beside the outcome.
    post_call_answer: str | None = None
    turns: int
    #: The call was recorded and its file not yet purged (fetch it from ``.../recording``).
    recorded: bool


class TurnRead(BaseModel):
    seq: int
    transcript: str | None
    answer: str | None
    route: str
    intent: str | None
    intent_score: float | None
    barged_in: bool
    error: str | None
    #: What the turn did (``answered``, ``confirmed_no``, ``declined``...), once the call ended.
    outcome: str | None = None
    #: Wall-clock time of each stage the turn reached (``speech_end``, ``first_audio_out``...).
    stages: dict[str, datetime]
    #: Each stage in ms after ``speech_end``: the turn's latency waterfall.
    stage_ms: dict[str, float]
    #: The caller's end of speech to the first audio of the answer (ms).
    voice_to_voice_ms: float | None
    model_ms: dict[str, float]
    #: What the turn's words were decided as, and why (kind, route, why, heard, intent,
    #: asks: docs/design.md, "One decision a turn"); None: not decided (a key, a number).
    decision: dict[str, str | None] | None = None
    finished_at: datetime


class EventRead(BaseModel):
    at: datetime
    kind: str
    detail: str | None


class TranscriptLine(BaseModel):
    seq: int
    speaker: str
    text: str


class CallDetail(CallRead):
    turns_detail: list[TurnRead]
    events: list[EventRead]
    transcript: list[TranscriptLine]


class LiveCallRead(BaseModel):
    id: uuid.UUID
    sip_call_id: str
    caller: str
    callee: str
    node: str
    answered_at: datetime
    turns: int
    last_route: str | None


class RouteLatency(BaseModel):
    route: str
    turns: int
    p50_ms: float | None
    p95_ms: float | None


class HourCount(BaseModel):
    hour: datetime
    calls: int


class LatencyPoint(BaseModel):
    """Voice-to-voice of one route's turns in one time bucket."""

    start: datetime
    route: str
    turns: int
    p50_ms: float
    p95_ms: float


class LatencySeries(BaseModel):
    since: datetime
    until: datetime
    bucket_minutes: int
    points: list[LatencyPoint]


class Summary(BaseModel):
    since: datetime
    until: datetime
    calls: int
    turns: int
    #: Turns answered from the intent cache (routes exact and semantic) over all turns.
    cache_hit_rate: float | None
    #: Voice-to-voice (end of the caller's speech to the first answer audio), per route.
    voice_to_voice: list[RouteLatency]
    calls_per_hour: list[HourCount]
    #: Calls this node is on now (None when the API runs without a node).
    live_calls: int | None


def _call_read(call: Call, turns: int) -> dict[str, Any]:
    return {
        "id": call.id,
        "sip_call_id": call.sip_call_id,
        "caller": call.caller,
        "callee": call.callee,
        "node": call.node,
        "config_version": call.config_version,
        "answered_at": aware(call.answered_at),
        "ended_at": aware(call.ended_at),
        "end_reason": call.end_reason,
        "outcome": call.outcome,
        "outcome_reason": call.outcome_reason,
        "post_call_answer": call.post_call_answer,
        "turns": turns,
        "recorded": call.recording_path is not None,
    }


class CallFilters(BaseModel):
    """Which calls to list; every filter given must hold."""

    since: ApiTime | None = Field(None, description="answered at or after (ISO 8601)")
    until: ApiTime | None = Field(None, description="answered before (ISO 8601)")
    caller: DbText | None = Field(None, max_length=255, description="part of the caller URI")
    route: DbText | None = Field(None, max_length=32, description="has a turn on this route")
    end_reason: DbText | None = Field(None, max_length=64)
    node: DbText | None = Field(None, max_length=255)


def _filtered(query: Select[Any], f: CallFilters) -> Select[Any]:
    since, until = to_utc(f.since), to_utc(f.until)
    if since is not None:
        query = query.where(Call.answered_at >= since)
    if until is not None:
        query = query.where(Call.answered_at < until)
    if f.caller:
        query = query.where(Call.caller.contains(f.caller, autoescape=True))
    if f.end_reason:
        query = query.where(Call.end_reason == f.end_reason)
    if f.node:
        query = query.where(Call.node == f.node)
    if f.route:
        query = query.where(
            exists().where(TurnRow.call_id == Call.id).where(TurnRow.route == f.route)
        )
    return query


def _turn_count() -> Any:
    return select(func.count()).where(TurnRow.call_id == Call.id).correlate(Call).scalar_subquery()


@router.get("/calls", response_model=Page[CallRead], summary="Calls, newest first")
async def list_calls(
    session: SessionDep,
    _who: Viewer,
    page: PageDep,
    filters: Annotated[CallFilters, Query()],
) -> Page[CallRead]:
    total = (
        await session.execute(_filtered(select(func.count()).select_from(Call), filters))
    ).scalar_one()
    rows = await session.execute(
        _filtered(select(Call, _turn_count()), filters)
        .order_by(Call.answered_at.desc(), Call.id)
        .limit(page.limit)
        .offset(page.offset)
    )
    items = [CallRead(**_call_read(call, n)) for call, n in rows.all()]
    return Page(items=items, total=total, limit=page.limit, offset=page.offset)


def _turn_read(row: TurnRow) -> TurnRead:
    stages = {s: aware(getattr(row, f"{s}_at")) for s in STAGES}
    present = {s: at for s, at in stages.items() if at is not None}
    origin = present.get("speech_end")
    stage_ms = (
        {s: round((at - origin).total_seconds() * 1000.0, 1) for s, at in present.items()}
        if origin is not None
        else {}
    )
    finished = aware(row.finished_at)
    assert finished is not None
    return TurnRead(
        seq=row.seq,
        transcript=row.transcript,
        answer=row.answer,
        route=row.route,
        intent=row.intent,
        intent_score=row.intent_score,
        barged_in=row.barged_in,
        error=row.error,
        outcome=row.outcome,
        stages=present,
        stage_ms=stage_ms,
        voice_to_voice_ms=stage_ms.get("first_audio_out"),
        model_ms=row.model_ms or {},
        decision=row.decision,
        finished_at=finished,
    )


@router.get("/calls/live", response_model=list[LiveCallRead], summary="Calls in progress")
async def live_calls(request: Request, session: SessionDep, _who: Viewer) -> list[LiveCallRead]:
    """The node's own calls when the API runs inside one; otherwise the calls every node
    has answered and not yet ended (from the database)."""
    node: NodePort | None = request.app.state.node
    if node is not None:
        return [LiveCallRead.model_validate(c, from_attributes=True) for c in node.live_calls()]
    rows = await session.execute(
        select(Call, _turn_count()).where(Call.ended_at.is_(None)).order_by(Call.answered_at)
    )
    return [
        LiveCallRead(
            id=call.id,
            sip_call_id=call.sip_call_id,
            caller=call.caller,
            callee=call.callee,
            node=call.node,
            answered_at=aware(call.answered_at),
            turns=n,
            last_route=None,
        )
        for call, n in rows.all()
    ]


@router.get(
    "/calls/{call_id}",
    response_model=CallDetail,
    summary="One call in full",
    responses=error_responses(404),
)
async def call_detail(call_id: uuid.UUID, session: SessionDep, _who: Viewer) -> CallDetail:
    call = await session.get(Call, call_id)
    if call is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no call {call_id}")
    turns = (
        (
            await session.execute(
                select(TurnRow).where(TurnRow.call_id == call_id).order_by(TurnRow.seq)
            )
        )
        .scalars()
        .all()
    )
    events = (
        (
            await session.execute(
                select(CallEvent).where(CallEvent.call_id == call_id).order_by(CallEvent.at)
            )
        )
        .scalars()
        .all()
    )
    transcript: list[TranscriptLine] = []
    for turn in turns:
        if turn.transcript:
            transcript.append(TranscriptLine(seq=turn.seq, speaker="caller", text=turn.transcript))
        if turn.answer:
            transcript.append(TranscriptLine(seq=turn.seq, speaker="bot", text=turn.answer))
    return CallDetail(
        **_call_read(call, len(turns)),
        turns_detail=[_turn_read(t) for t in turns],
        events=[EventRead(at=aware(e.at), kind=e.kind, detail=e.detail) for e in events],
        transcript=transcript,
    )


def _percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


@router.get("/summary", response_model=Summary, summary="Latency, cache hits and call volume")
async def summary(
    request: Request,
    session: SessionDep,
    _who: Viewer,
    since: Annotated[ApiTime | None, Query(description="default: 24 hours ago")] = None,
    until: Annotated[ApiTime | None, Query(description="default: now")] = None,
) -> Summary:
    until = to_utc(until) or now()
    since = to_utc(since) or until - timedelta(hours=24)
    if since >= until:
        raise error(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            "must be before until",
            loc=("query", "since"),
            type="value_error",
        )
    answered = (
        (
            await session.execute(
                select(Call.answered_at).where(Call.answered_at >= since, Call.answered_at < until)
            )
        )
        .scalars()
        .all()
    )
    turns = (
        await session.execute(
            select(TurnRow.route, TurnRow.speech_end_at, TurnRow.first_audio_out_at)
            .join(Call, Call.id == TurnRow.call_id)
            .where(Call.answered_at >= since, Call.answered_at < until)
        )
    ).all()
    per_route: dict[str, list[float]] = defaultdict(list)
    counts: Counter[str] = Counter()
    for route, spoke, heard in turns:
        counts[route] += 1
        if spoke is not None and heard is not None:
            per_route[route].append((heard - spoke).total_seconds() * 1000.0)
    hours: Counter[datetime] = Counter()
    for at in answered:
        at_utc = aware(at)
        assert at_utc is not None
        hours[at_utc.replace(minute=0, second=0, microsecond=0)] += 1
    node: NodePort | None = request.app.state.node
    return Summary(
        since=since,
        until=until,
        calls=len(answered),
        turns=len(turns),
        cache_hit_rate=(
            round(sum(counts[r] for r in CACHE_ROUTES) / len(turns), 4) if turns else None
        ),
        voice_to_voice=[
            RouteLatency(
                route=route,
                turns=counts[route],
                p50_ms=_percentile(per_route[route], 50),
                p95_ms=_percentile(per_route[route], 95),
            )
            for route in sorted(counts)
        ],
        calls_per_hour=[HourCount(hour=h, calls=n) for h, n in sorted(hours.items())],
        live_calls=len(node.live_calls()) if node is not None else None,
    )


@router.get("/summary/latency", response_model=LatencySeries, summary="Voice-to-voice over time")
async def latency_over_time(
    session: SessionDep,
    _who: Viewer,
    since: Annotated[ApiTime | None, Query(description="default: 24 hours ago")] = None,
    until: Annotated[ApiTime | None, Query(description="default: now")] = None,
    bucket_minutes: Annotated[int, Query(ge=1, le=1440)] = 60,
) -> LatencySeries:
    """P50/P95 voice-to-voice per route in buckets of ``bucket_minutes`` (by the turn's end
    of speech); buckets without a timed turn are left out."""
    until = to_utc(until) or now()
    since = to_utc(since) or until - timedelta(hours=24)
    if since >= until:
        raise error(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            "must be before until",
            loc=("query", "since"),
            type="value_error",
        )
    rows = (
        await session.execute(
            select(TurnRow.route, TurnRow.speech_end_at, TurnRow.first_audio_out_at).where(
                TurnRow.speech_end_at >= since,
                TurnRow.speech_end_at < until,
                TurnRow.first_audio_out_at.is_not(None),
            )
        )
    ).all()
    width = timedelta(minutes=bucket_minutes)
    buckets: dict[tuple[datetime, str], list[float]] = defaultdict(list)
    for route, spoke, heard in rows:
        spoke_at, heard_at = aware(spoke), aware(heard)
        assert spoke_at is not None and heard_at is not None  # both filtered on
        start = since + width * ((spoke_at - since) // width)
        buckets[(start, route)].append((heard_at - spoke_at).total_seconds() * 1000.0)
    points = [
        LatencyPoint(
            start=start,
            route=route,
            turns=len(values),
            p50_ms=round(float(np.percentile(values, 50)), 1),
            p95_ms=round(float(np.percentile(values, 95)), 1),
        )
        for (start, route), values in sorted(buckets.items())
    ]
    return LatencySeries(since=since, until=until, bucket_minutes=bucket_minutes, points=points)


@router.get(
    "/calls/{call_id}/recording",
    response_class=FileResponse,
    summary="One call's recording (WAV: caller left, bot right)",
    responses={
        200: {"content": {"audio/wav": {}}, "description": "the recording"},
        206: {"content": {"audio/wav": {}}, "description": "the byte range asked for"},
        **error_responses(404, 409),
        416: {"description": "the range is beyond the file (`Content-Range: bytes */size`)"},
    },
)
async def call_recording(
    call_id: uuid.UUID, request: Request, session: SessionDep, who: Editor
) -> FileResponse:
    """A recording holds the caller's voice: editors and admins may fetch it, and each fetch
    is written to the audit log. Only files inside the node's recordings folder are served,
    whatever path the call row holds."""
    call = await session.get(Call, call_id)
    if call is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no call {call_id}")
    if call.recording_path is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            detail=f"call {call_id} has no recording (not recorded, or purged past retention)",
        )
    if call.ended_at is None:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            detail=f"call {call_id} is in progress: its recording is complete when it ends",
        )
    folder: Path | None = request.app.state.recordings_dir
    path = await asyncio.to_thread(inside_folder, folder, call.recording_path)
    if path is None or not await asyncio.to_thread(path.is_file):
        if path is not None and await asyncio.to_thread(partial_path(path).is_file):
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                detail=f"the recording of call {call_id} is being finished: try again shortly",
            )
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            detail=f"the recording of call {call_id} is not in this host's recordings folder",
        )
    record(session, who.actor, "recording.fetch", f"call:{call_id}")
    return FileResponse(path, media_type="audio/wav", filename=f"call-{call_id}.wav")
