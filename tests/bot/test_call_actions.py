"""Intent actions, fillers and the conversation history, on an in-memory call.

Fakes only at the boundaries (scripted models, an in-memory call); the intent cache, the
pipeline and the call log (SQLite) are the real ones. Each call runs on a clock of the
test's (``FakeClock``): the caller's audio, the fillers' waits and the model's delays pass
as the test feeds the call, so the times below are exact, not real time with margins.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import literal_column, select

from bot.calllog import CallLog
from bot.calllog.migrate import upgrade_async
from bot.calllog.models import Call, CallEvent, TurnRow
from bot.calllog.store import make_engine
from bot.intents.cache import IntentCache
from bot.intents.store import MemoryStore
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.session import CallSession
from bot.pipeline.turn import Turn
from bot.pipeline.turnlog import FILLER_AUDIO_OUT, turn_record
from bot.profile import BotProfile, IntentConfig
from telephony.events import TransferResult
from tests.bot.fakes import (
    MemoryCall,
    ScriptedASR,
    ScriptedLLM,
    ToneTTS,
    fake_models,
    silence,
    tone,
)
from tests.bot.intent_fakes import MATCHING, WordsEmbedder, intents
from tests.bot.test_session import voiced_ms
from tests.calllog.helpers import open_log
from tests.support.clock import FakeClock

TARGET = "sip:agents@127.0.0.1:5070"
GOODBYE = "Thank you for calling us today goodbye"  # 7 words: 700 ms of tone
ORDER_ANSWER = "Your order ships in three days."

PROFILE = BotProfile(
    name="t",
    greeting="Hello there caller",  # 300 ms
    apology="Sorry about that",
    transfer_failed="Nobody can take your call now",  # 600 ms
    system_prompt="Be brief.",
    fillers=["One moment please while I look", "Just a second"],  # 600 ms, 300 ms
    filler_after_ms=300,
    intents=[
        *intents(ORDER_ANSWER),
        IntentConfig(
            name="goodbye",
            examples=["goodbye for now", "that is all thanks"],
            answer=GOODBYE,
            action="hangup",
        ),
    ],
    intent_matching=MATCHING,
)


class LoggedCall(MemoryCall):
    remote_uri = "sip:caller@pbx"
    local_uri = "sip:bot@node"

    def __init__(self, transfer_result: TransferResult | None, clock: FakeClock) -> None:
        super().__init__("call-actions", transfer_result, clock=clock)
        self.queued_at_hangup: list[int] = []

    async def hangup(self) -> None:
        self.queued_at_hangup.append(self.queued_frames)
        await super().hangup()


@dataclass
class Bot:
    call: LoggedCall
    task: asyncio.Task[None]
    turns: list[Turn]
    asr: ScriptedASR
    llm: ScriptedLLM
    log: CallLog
    url: str
    log_open: bool = True

    async def say(self, text: str, *, lead_ms: int = 0) -> None:
        """The caller says ``text`` (as 400 ms of voice; the ASR reads ``text``)."""
        self.asr.text = text
        await self.call.play(silence(lead_ms) + tone(400))

    async def until(self, cond: Callable[[], bool], timeout_s: float = 15.0) -> None:
        """Let the call run (caller silent, bot audio playing out) until ``cond()``, for at
        most ``timeout_s`` of the call's time."""
        clock = self.call.clock
        deadline = clock.now() + timeout_s
        while not cond():
            assert clock.now() < deadline, "condition not met in time"
            await self.call.tick(silence(20))

    async def hang_up(self) -> None:
        await self.call.end()
        await asyncio.wait_for(self.task, 10)

    async def close_log(self) -> None:
        if self.log_open:
            self.log_open = False
            await self.log.close()

    async def records(self) -> tuple[dict[str, Any], list[tuple[str, str | None]]]:
        """The call's row and its events in the order they were logged, once the call log
        is closed. (Not by their times: the call log times a turn's error itself, in real
        time, and the rest of the call is on the test's clock.)"""
        (row,) = await self.query(select(Call.__table__))
        logged = literal_column("rowid")
        events = await self.query(select(CallEvent.kind, CallEvent.detail).order_by(logged))
        return dict(row._mapping), [(e.kind, e.detail) for e in events]

    async def query(self, statement: Any) -> list[Any]:
        """The rows of ``statement`` in the call log, once it is closed."""
        await self.close_log()
        engine = make_engine(self.url)
        try:
            async with engine.connect() as conn:
                return list((await conn.execute(statement)).all())
        finally:
            await engine.dispose()


