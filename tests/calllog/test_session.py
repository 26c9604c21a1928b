"""A call session reports its call, turns, DTMF and barge-ins to the call log (the call on
a clock of the test's)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.models import Call, CallEvent, TurnRow
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.session import CallSession
from bot.pipeline.turn import Turn
from telephony.events import DtmfIn
from tests.bot.fakes import (
    MemoryCall,
    ScriptedASR,
    ScriptedLLM,
    ToneTTS,
    fake_models,
    silence,
    tone,
)
from tests.bot.test_session import PROFILE
from tests.calllog.helpers import open_log
from tests.support.clock import FakeClock


class LoggedCall(MemoryCall):
    remote_uri = "sip:+15550001111@pbx"
    local_uri = "sip:bot@node"

    def __init__(self, clock: FakeClock) -> None:
        super().__init__("sip-call-1", clock=clock)


async def test_session_writes_call_turns_and_events(
    db_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    log = await open_log(db_url, tmp_path)
    # 40 different words: the same word over and over would be a repeat the guard cuts.
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = " ".join(f"q{letters[i % 26]}{'x' * (i // 26)}" for i in range(40)) + "."
    tts, clock = ToneTTS(), FakeClock()
    llm = ScriptedLLM([w + " " for w in words.split()])
    models = await fake_models(ScriptedASR("tell me everything"), llm, tts, clock)
    prompts = PromptAudio(8000)
    for text in (PROFILE.greeting, PROFILE.apology):
        await prompts.add(tts, text)
    call = LoggedCall(clock)
    turns: list[Turn] = []

    def on_turn(turn: Turn) -> None:
        turns.append(turn)
        log.turn_finished(turn)

    session = CallSession(
        call, models, PROFILE, prompts, on_turn=on_turn, call_log=log, clock=clock
    )
    task = asyncio.create_task(session.run())
    await call.play(silence(500))
    await call._inbound.put(DtmfIn(digit="5", duration_ms=100, at=clock.now()))
    await call.play(tone(400) + silence(700))
    await call.play(silence(600))  # the bot is answering
    await call.play(tone(400) + silence(700))  # the caller talks over it: a second turn
    await call.play(silence(600))
    await call.end()
    await asyncio.wait_for(task, 5)
    await log.close()

    async with engine.connect() as conn:
        calls = (await conn.execute(select(Call.caller, Call.end_reason, Call.ended_at))).all()
        rows = (
            await conn.execute(
                select(
                    TurnRow.seq,
                    TurnRow.barged_in,
                    TurnRow.speech_end_at,
                    TurnRow.first_audio_out_at,
                    TurnRow.decision,
                ).order_by(TurnRow.seq)
            )
        ).all()
        events = sorted((await conn.execute(select(CallEvent.kind, CallEvent.detail))).all())
    kinds = [kind for kind, _ in events]
    assert len(calls) == 1
    assert calls[0][0] == "sip:+15550001111@pbx" and calls[0][1] == "bye"
    assert [r.seq for r in rows] == list(range(1, len(turns) + 1)) and len(rows) >= 2
    assert rows[0].barged_in is True
    assert rows[0].speech_end_at < rows[0].first_audio_out_at
    # Why the bot did what it did: no intent cache, no knowledge base, so the model answers.
    assert rows[0].decision == {
        "kind": "generate",
        "route": "llm",
        "why": "no knowledge base",
        "heard": "first",
        "intent": None,
        "asks": None,
    }
    # The scripted model gives the second turn the answer the caller already heard (in
    # part) in the first: the answer guard does not say it again, and the log says why.
    assert kinds == ["barge_in", "dtmf", "guard_refused"]
    assert str(events[-1][1]).startswith("repeat: "), events
