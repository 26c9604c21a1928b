"""The call pipeline end to end on an in-memory call with scripted models.

Each call runs on a clock of the test's (``FakeClock``): its frames, silences and the
model's delays pass as the test feeds the call, not in real time.
"""

import asyncio
import contextlib

import numpy as np
import pytest

from bot.pipeline.prompts import PromptAudio
from bot.pipeline.session import CallSession
from bot.pipeline.turn import Turn
from bot.profile import BotProfile
from tests.bot.fakes import (
    MemoryCall,
    ScriptedASR,
    ScriptedLLM,
    ToneTTS,
    fake_models,
    silence,
    tone,
)
from tests.support.clock import FakeClock

PROFILE = BotProfile(
    name="t",
    greeting="Hello there caller",
    apology="Sorry about that",
    system_prompt="Be brief.",
)


async def start(
    asr: ScriptedASR, llm: ScriptedLLM
) -> tuple[MemoryCall, CallSession, list[Turn], asyncio.Task[None]]:
    tts, clock = ToneTTS(), FakeClock()
    models = await fake_models(asr, llm, tts, clock)
    prompts = PromptAudio(8000)
    await prompts.add(tts, PROFILE.greeting)
    await prompts.add(tts, PROFILE.apology)
    call = MemoryCall(clock=clock)
    turns: list[Turn] = []
    session = CallSession(call, models, PROFILE, prompts, on_turn=turns.append, clock=clock)
    task = asyncio.create_task(session.run())
    await asyncio.sleep(0)
    return call, session, turns, task


async def finish(call: MemoryCall, task: asyncio.Task[None]) -> None:
    await call.end()
    await asyncio.wait_for(task, 5)


