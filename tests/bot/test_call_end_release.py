"""What a call holds of the node's shared models is given back when the call ends, not
when the garbage collector frees the call's objects (reference cycles: they wait for a
full collection, which a busy node makes seldom). The calls run on a clock of the test's."""

import asyncio
import gc
import weakref

from bot.pipeline.prompts import PromptAudio
from bot.pipeline.session import CallSession
from bot.profile import BotProfile
from serve.vad import VadStream
from tests.bot.fakes import (
    EnergyStream,
    EnergyVAD,
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
    name="t", greeting="Hello there caller", apology="Sorry about that", system_prompt="Be brief."
)


class ClosingStream(EnergyStream):
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.log.append("open")

    def close(self) -> None:
        self.log.append("closed")


class PooledVAD(EnergyVAD):
    """A VAD whose streams say when they are opened and closed."""

    def __init__(self) -> None:
        super().__init__(name="vad")
        self.log: list[str] = []

    def _create_stream_impl(self, sample_rate: int) -> VadStream:
        return ClosingStream(self.log)


async def test_every_call_closes_its_vad_stream_when_it_ends_with_no_collection() -> None:
    tts, clock = ToneTTS(), FakeClock()
    llm = ScriptedLLM(["Soon."])
    models = await fake_models(ScriptedASR("where is my order"), llm, tts, clock)
    vad = PooledVAD()
    await vad.load()
    models.vad = vad
    prompts = PromptAudio(8000)
    for text in (PROFILE.greeting, PROFILE.apology):
        await prompts.add(tts, text)
    sessions: list[weakref.ref[CallSession]] = []
    gc.collect()
    gc.disable()  # the node between two full collections
    try:
        for n in range(3):
            call = MemoryCall(call_id=f"call-{n}", clock=clock)
            session = CallSession(call, models, PROFILE, prompts, clock=clock)
            sessions.append(weakref.ref(session))
            task = asyncio.create_task(session.run())
            await call.play(silence(100) + tone(300) + silence(100))
            await call.end()
            await asyncio.wait_for(task, 5)
            del session, task, call
        assert vad.log == ["open", "closed"] * 3
        assert any(s() is not None for s in sessions)  # the calls' objects: still there
    finally:
        gc.enable()
        gc.collect()
