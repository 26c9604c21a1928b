"""A request for what a lookup is for is answered by the lookup, not the language model:
the collector asks for the number, the service answers (in-memory call, scripted models,
the webhook client on a mock transport). The call runs on a clock of the test's."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from bot.callflow import CollectorConfig, LookupConfig, LookupParam
from bot.lookups.webhook import Webhooks
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.session import CallSession
from bot.pipeline.turn import Turn
from bot.profile import BotProfile
from telephony.events import DtmfIn
from tests.bot.fakes import MemoryCall, ScriptedASR, ScriptedLLM, ToneTTS, fake_models, tone
from tests.support.clock import FakeClock

PROMPT = "Your order number please"
LOOKUP = LookupConfig(
    name="orders",
    url="http://orders.invalid/{n}",
    params={"n": LookupParam(type="digits", min_length=3, max_length=3)},
    preamble="Let me look",
    answer="It is {status}",
    purpose=["parcel left", "order status"],
)
PROFILE = BotProfile(
    name="t",
    greeting="Hello there caller",
    apology="Sorry about that",
    system_prompt="Be brief.",
    collectors=[
        CollectorConfig(
            name="n", prompt=PROMPT, min_length=3, max_length=3, lookup="orders", param="n"
        )
    ],
    lookups=[LOOKUP],
)


def test_a_purpose_needs_a_collector_to_ask_for_the_number() -> None:
    with pytest.raises(ValueError, match="a purpose needs a collector"):
        BotProfile(
            name="t",
            greeting="Hi",
            apology="Sorry",
            system_prompt="Be brief.",
            lookups=[LOOKUP],
        )


class AnsweredCall(MemoryCall):
    remote_uri = "sip:caller@pbx"
    local_uri = "sip:bot@node"

    def __init__(self, clock: FakeClock) -> None:
        super().__init__("ask-1", clock=clock)


class EventfulSession(CallSession):
    """Keeps the call events (no call log here)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.events: list[tuple[str, str]] = []
        super().__init__(*args, **kwargs)

    def _event(self, kind: str, detail: str) -> None:
        self.events.append((kind, detail))


async def test_the_lookup_answers_a_request_for_it_and_the_model_the_rest() -> None:
    tts, asr, llm = ToneTTS(), ScriptedASR(""), ScriptedLLM(["It is insured."])
    clock = FakeClock()
    models = await fake_models(asr, llm, tts, clock)
    prompts = PromptAudio(8000)
    for text in (PROFILE.greeting, PROFILE.apology, PROMPT, "Let me look"):
        await prompts.add(tts, text)
    asked: list[str] = []

    async def service(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return httpx.Response(200, json={"status": "shipped"})

    webhooks = Webhooks(PROFILE.lookups, {}, transport=httpx.MockTransport(service))
    turns: list[Turn] = []
    call = AnsweredCall(clock)
    session = EventfulSession(
        call, models, PROFILE, prompts, on_turn=turns.append, webhooks=webhooks, clock=clock
    )
    events = session.events
    task = asyncio.create_task(session.run())

    async def until(cond: object, timeout_s: float = 10.0) -> None:
        deadline = clock.now() + timeout_s
        while not cond():  # type: ignore[operator]
            assert clock.now() < deadline, "condition not met in time"
            await call.tick(bytes(320))

    await until(lambda: len(call.sent) > 0 and call.queued_frames == 0)  # the greeting
    asr.text = "has my parcel left the warehouse yet"
    await call.play(tone(400))
    await until(lambda: len(turns) == 1 and call.queued_frames == 0)
    ((turn),) = turns
    assert (turn.route, turn.intent, turn.answer) == ("ask", "orders", PROMPT)
    assert llm.prompts == []  # the model was not asked
    assert ("lookup_asked", 'orders: "parcel left"') in events
    assert ("collect_started", "n") in events
    for digit in "123":
        await call._inbound.put(DtmfIn(digit=digit, duration_ms=100, at=clock.now()))
        await call.tick(bytes(320))
    await until(lambda: len(turns) == 2)
    assert asked == ["/123"]
    assert (turns[1].route, turns[1].answer) == ("lookup", "Let me look It is shipped")
    # A request the lookup is not for still goes to the model.
    await until(lambda: call.queued_frames == 0)
    asr.text = "is my parcel insured"
    await call.play(tone(400))
    await until(lambda: len(turns) == 3)
    assert turns[2].route == "llm" and len(llm.prompts) == 1
    await call.end()
    await asyncio.wait_for(task, 5)
    await webhooks.close()