def voiced_ms(pcm: bytes) -> int:
    samples = np.frombuffer(bytes(pcm), "<i2")
    frames = samples[: len(samples) // 160 * 160].reshape(-1, 160).astype(np.float64)
    return int((np.sqrt((frames**2).mean(axis=1)) > 500).sum()) * 20


async def test_greeting_then_an_answer_with_stage_timings() -> None:
    llm = ScriptedLLM(["Your order", " ships", " today.", " Thanks", " for waiting."])
    call, _session, turns, task = await start(ScriptedASR("where is my order"), llm)
    await call.play(silence(700))  # greeting: 3 words = 300 ms of tone
    assert voiced_ms(call.sent) == 300
    await call.play(tone(600) + silence(600))
    await call.play(silence(1200))
    await finish(call, task)

    assert len(turns) == 1
    turn = turns[0]
    assert turn.transcript == "where is my order"
    assert turn.route == "llm"
    assert turn.answer == "Your order ships today. Thanks for waiting."
    stages = turn.since_speech_end_ms()
    for stage in ("eot_decided", "transcript_ready", "first_token", "first_audio_out"):
        assert stage in stages
    assert stages["eot_decided"] <= stages["transcript_ready"] <= stages["first_audio_out"]
    # the user message reached the model after the system prompt
    assert [m.role for m in llm.prompts[0]] == ["system", "user"]
    assert voiced_ms(call.sent) == 300 + 7 * 100


async def test_barge_in_stops_the_bot_within_a_few_frames() -> None:
    words = " ".join(["word"] * 40) + "."
    llm = ScriptedLLM([w + " " for w in words.split()])
    call, session, turns, task = await start(ScriptedASR("tell me everything"), llm)
    await call.play(silence(500))
    await call.play(tone(400) + silence(700))
    # the bot is now answering: 40 words = 4 s of tone; let it speak for a while
    await call.play(silence(600))
    assert call.queued_frames > 10
    sent_before = len(call.sent)
    await call.play(tone(400))  # the caller talks over the bot
    await call.play(silence(100))
    assert call.cleared > 0
    assert session.speaker.busy is False
    # after the barge-in is detected (barge_in_ms=200), at most a few more frames go out
    played_during_barge = (len(call.sent) - sent_before) // 320
    assert played_during_barge <= 200 // 20 + 3
    before_quiet = len(call.sent)
    await call.play(silence(100))
    assert voiced_ms(call.sent[before_quiet:]) == 0
    await finish(call, task)
    assert turns[0].barged_in


async def test_a_failing_model_makes_the_bot_apologise() -> None:
    # A request (a greeting would get its fixed reply without the model).
    call, _session, turns, task = await start(
        ScriptedASR("where is my order"), ScriptedLLM([], fail=True)
    )
    await call.play(silence(500))
    await call.play(tone(400) + silence(700))
    await call.play(silence(600))
    await finish(call, task)
    assert turns[0].route == "fallback"
    assert turns[0].answer == PROFILE.apology
    assert turns[0].error is not None and "llm" in turns[0].error
    assert voiced_ms(call.sent) == 300 + 300  # greeting + "Sorry about that"


async def test_a_failing_transcriber_makes_the_bot_apologise() -> None:
    call, _session, turns, task = await start(ScriptedASR(fail=True), ScriptedLLM(["Hi."]))
    await call.play(silence(500))
    await call.play(tone(400) + silence(700))
    await call.play(silence(600))
    await finish(call, task)
    assert turns[0].route == "fallback"
    assert voiced_ms(call.sent) == 600


async def test_call_end_stops_every_processor() -> None:
    call, session, _turns, task = await start(ScriptedASR(), ScriptedLLM(["Hi."], delay_s=0.5))
    await call.play(tone(400) + silence(700))
    await finish(call, task)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(0)
    for proc in (
        session.turn_detector,
        session.transcriber,
        session.responder,
        session.guard,
        session.speaker,
    ):
        assert proc._worker is None


@pytest.mark.parametrize("n", [3])
async def test_turns_keep_conversation_history(n: int) -> None:
    llm = ScriptedLLM(["Okay."])
    call, _session, turns, task = await start(ScriptedASR("again"), llm)
    await call.play(silence(400))
    for _ in range(n):
        await call.play(tone(400) + silence(700))
        await call.play(silence(300))
    await finish(call, task)
    assert len(turns) == n
    # The caller's earlier words, never the model's own answers (it would copy them).
    assert [m.role for m in llm.prompts[-1]] == ["system", "user", "user", "user"]


async def test_a_knowledge_answer_plays_from_the_audio_made_at_start() -> None:
    # The node synthesizes every stage's fixed words at start (fixed_phrases); the
    # responder's knowledge answers were among them, yet were synthesized again on the call.
    from bot.knowledge.index import KnowledgeIndex  # noqa: PLC0415
    from bot.pipeline.session import fixed_phrases  # noqa: PLC0415
    from bot.profile import KnowledgeEntry  # noqa: PLC0415
    from tests.serve.fakes import FakeEmbedder  # noqa: PLC0415

    entry = KnowledgeEntry(
        topic="gift_cards",
        questions=["do you sell gift cards"],
        answer="Gift cards are sold on our website.",
    )
    profile = PROFILE.model_copy(update={"knowledge": [entry]})
    tts, llm, clock = ToneTTS(), ScriptedLLM(["The model answers."]), FakeClock()
    models = await fake_models(ScriptedASR("do you sell gift cards"), llm, tts, clock)
    embedder = FakeEmbedder()
    await embedder.load()
    knowledge = await KnowledgeIndex.build([entry], embedder, profile.knowledge_matching)
    prompts = PromptAudio(8000)
    for text in fixed_phrases(profile):
        await prompts.add(tts, text)
    assert entry.answer in tts.texts
    made_at_start = len(tts.texts)
    call, turns = MemoryCall(clock=clock), []
    session = CallSession(
        call, models, profile, prompts, on_turn=turns.append, knowledge=knowledge, clock=clock
    )
    task = asyncio.create_task(session.run())
    await call.play(silence(700) + tone(600) + silence(2000))
    await finish(call, task)
    assert [(t.route, t.answer) for t in turns] == [("knowledge", entry.answer)]
    assert len(tts.texts) == made_at_start  # nothing synthesized on the call
    assert not llm.prompts
    assert voiced_ms(call.sent) == 300 + 7 * 100  # the greeting, then the ready answer


async def test_a_short_word_is_a_turn_once_the_greeting_has_played_out() -> None:
    # The greeting goes straight into the speaker: while it plays the bot has the line, and
    # a word shorter than barge_in_ms (200) is no barge-in; once its audio has drained the
    # speaker lets go, and the same word, over min_speech_ms (120), starts a turn.
    call, session, turns, task = await start(ScriptedASR("yes"), ScriptedLLM(["Good."]))
    await call.play(silence(40))
    assert session.turn_detector.line.held  # the greeting: 300 ms of tone
    await call.play(tone(160) + silence(60))
    assert session.turn_detector.line.held
    await call.play(silence(600))
    assert not session.turn_detector.line.held
    assert turns == []  # the word over the greeting was not heard as a turn
    await call.play(tone(160) + silence(800))
    await call.play(silence(1000))  # a bare "yes" waits acknowledgement_silence_ms (1500)
    await finish(call, task)
    assert [t.transcript for t in turns] == ["yes"]
    assert not turns[0].barged_in


async def test_the_bot_has_the_line_while_the_model_answers() -> None:
    # Nothing said yet, nothing playing: the responder has the line while the model works.
    llm = ScriptedLLM(["Your order ships today."], delay_s=1.0)
    call, session, turns, task = await start(ScriptedASR("where is my order"), llm)
    await call.play(silence(500))
    await call.play(tone(400) + silence(800))
    assert llm.prompts  # the model has the question
    assert call.queued_frames == 0 and session.speaker.busy is False
    assert session.turn_detector.line.held
    await call.play(silence(1000))
    await call.play(silence(1200))  # the answer has played out
    assert not session.turn_detector.line.held
    await finish(call, task)
    assert [t.answer for t in turns] == ["Your order ships today."]