async def start(
    tmp_path: Path,
    *,
    llm: ScriptedLLM | None = None,
    transfer_result: TransferResult | None = None,
    bridge_result: TransferResult | None = None,
    profile: BotProfile = PROFILE,
    call_actions: bool = True,
    cache_intents: list[IntentConfig] | None = None,
    transfer_targets: frozenset[str] | None = None,
) -> Bot:
    url = f"sqlite+aiosqlite:///{tmp_path / 'calllog.db'}"
    await upgrade_async(url)
    log = await open_log(url, tmp_path / "spool")
    tts, embedder, clock = ToneTTS(), WordsEmbedder(), FakeClock()
    await embedder.load()
    asr, llm = ScriptedASR(""), llm or ScriptedLLM(["Okay."])
    models = await fake_models(asr, llm, tts, clock)
    prompts = PromptAudio(8000)
    assert profile.transfer_failed is not None
    for text in (profile.greeting, profile.apology, profile.transfer_failed, *profile.fillers):
        await prompts.add(tts, text)
    if profile.transfer_hold is not None:
        await prompts.add(tts, profile.transfer_hold)
    cache = IntentCache(MemoryStore(), embedder, tts, voice="tone")
    await cache.publish(cache_intents or profile.intents, profile.intent_matching)
    call = LoggedCall(transfer_result, clock)
    if bridge_result is not None:
        call.bridge_result = bridge_result
    turns: list[Turn] = []

    def on_turn(turn: Turn) -> None:
        turns.append(turn)
        log.turn_finished(turn)

    session = CallSession(
        call,
        models,
        profile,
        prompts,
        on_turn=on_turn,
        call_log=log,
        intent_cache=cache,
        call_actions=call_actions,
        transfer_targets=transfer_targets,
        clock=clock,
    )
    task = asyncio.create_task(session.run())
    bot = Bot(call, task, turns, asr, llm, log, url)
    await bot.until(lambda: len(call.sent) > 0 and call.queued_frames == 0)  # the greeting
    return bot


Start = Callable[..., Awaitable[Bot]]


@pytest.fixture
async def started(tmp_path: Path) -> AsyncIterator[Start]:
    """``await started(**options)``: a bot on a call; the call and its log end after."""
    bots: list[Bot] = []

    async def make(**options: Any) -> Bot:
        bot = await start(tmp_path, **options)
        bots.append(bot)
        return bot

    yield make
    for bot in bots:
        if not bot.task.done():
            await bot.call.end()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(bot.task, 10)
        await bot.close_log()


# -- actions -------------------------------------------------------------------------


async def test_goodbye_is_answered_then_the_bot_hangs_up(started: Start) -> None:
    bot = await started()
    await bot.say("goodbye for now")
    await bot.until(bot.task.done)  # the bot ends the call by itself
    assert bot.call.hangups == 1
    assert bot.call.queued_at_hangup == [0]  # ...once the whole answer had played
    assert voiced_ms(bot.call.sent) == 300 + 700
    ((turn),) = bot.turns
    assert (turn.route, turn.intent, turn.answer) == ("exact", "goodbye", GOODBYE)
    row, events = await bot.records()
    assert row["end_reason"] == "bot_hangup" and row["ended_at"] is not None
    assert events == []


async def test_transfer_after_the_answer_then_the_bot_leaves(started: Start) -> None:
    bot = await started()
    await bot.say("talk to a person")
    await bot.until(bot.task.done)
    # One REFER, to the intent's target, sent once the answer had played out.
    assert bot.call.transfers == [(TARGET, PROFILE.transfer_timeout_s, 0)]
    assert bot.call.hangups == 1  # the transfer succeeded: the bot's leg ends
    assert voiced_ms(bot.call.sent) == 300 + 500  # greeting, "I will put you through."
    row, events = await bot.records()
    assert row["end_reason"] == "transferred"
    assert events == [("transfer", TARGET)]


