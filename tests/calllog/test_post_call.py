"""The optional post-call question, at the call control's boundary with the call session.

The call control gets the goodbye's hang-up (``CallAction``) as the pipeline gives it; the
caller's keys and audio reach it through ``hears`` as the session passes them; what it
says goes to ``say``; the answer goes to a real call log (SQLite) and is read back from
the ``calls`` row with the call's outcome. The call and the control run on a clock of the
test's: the prompt's playout and the answer's wait are call time, exact, not real time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog import CallLog
from bot.calllog.models import Call, CallEvent
from bot.calllog.settings import CallLogSettings
from bot.pipeline.frames import CallAction, DataFrame, PlayAudio
from bot.pipeline.stages.call_control import CallControl, PostCallQuestion
from bot.pipeline.turn import Turn
from telephony.events import AudioIn, DtmfIn
from tests.bot.fakes import FRAME_BYTES, MemoryCall, silence, tone
from tests.calllog.helpers import FAST, open_log
from tests.support.clock import FakeClock

PROMPT = "Did we answer your question? Press 1 for yes, 2 for no."
PROMPT_MS = 600
WAIT_S = 1.0

Caller = Callable[[MemoryCall, CallControl], Awaitable[None]]


def turn(call_id: str, route: str, words: str, intent: str) -> Turn:
    t = Turn(call_id=call_id, transcript=words, answer=f"the answer to {words}")
    t.route = route  # type: ignore[assignment]
    t.intent = intent
    now = time.monotonic()
    t.mark("speech_end", now - 1.0)
    t.mark("first_audio_out", now - 0.6)
    return t


async def say_frames(call: MemoryCall, control: CallControl, pcm: bytes) -> None:
    """The caller's side for ``pcm``: one bot frame played out and one caller frame passed
    to the call control a tick, as the session passes them while the question waits."""
    for i in range(0, len(pcm), FRAME_BYTES):
        frame = pcm[i : i + FRAME_BYTES]
        if call._queue:  # as ``MemoryCall.tick`` plays out
            call.sent += call._queue.pop(0)
            if not call._queue:
                call._drained.set()
        taken = control.hears(AudioIn(pcm=frame, at=call.clock.now()))
        assert taken == control.closing
        await call.pass_time(0.02)


async def goodbye_call(
    log: CallLog, caller: Caller, *, answered_first: bool = True
) -> tuple[MemoryCall, list[str], list[DataFrame]]:
    """A call answered (or not) and then ended by the caller's goodbye; ``caller`` plays
    the caller's side once the hang-up reaches the call control. Returns the call, what the
    question's answer was heard as (spoken answers) and what the control said."""
    clock = FakeClock()
    call = MemoryCall("post-call-1", clock=clock)
    log.call_answered(call.call_id, caller="sip:+4930555@pbx", callee="sip:bot@pbx")
    if answered_first:
        log.turn_finished(turn(call.call_id, "exact", "where is my order", "order_status"))
    bye = turn(call.call_id, "exact", "that's all, goodbye", "goodbye")
    log.turn_finished(bye)
    heard: list[str] = []
    said: list[DataFrame] = []

    async def hear(pcm: bytes) -> str:
        heard.append(f"{len(pcm) // 16} ms")
        return "yes, thank you"

    async def say(frame: DataFrame) -> None:
        said.append(frame)
        assert isinstance(frame, PlayAudio)
        call.send(frame.pcm)

    control = CallControl(
        call,
        failed=PlayAudio(turn=None, pcm=b"", text="failed"),
        say=say,
        transfer_timeout_s=1.0,
        targets=lambda uri: None,
        call_log=log,
        tail_s=0.0,
        post_call=PostCallQuestion(
            prompt=PlayAudio(turn=None, pcm=tone(PROMPT_MS, 3000), text=PROMPT),
            wait_s=WAIT_S,
            hear=hear,
        ),
        clock=clock,
    )
    # Before the goodbye the caller's keys are the conversation's.
    assert not control.hears(DtmfIn(digit="2", duration_ms=100, at=clock.now()))
    hanging_up = asyncio.create_task(control.process(CallAction(turn=bye, action="hangup")))
    await caller(call, control)
    await asyncio.wait_for(hanging_up, 10)
    assert call.hangups == 1
    assert control.end_reason("200 Normal call clearing") == "bot_hangup"
    log.call_ended(call.call_id, control.end_reason("200 Normal call clearing"))
    return call, heard, said


