"""The call timer: a quiet caller re-prompted then hung up on, and the longest call.

The timer runs on a clock the test moves (``FakeClock``): its limits are the profile's
seconds, and no test waits for them.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from bot.callflow import CallLimits
from bot.pipeline.frames import (
    CallAction,
    CallFinished,
    DataFrame,
    DtmfIn,
    Frame,
    LineHeld,
    Speak,
    UserStartedSpeaking,
    UserStoppedSpeaking,
)
from bot.pipeline.line_state import LineState
from bot.pipeline.processor import Collector
from bot.pipeline.stages.call_timer import CallTimer
from bot.pipeline.turn import Turn
from tests.support.clock import FakeClock


def say(turn: Turn | None, text: str) -> DataFrame:
    return Speak(turn=turn, text=text)


def spoken(frames: list[Frame]) -> list[str]:
    return [f.text for f in frames if isinstance(f, Speak)]


class Rig:
    """A timer on a clock of the test's, feeding a frame collector, the bot quiet unless
    told otherwise."""

    def __init__(self, limits: CallLimits) -> None:
        self.clock = FakeClock()
        self.out = Collector()
        self.events: list[str] = []
        self.line = LineState()
        self.timer = CallTimer(
            "c1",
            limits,
            answered_at=self.clock(),
            say=say,
            line=self.line,
            on_event=lambda kind, detail: self.events.append(kind),
            clock=self.clock,
        )
        self.timer.link(self.out)
        self.timer.start()

    @property
    def speaking(self) -> bool:
        return self.line.held

    @speaking.setter
    def speaking(self, on: bool) -> None:
        # As the speaker after the stage tells it (``LineHeld``, upstream).
        self.line.tell(LineHeld(held=on, by="speaker"))

    def spoken(self) -> list[str]:
        return spoken(self.out.frames)

    async def stop(self) -> None:
        await self.timer.put(CallFinished(reason="bye", at=self.clock()))
        await self.timer.stop()


async def test_a_quiet_caller_is_asked_then_hung_up_on() -> None:
    # Each check is 0.4 s clear of its limit either way (the timer looks every 0.2 s).
    limits = CallLimits(silence_reprompt_s=1.0, silence_hangup_s=1.0)
    rig = Rig(limits)
    rig.speaking = True  # the bot talking is not quiet
    await rig.clock.advance(1.4)
    assert rig.spoken() == []
    rig.speaking = False
    await rig.clock.advance(0.5)
    await rig.timer.put(UserStartedSpeaking(at=rig.clock()))  # speaking: not quiet
    await rig.clock.advance(1.4)
    await rig.timer.put(UserStoppedSpeaking(at=rig.clock()))
    await rig.clock.advance(0.5)
    assert rig.spoken() == []
    await rig.clock.advance(0.9)  # 1.4 s quiet
    assert rig.spoken() == [limits.silence_prompt]
    # a key: the count starts again
    await rig.timer.put(DtmfIn(digit="5", duration_ms=100, at=rig.clock()))
    await rig.clock.advance(1.4)
    assert rig.spoken() == [limits.silence_prompt] * 2
    await rig.clock.advance(1.4)
    assert rig.spoken() == [limits.silence_prompt] * 2 + [limits.goodbye]
    actions = [f for f in rig.out.frames if isinstance(f, CallAction)]
    assert len(actions) == 1 and (actions[0].action, actions[0].reason) == ("hangup", "silence")
    assert rig.events == ["silence_prompt", "silence_prompt", "call_limit"]
    await rig.clock.advance(5.0)  # the call is being ended: nothing more
    assert len(rig.spoken()) == 3
    await rig.stop()


async def test_the_prompt_comes_on_the_poll_after_the_limit_not_before() -> None:
    limits = CallLimits(silence_reprompt_s=1.0, silence_hangup_s=3.0)
    rig = Rig(limits)
    await rig.clock.advance(0.9)
    assert rig.spoken() == []
    await rig.clock.advance(0.2)  # 1.1 s: the poll at 1.0 s (or 1.2 s) has seen it
    assert rig.spoken() in ([], [limits.silence_prompt])
    await rig.clock.advance(0.2)
    assert rig.spoken() == [limits.silence_prompt]
    await rig.clock.advance(2.6)  # at most 2.9 s after the prompt: not yet
    assert rig.spoken() == [limits.silence_prompt]
    await rig.clock.advance(0.4)
    assert rig.spoken() == [limits.silence_prompt, limits.goodbye]
    await rig.stop()


async def test_the_longest_call_is_warned_then_ended_even_mid_conversation() -> None:
    limits = CallLimits(max_call_s=2.0, max_call_warning_s=1.0)
    rig = Rig(limits)
    rig.speaking = True  # a conversation going on does not hold the limit off
    await rig.clock.advance(0.6)
    assert rig.spoken() == []
    await rig.clock.advance(0.9)
    assert rig.spoken() == [limits.max_call_warning]
    await rig.clock.advance(1.0)
    assert rig.spoken() == [limits.max_call_warning, limits.max_call_goodbye]
    actions = [f for f in rig.out.frames if isinstance(f, CallAction)]
    assert [(a.action, a.reason) for a in actions] == [("hangup", "max_duration")]
    assert rig.events == ["max_call_warning", "call_limit"]
    await rig.stop()


async def test_the_timer_stops_with_the_call() -> None:
    rig = Rig(CallLimits(silence_reprompt_s=0.3))
    await rig.timer.put(CallFinished(reason="bye", at=rig.clock()))
    await rig.clock.advance(5.0)
    assert rig.spoken() == []
    await rig.timer.stop()


async def test_the_timer_stops_when_the_caller_is_bridged_to_an_agent() -> None:
    limits = CallLimits(silence_reprompt_s=1.0, max_call_s=3.0, max_call_warning_s=1.0)
    rig = Rig(limits)
    await rig.clock.advance(0.6)
    await rig.timer.on_bridged()
    await rig.clock.advance(10.0)
    assert rig.spoken() == [] and rig.events == []


class Heard(Collector):
    """Keeps every frame, and says when something was said."""

    def __init__(self) -> None:
        super().__init__()
        self.said = asyncio.Event()

    async def put(self, frame: Frame) -> None:
        await super().put(frame)
        if isinstance(frame, Speak):
            self.said.set()


async def test_on_the_monotonic_clock_a_quiet_caller_is_asked_after_the_limit() -> None:
    """Without a clock given, the timer reads the monotonic clock and really waits."""
    out = Heard()
    limits = CallLimits(silence_reprompt_s=0.3)
    timer = CallTimer("c1", limits, answered_at=time.monotonic(), say=say)
    timer.link(out)
    started = time.monotonic()
    timer.start()
    await asyncio.wait_for(out.said.wait(), 30)
    assert time.monotonic() - started >= 0.3
    assert spoken(out.frames) == [limits.silence_prompt]
    await timer.put(CallFinished(reason="bye", at=time.monotonic()))
    await timer.stop()


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="needs silence_reprompt_s"):
        CallLimits(silence_hangup_s=5)
    with pytest.raises(ValueError, match="below max_call_s"):
        CallLimits(max_call_s=30, max_call_warning_s=60)