async def test_with_actions_off_the_bot_answers_records_and_stays(started: Start) -> None:
    bot = await started(call_actions=False)
    await bot.say("talk to a person")
    await bot.until(lambda: len(bot.turns) == 1)
    await bot.say("goodbye for now")
    await bot.until(lambda: len(bot.turns) == 2)
    await bot.call.pass_time(0.6)  # past the tail after each answer, when an action would run
    assert not bot.task.done()
    assert bot.call.transfers == [] and bot.call.hangups == 0
    assert [t.intent for t in bot.turns] == ["talk_to_person", "goodbye"]
    await bot.call.end()
    await bot.until(bot.task.done)
    row, events = await bot.records()
    assert row["end_reason"] != "bot_hangup"
    assert events == [("action_skipped", "transfer"), ("action_skipped", "hangup")]


async def test_a_failed_transfer_is_apologised_for_and_the_call_goes_on(started: Start) -> None:
    bot = await started(transfer_result=TransferResult(False, 486, "Busy Here"))
    await bot.say("talk to a person")
    await bot.until(lambda: voiced_ms(bot.call.sent) == 300 + 500 + 600)  # + transfer_failed
    await bot.until(lambda: bot.call.queued_frames == 0)
    assert len(bot.call.transfers) == 1 and bot.call.hangups == 0
    await bot.say("when are you open", lead_ms=200)
    await bot.until(lambda: len(bot.turns) == 2)
    await bot.hang_up()
    assert [t.intent for t in bot.turns] == ["talk_to_person", "opening_hours"]
    assert bot.call.hangups == 0
    row, events = await bot.records()
    assert row["end_reason"] == "bye"
    assert events == [("transfer", TARGET), ("transfer_failed", "486 Busy Here")]


PREMIUM = "tel:+19005550100"


def rewritten(intents: list[IntentConfig]) -> list[IntentConfig]:
    """The intents as a shared cache entry rewritten by someone would give them."""
    return [
        i.model_copy(update={"transfer_to": PREMIUM}) if i.action == "transfer" else i
        for i in intents
    ]


async def test_a_rewritten_transfer_target_is_refused_before_the_refer(started: Start) -> None:
    bot = await started(cache_intents=rewritten(PROFILE.intents))
    await bot.say("talk to a person")
    await bot.until(lambda: voiced_ms(bot.call.sent) == 300 + 500 + 600)  # + transfer_failed
    await bot.until(lambda: bot.call.queued_frames == 0)
    assert bot.call.transfers == []  # no REFER went out
    await bot.say("when are you open", lead_ms=200)  # ...and the call goes on
    await bot.until(lambda: len(bot.turns) == 2)
    await bot.hang_up()
    assert bot.call.hangups == 0
    row, events = await bot.records()
    assert row["end_reason"] == "bye"
    assert events == [("transfer_refused", PREMIUM)]


async def test_a_target_outside_the_operators_list_is_refused(started: Start) -> None:
    bot = await started(transfer_targets=frozenset({"sip:other@127.0.0.1:5070"}))
    await bot.say("talk to a person")
    await bot.until(lambda: voiced_ms(bot.call.sent) == 300 + 500 + 600)
    assert bot.call.transfers == []
    await bot.hang_up()
    _, events = await bot.records()
    assert events == [("transfer_refused", TARGET)]


async def test_the_operators_list_lets_the_profiles_target_through(started: Start) -> None:
    bot = await started(transfer_targets=frozenset({TARGET, "sip:other@127.0.0.1:5070"}))
    await bot.say("talk to a person")
    await bot.until(bot.task.done)
    assert bot.call.transfers == [(TARGET, PROFILE.transfer_timeout_s, 0)]


@pytest.mark.parametrize("request_text", ["goodbye for now", "talk to a person"])
async def test_a_barge_in_over_the_answer_cancels_its_action(
    started: Start, request_text: str
) -> None:
    bot = await started()
    await bot.say(request_text)
    await bot.until(lambda: bot.call.queued_frames > 0)  # the answer has started
    await bot.say("when are you open")  # ...and the caller talks over it
    await bot.until(lambda: len(bot.turns) == 2)
    await bot.call.play(silence(1500))
    assert not bot.task.done()
    await bot.hang_up()
    assert bot.turns[0].barged_in and bot.turns[1].intent == "opening_hours"
    assert bot.call.hangups == 0 and bot.call.transfers == []
    row, events = await bot.records()
    assert row["end_reason"] == "bye"
    assert [kind for kind, _ in events] == ["barge_in"]


# -- fillers -------------------------------------------------------------------------