async def stored(engine: AsyncEngine) -> tuple[tuple[str | None, ...], list[tuple[str, str]]]:
    async with engine.connect() as conn:
        row = (
            await conn.execute(select(Call.outcome, Call.outcome_reason, Call.post_call_answer))
        ).one()
        events = (
            await conn.execute(
                select(CallEvent.kind, CallEvent.detail).where(CallEvent.kind == "post_call_answer")
            )
        ).all()
    return tuple(row), [(k, d or "") for k, d in events]


@pytest.fixture
async def log(db_url: str, tmp_path: Path) -> CallLog:
    return await open_log(db_url, tmp_path / "spool")


async def test_key_2_over_the_prompt_is_a_no(log: CallLog, engine: AsyncEngine) -> None:
    async def caller(call: MemoryCall, control: CallControl) -> None:
        await say_frames(call, control, silence(200))  # the prompt starts
        assert control.closing
        assert control.hears(DtmfIn(digit="2", duration_ms=100, at=call.clock.now()))
        await say_frames(call, control, silence(100))

    call, heard, said = await goodbye_call(log, caller)
    await log.close()
    assert [getattr(f, "text", None) for f in said] == [PROMPT]
    assert call.cleared > 0, "the rest of the prompt was not cut by the key"
    assert heard == []
    row, events = await stored(engine)
    assert row == ("resolved", "goodbye", "no")
    assert events == [("post_call_answer", "no")]


async def test_a_spoken_yes_after_the_prompt(log: CallLog, engine: AsyncEngine) -> None:
    async def caller(call: MemoryCall, control: CallControl) -> None:
        await say_frames(call, control, silence(PROMPT_MS + 200))
        await say_frames(call, control, tone(400) + silence(800))

    _call, heard, _said = await goodbye_call(log, caller)
    await log.close()
    # The answer as heard: from 10 frames before its first voiced one, to its quiet end.
    assert len(heard) == 1
    kept_ms = int(heard[0].split()[0])
    assert 400 + 200 <= kept_ms <= 400 + 200 + 800, heard
    row, events = await stored(engine)
    assert row == ("resolved", "goodbye", "yes")
    assert events == [("post_call_answer", "yes")]


async def test_no_answer_in_time_is_none(log: CallLog, engine: AsyncEngine) -> None:
    async def caller(call: MemoryCall, control: CallControl) -> None:
        started = call.clock.now()
        while not call.hangups:
            await say_frames(call, control, silence(20))
        waited = call.clock.now() - started
        # The prompt's playout, then the wait: the hang-up is seen in the frame it ends in.
        expected = PROMPT_MS / 1000 + WAIT_S
        assert expected - 1e-6 <= waited <= expected + 0.02 + 1e-6, waited

    _call, heard, _said = await goodbye_call(log, caller)
    await log.close()
    assert heard == []
    row, events = await stored(engine)
    assert row == ("resolved", "goodbye", "none")
    assert events == [("post_call_answer", "none")]


async def test_not_asked_when_nothing_was_answered_before_the_goodbye(
    log: CallLog, engine: AsyncEngine
) -> None:
    async def caller(call: MemoryCall, control: CallControl) -> None:
        await call.pass_time(0.1)
        assert not control.closing

    _call, heard, said = await goodbye_call(log, caller, answered_first=False)
    await log.close()
    assert said == [] and heard == []
    row, events = await stored(engine)
    assert row == ("resolved", "goodbye", None)
    assert events == []


def test_the_question_is_off_by_default() -> None:
    settings = CallLogSettings()
    assert settings.post_call_question is False
    assert settings.post_call_prompt == PROMPT
    assert FAST.post_call_question is False
