"""``CallLog``: what a call session reports, turned into records for the writer.

Every method is synchronous and returns at once: the audio path never waits for the
database. Times come in as ``time.monotonic()`` (the pipeline's clock) and are stored as
UTC wall-clock times, converted with one offset per call taken when it is answered.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.access import refusal, refused_error
from bot.calllog.migrate import SchemaError, schema_state, upgrade_async
from bot.calllog.outcomes import (
    ANSWERED,
    POST_CALL_ANSWERS,
    EventFacts,
    Step,
    TurnFacts,
    call_outcome,
    step_turn_outcomes,
)
from bot.calllog.privacy import mask_uri
from bot.calllog.records import Record, utc
from bot.calllog.recovery import close_crashed_calls
from bot.calllog.settings import CallLogSettings
from bot.calllog.spool import Spool
from bot.calllog.store import make_engine
from bot.calllog.writer import RecordWriter
from bot.pipeline.turn import STAGES, Turn
from bot.tasks import cancel_and_wait

log = logging.getLogger(__name__)

#: How long start-up waits for the database before going on with the spool.
PROBE_TIMEOUT_S = 5.0


@dataclass
class _LiveCall:
    id: uuid.UUID
    offset: float  # time.time() - time.monotonic() when answered
    seqs: dict[int, int] = field(default_factory=dict)  # Turn.index -> seq in this call
    sip_call_id: str = ""
    caller: str = ""
    callee: str = ""
    answered_at: datetime | None = None
    last_route: str | None = None
    #: What happened, in order: its turns (by seq, a turn reported again replaces its
    #: facts in place) and its events; the call's outcome is decided from it at the end.
    steps: list[Step] = field(default_factory=list)
    turn_ids: dict[int, uuid.UUID] = field(default_factory=dict)  # seq -> turn row id

    def wall(self, mono: float) -> datetime:
        return utc(mono + self.offset)


@dataclass(frozen=True)
class LiveCallInfo:
    """A call this node is on now, as the admin console shows it."""

    id: uuid.UUID
    sip_call_id: str
    caller: str
    callee: str
    node: str
    answered_at: datetime
    turns: int
    last_route: str | None


class CallLog:
    """The call log of one node. Open with ``CallLog.open``, close with ``close``."""

    def __init__(
        self,
        engine: AsyncEngine,
        spool: Spool,
        *,
        node: str,
        config_version: str,
        options: CallLogSettings,
    ) -> None:
        self.engine = engine
        self.node = node
        self.config_version = config_version
        #: The settings it was opened with (the post-call question's are read by the call).
        self.options = options
        self._spool = spool
        self._started_at = datetime.now(UTC)
        self._recovered = False
        self._calls: dict[str, _LiveCall] = {}
        self._heartbeat_s = options.heartbeat_s
        self._heartbeat: asyncio.Task[None] | None = None
        #: Told each ended call's outcome, its reason and its turns' outcomes (metrics).
        self.on_outcome: Callable[[str, str, Sequence[str]], None] | None = None
        self.writer = RecordWriter(
            engine,
            spool,
            batch_size=options.batch_size,
            batch_window_s=options.batch_window_ms / 1000.0,
            max_pending=options.max_pending,
            write_timeout_s=options.write_timeout_s,
            retry_s=options.retry_s,
            on_synced=self._recover_once,
        )

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        spool_dir: Path,
        node: str,
        config_version: str,
        options: CallLogSettings | None = None,
        create_if_empty: bool = False,
    ) -> CallLog:
        """Check the schema, adopt records a dead process spooled, close crashed calls.

        Raises ``SchemaError`` when the schema is not this code's (an empty database is
        migrated when ``create_if_empty``), ``DatabaseRefused`` when the database refuses
        the credentials or has no such database. An unreachable database is not an error: the
        log starts spooling and catches up when it answers.
        """
        engine = make_engine(url)
        reachable = True
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                state = await schema_state(engine)
        except SchemaError:
            raise
        except Exception as exc:
            why = refusal(exc)
            if why is not None:
                await engine.dispose()
                raise refused_error(url, why) from None
            log.warning("call-log database unreachable at start, spooling to disk: %s", exc)
            reachable = False
        else:
            if state.status == "empty" and create_if_empty:
                log.info("new call-log database: creating the schema")
                await upgrade_async(url)
            elif state.status != "current":
                await engine.dispose()
                raise SchemaError(state.message())
        spool = Spool(spool_dir, max_bytes=(options or CallLogSettings()).spool_max_bytes)
        spool.open()
        adopted = await asyncio.to_thread(spool.adopt_orphans)
        self = cls(
            engine,
            spool,
            node=node,
            config_version=config_version,
            options=options or CallLogSettings(),
        )
        self.writer.start(spooling=adopted > 0 or not reachable)
        self._heartbeat = asyncio.create_task(self._beat(), name="calllog-heartbeat")
        if reachable:
            # Replays adopted records first (their calls may have ended after all), then
            # closes what is still open. `on_synced` does it when the spool was needed.
            await self.writer.flush()
            if not self.writer.spooling:
                await self._recover_once()
        return self

    async def close(self) -> None:
        """Write what is pending (or spool it), stop the writer, release the spool."""
        await cancel_and_wait(self._heartbeat)
        self._heartbeat = None
        await self.writer.close()
        await asyncio.to_thread(self._spool.close)
        await self.engine.dispose()

    def live_calls(self) -> list[LiveCallInfo]:
        """The calls answered and not yet ended on this node, oldest first."""
        return [
            LiveCallInfo(
                id=live.id,
                sip_call_id=live.sip_call_id,
                caller=live.caller,
                callee=live.callee,
                node=self.node,
                answered_at=live.answered_at or utc(live.offset),
                turns=len(live.seqs),
                last_route=live.last_route,
            )
            for live in self._calls.values()
        ]

    # -- what a call session reports ------------------------------------------------

    def call_answered(
        self,
        call_id: str,
        *,
        caller: str,
        callee: str,
        answered_at: float | None = None,
        arrived_at: float | None = None,
        recording: str | None = None,
    ) -> None:
        """A call was answered: its row is written now. Times are ``time.monotonic()``.
        ``recording``: the file the call is recorded in. A call already reported (answered
        into the call queue, then given to the bot) keeps its first row."""
        if call_id in self._calls:
            return
        now = time.monotonic()
        live = _LiveCall(id=uuid.uuid4(), offset=time.time() - now)
        self._calls[call_id] = live
        answered = live.wall(answered_at if answered_at is not None else now)
        live.sip_call_id, live.caller, live.callee = call_id, caller, callee
        live.answered_at = answered
        row = {
            "id": live.id,
            "sip_call_id": call_id,
            "caller": caller,
            "callee": callee,
            "node": self.node,
            "config_version": self.config_version,
            "arrived_at": live.wall(arrived_at) if arrived_at is not None else answered,
            "answered_at": answered,
            "ended_at": None,
            "end_reason": None,
            "recording_path": recording,
        }
        self.writer.submit(Record("call", row))
        log.info("call %s answered from %s", call_id, mask_uri(caller))

    def turn_finished(self, turn: Turn) -> None:
        """A turn ended (answered, interrupted or cut by hang-up): append it."""
        live = self._live(turn.call_id)
        if live is None:
            return
        seq = live.seqs.setdefault(turn.index, len(live.seqs) + 1)
        live.last_route = turn.route
        # Derived from the call and the turn: the same turn reported twice is one row.
        turn_id = uuid.uuid5(live.id, f"turn/{turn.index}")
        row: dict[str, object] = {
            "id": turn_id,
            "call_id": live.id,
            "seq": seq,
            "transcript": turn.transcript,
            "answer": turn.answer,
            "route": turn.route,
            "intent": turn.intent,
            "intent_score": turn.intent_score,
            "barged_in": turn.barged_in,
            "error": turn.error,
            "finished_at": utc(time.time()),
            "model_ms": {k: round(v, 1) for k, v in turn.model_ms.items()},
            "decision": turn.decision.record() if turn.decision is not None else None,
            "purged_at": None,
        }
        for stage in STAGES:
            mono = turn.stages.get(stage)
            row[f"{stage}_at"] = live.wall(mono) if mono is not None else None
        self.writer.submit(Record("turn", row))
        facts = TurnFacts(
            seq=seq,
            route=turn.route,
            intent=turn.intent,
            transcript=turn.transcript,
            answer=turn.answer,
            barged_in=turn.barged_in,
            error=turn.error,
        )
        if seq in live.turn_ids:
            live.steps = [facts if _same_turn(s, seq) else s for s in live.steps]
        else:
            live.turn_ids[seq] = turn_id
            live.steps.append(facts)
        if turn.error:
            self._event(live, "error", turn.error, time.monotonic(), f"turn-error/{turn.index}")

    def event(
        self, call_id: str, kind: str, detail: str | None = None, at: float | None = None
    ) -> None:
        """Something happened on the call: ``dtmf``, ``barge_in``, ``error``..."""
        live = self._live(call_id)
        if live is not None:
            self._event(live, kind, detail, time.monotonic() if at is None else at, None)

    def answered(self, call_id: str, *, besides: int | None = None) -> bool:
        """Whether the bot has answered a request of the caller's on this live call (a turn
        answered, confirmed or said again), other than turn ``besides`` (``Turn.index``)."""
        live = self._calls.get(call_id)
        if live is None:
            return False
        skip = live.seqs.get(besides) if besides is not None else None
        turns = [s for s in live.steps if isinstance(s, TurnFacts)]
        return any(
            t.seq != skip and o in ANSWERED
            for t, o in zip(turns, step_turn_outcomes(live.steps), strict=True)
        )

    def call_ended(self, call_id: str, reason: str, at: float | None = None) -> None:
        """The call is over: close its row."""
        live = self._calls.pop(call_id, None)
        if live is None:
            log.warning("call %s ended but was never reported answered", call_id)
            return
        ended = live.wall(time.monotonic() if at is None else at)
        outcome = call_outcome(live.steps, reason)
        turns = [s for s in live.steps if isinstance(s, TurnFacts)]
        each = step_turn_outcomes(live.steps)
        row = {
            "id": live.id,
            "ended_at": ended,
            "end_reason": reason,
            "outcome": outcome.outcome,
            "outcome_reason": outcome.reason,
            "post_call_answer": post_call_answer(live.steps),
            # [turn id, outcome] for each turn: written with the end.
            "turn_outcomes": [
                [str(live.turn_ids[t.seq]), o] for t, o in zip(turns, each, strict=True)
            ],
        }
        self.writer.submit(Record("end", row))
        if self.on_outcome is not None:
            self.on_outcome(outcome.outcome, outcome.reason, each)

    # -------------------------------------------------------------------------------

    def _event(
        self, live: _LiveCall, kind: str, detail: str | None, at: float, key: str | None
    ) -> None:
        event_id = uuid.uuid5(live.id, key) if key else uuid.uuid4()
        live.steps.append(EventFacts(kind=kind, detail=detail))
        row = {
            "id": event_id,
            "call_id": live.id,
            "at": live.wall(at),
            "kind": kind,
            "detail": detail,
            "purged_at": None,
        }
        self.writer.submit(Record("event", row))

    def mark_alive(self) -> None:
        """Record that every call this node is on is up now (one record for all of them)."""
        if self._calls:
            ids = [live.id for live in self._calls.values()]
            self.writer.submit(Record("alive", {"ids": ids, "at": utc(time.time())}))

    async def _beat(self) -> None:
        # A crash loses at most one interval of a call's length (docs/calllog.md).
        while True:
            await asyncio.sleep(self._heartbeat_s)
            self.mark_alive()

    def _live(self, call_id: str) -> _LiveCall | None:
        live = self._calls.get(call_id)
        if live is None:
            log.warning("call-log record for unknown call %s dropped", call_id)
        return live

    async def _recover_once(self) -> None:
        if self._recovered:
            return
        self._recovered = True
        try:
            await close_crashed_calls(self.engine, self.node, self._started_at)
        except Exception as exc:
            self._recovered = False  # try again the next time the database is back
            log.warning("could not close crashed calls yet: %s", exc)


def post_call_answer(steps: Sequence[Step]) -> str | None:
    """The caller's answer to the post-call question (its ``post_call_answer`` event):
    ``yes``, ``no``, ``none``; None when it was not asked."""
    for step in reversed(steps):
        if isinstance(step, EventFacts) and step.kind == "post_call_answer":
            return step.detail if step.detail in POST_CALL_ANSWERS else None
    return None


def _same_turn(step: Step, seq: int) -> bool:
    return isinstance(step, TurnFacts) and step.seq == seq