async def test_a_slow_answer_gets_one_filler_then_follows_it(started: Start) -> None:
    # The first word comes 1.2 s after the model is asked: the filler (at 300 ms) plays
    # first, and only once; the answer queues behind it.
    bot = await started(llm=ScriptedLLM(["Your order", " ships today."], delay_s=1.2))
    await bot.say("is my parcel insured")
    await bot.until(lambda: len(bot.turns) == 1)
    await bot.hang_up()
    ((turn),) = bot.turns
    assert turn.route == "llm" and turn.answer == "Your order ships today."
    filler_at, answer_at = turn.stages[FILLER_AUDIO_OUT], turn.stages["first_audio_out"]
    assert filler_at - turn.stages["eot_decided"] == pytest.approx(0.3, abs=1e-6)
    # first_audio_out is the answer's own first audio, heard after the whole filler.
    assert answer_at >= filler_at + 0.6 - 1e-6
    assert voiced_ms(bot.call.sent) == 300 + 600 + 400  # greeting, filler, answer
    record = turn_record(turn)
    stages = record["stages_ms"]
    assert record["filler"] is True and isinstance(stages, dict)
    assert stages[FILLER_AUDIO_OUT] < stages["first_audio_out"]
    _, events = await bot.records()
    assert events == [("filler", "One moment please while I look")]


async def test_fillers_rotate_and_stay_off_cached_answers(started: Start) -> None:
    bot = await started(llm=ScriptedLLM(["Okay."], delay_s=1.0))
    await bot.say("is my parcel insured")
    await bot.until(lambda: len(bot.turns) == 1)
    await bot.say("when are you open", lead_ms=200)  # cached: never a filler
    await bot.until(lambda: len(bot.turns) == 2)
    await bot.say("do you sell gift cards", lead_ms=200)
    await bot.until(lambda: len(bot.turns) == 3)
    await bot.hang_up()
    assert [t.route for t in bot.turns] == ["llm", "exact", "llm"]
    assert [FILLER_AUDIO_OUT in t.stages for t in bot.turns] == [True, False, True]
    _, events = await bot.records()
    assert events == [("filler", "One moment please while I look"), ("filler", "Just a second")]


async def test_no_filler_when_the_answer_is_out_in_time(started: Start) -> None:
    patient = PROFILE.model_copy(update={"filler_after_ms": 5000})
    bot = await started(llm=ScriptedLLM(["Okay."]), profile=patient)
    await bot.say("is my parcel insured")
    await bot.until(lambda: len(bot.turns) == 1)
    await bot.call.play(silence(500))
    await bot.hang_up()
    ((turn),) = bot.turns
    assert turn.route == "llm" and FILLER_AUDIO_OUT not in turn.stages
    assert turn_record(turn)["filler"] is False
    assert voiced_ms(bot.call.sent) == 300 + 100
    _, events = await bot.records()
    assert events == []


async def test_a_long_wait_gets_a_filler_every_so_often_until_the_answer(
    started: Start,
) -> None:
    # Fillers at 0.3 s (600 ms long), 1.1 s (300 ms) and 1.6 s (600 ms); the first word
    # comes at 1.9 s and queues behind the third; the one due at 2.4 s never plays. The
    # model's timeout is well past the first word: at the usual 2 s, a loaded machine's
    # loop lag of 100 ms turned the answer into the apology.
    chatty = PROFILE.model_copy(update={"filler_every_ms": 200})
    llm = ScriptedLLM(["Your order ships today."], delay_s=1.9, timeout_s=5.0)
    bot = await started(llm=llm, profile=chatty)
    await bot.say("is my parcel insured")
    await bot.until(lambda: len(bot.turns) == 1)
    await bot.call.play(silence(1000))
    await bot.hang_up()
    ((turn),) = bot.turns
    assert turn.route == "llm" and turn.answer == "Your order ships today."
    _, events = await bot.records()
    assert events == [
        ("filler", "One moment please while I look"),
        ("filler", "Just a second"),
        ("filler", "One moment please while I look"),
    ]
    assert voiced_ms(bot.call.sent) == 300 + 600 + 300 + 600 + 400
    # The turn's mark is the first filler's; the answer is heard after the last one, which
    # started 1.3 s after the first and lasts 0.6 s.
    filler_at = turn.stages[FILLER_AUDIO_OUT]
    assert filler_at - turn.stages["eot_decided"] == pytest.approx(0.3, abs=1e-6)
    assert turn.stages["first_audio_out"] - filler_at == pytest.approx(1.3 + 0.6, abs=1e-6)


