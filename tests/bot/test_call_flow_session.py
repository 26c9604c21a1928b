"""Call flows inside a whole call session (in-memory call, scripted models): a recorded
call's announcement comes first, and a caller hanging up mid-lookup stops it at once.

The call runs on a clock of the test's; the lookup service that never answers, and how
soon the hang-up stops it, are real time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import numpy as np

from bot.callflow import CollectorConfig, LookupConfig, LookupParam, MenuConfig, MenuOption
from bot.lookups.webhook import Webhooks
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.session import CallSession
from bot.profile import BotProfile, RecordingConfig
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
from tests.support.clock import FakeClock

ANNOUNCEMENT = "This call is recorded"
PROFILE = BotProfile(
    name="t",
    greeting="Hello there caller",
    apology="Sorry about that",
    system_prompt="Be brief.",
    menus=[
        MenuConfig(
            name="main", prompt="Press 1 for orders", options=[MenuOption(key="1", collect="n")]
        )
    ],
    collectors=[
        CollectorConfig(
            name="n", prompt="Your number", min_length=3, max_length=3, lookup="orders", param="n"
        )
    ],
    lookups=[
        LookupConfig(
            name="orders",
            url="http://orders.invalid/{n}",
            params={"n": LookupParam(type="digits", min_length=3, max_length=3)},
            timeout_s=20.0,
            preamble="Let me look",
            answer="It is {status}",
        )
    ],
    recording=RecordingConfig(enabled=True, announcement=ANNOUNCEMENT),
)


class LoudAnnouncementTTS(ToneTTS):
    """The announcement louder than everything else, to find it in what was sent."""

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        self.texts.append(text)
        for _ in text.split():
            yield tone(100, 12000 if text == ANNOUNCEMENT else 3000)


class AnsweredCall(MemoryCall):
    remote_uri = "sip:caller@pbx"
    local_uri = "sip:bot@node"

    def __init__(self, clock: FakeClock) -> None:
        super().__init__("flow-1", clock=clock)


async def test_announcement_first_and_a_hang_up_mid_lookup_cancels_it() -> None:
    tts, clock = LoudAnnouncementTTS(), FakeClock()
    models = await fake_models(ScriptedASR(""), ScriptedLLM(["Okay."]), tts, clock)
    prompts = PromptAudio(8000)
    for text in (PROFILE.greeting, PROFILE.apology, "Let me look", "Your number", ANNOUNCEMENT):
        await prompts.add(tts, text)
    asked, cancelled = asyncio.Event(), asyncio.Event()

    async def never_answers(request: httpx.Request) -> httpx.Response:
        asked.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("not reached")

    webhooks = Webhooks(PROFILE.lookups, {}, transport=httpx.MockTransport(never_answers))
    call = AnsweredCall(clock)
    session = CallSession(
        call,
        models,
        PROFILE,
        prompts,
        on_turn=lambda t: None,
        webhooks=webhooks,
        recording="/recordings/flow-1.wav",
        clock=clock,
    )
    task = asyncio.create_task(session.run())
    await call.play(silence(600))
    sent = np.frombuffer(bytes(call.sent), "<i2")
    assert sent[:800].max() > 10000, "the announcement was not first"  # 100 ms at 8 kHz
    for digit in "1123":  # key 1 (the collector), then the number
        await call._inbound.put(DtmfIn(digit=digit, duration_ms=100, at=clock.now()))
        await call.play(silence(100))
    await asyncio.wait_for(asked.wait(), 5)
    ended = time.monotonic()
    await call.end()
    await asyncio.wait_for(task, 5)
    await asyncio.wait_for(cancelled.wait(), 1)
    assert time.monotonic() - ended < 1.0  # everything of the call stopped at once
    await webhooks.close()