async def test_no_filler_over_a_caller_who_speaks_again(started: Start) -> None:
    # The caller goes on with a new question as soon as the model is asked, before the
    # filler is due: the filler would talk over them, and land in front of the answer to
    # their new question. The filler is due 1.5 s after the turn ended, well after the new
    # question's first voice is heard even on a loaded machine (at 300 ms, the model being
    # asked late and the voice being heard late on a busy loop let it play).
    patient = PROFILE.model_copy(update={"filler_after_ms": 1500})
    bot = await started(llm=ScriptedLLM(["Okay."], delay_s=3.0), profile=patient)
    await bot.say("is my parcel insured")
    await bot.until(lambda: len(bot.llm.prompts) == 1)
    await bot.say("when are you open")
    await bot.until(lambda: len(bot.turns) == 2)
    await bot.call.play(silence(1000))
    await bot.hang_up()
    _, events = await bot.records()
    assert "filler" not in [kind for kind, _ in events]
    # The question the caller talked over is in the call log, cut before its first word.
    first, second = bot.turns
    assert (first.route, first.barged_in, first.answer) == ("llm", True, "")
    assert FILLER_AUDIO_OUT not in first.stages and "first_audio_out" not in first.stages
    assert (second.route, second.answer) == ("exact", "We are open nine to five.")
    # the greeting, then the second answer only
    assert voiced_ms(bot.call.sent) == 300 + 100 * len(second.answer.split())


async def test_a_hang_up_while_the_model_thinks_still_logs_the_turn(started: Start) -> None:
    bot = await started(llm=ScriptedLLM(["Okay."], delay_s=1.0))
    await bot.say("is my parcel insured")
    await bot.until(lambda: len(bot.llm.prompts) == 1)
    await bot.hang_up()
    ((turn),) = bot.turns
    assert turn.route == "llm" and "first_audio_out" not in turn.stages
    rows = await bot.query(select(TurnRow.transcript, TurnRow.route))
    assert [tuple(r) for r in rows] == [("is my parcel insured", "llm")]


async def test_fillers_stop_when_the_model_times_out_and_the_apology_plays(
    started: Start,
) -> None:
    chatty = PROFILE.model_copy(update={"filler_every_ms": 200})
    bot = await started(llm=ScriptedLLM(["Too late."], delay_s=5.0), profile=chatty)
    await bot.say("is my parcel insured")
    await bot.until(lambda: len(bot.turns) == 1)
    await bot.call.play(silence(1500))
    await bot.hang_up()
    ((turn),) = bot.turns
    assert turn.error is not None and "llm" in turn.error
    _, events = await bot.records()
    # The model's 2 s timeout: fillers at 0.3, 1.1 and 1.6 s, then the apology, then none.
    assert [kind for kind, _ in events] == ["filler", "filler", "filler", "error"]
    assert voiced_ms(bot.call.sent) == 300 + 600 + 300 + 600 + len(PROFILE.apology.split()) * 100


async def test_a_filler_is_cut_by_a_barge_in(started: Start) -> None:
    bot = await started(llm=ScriptedLLM(["Okay."], delay_s=3.0))
    await bot.say("is my parcel insured")
    await bot.until(lambda: bot.call.queued_frames > 0)  # the filler has started
    sent_before = voiced_ms(bot.call.sent)
    await bot.say("hello")  # the caller talks over the filler
    await bot.hang_up()
    assert bot.call.cleared > 0  # the rest of the filler was dropped
    assert voiced_ms(bot.call.sent) - sent_before < 600
    assert bot.turns[0].barged_in and FILLER_AUDIO_OUT in bot.turns[0].stages
    _, events = await bot.records()
    assert [kind for kind, _ in events] == ["filler", "barge_in"]


# -- history -------------------------------------------------------------------------


async def test_a_cached_answer_joins_the_llm_history(started: Start) -> None:
    llm = ScriptedLLM(["By card, yes."])
    bot = await started(llm=llm)
    await bot.say("where is my order")
    await bot.until(lambda: len(bot.turns) == 1)
    await bot.say("and can I pay by card", lead_ms=200)
    await bot.until(lambda: len(bot.turns) == 2)
    await bot.hang_up()
    assert [t.route for t in bot.turns] == ["exact", "llm"]
    ((prompt),) = llm.prompts
    assert [(m.role, m.content) for m in prompt[1:]] == [
        ("user", "where is my order"),
        ("assistant", ORDER_ANSWER),
        ("user", "and can I pay by card"),
    ]
