"""The call timer: a quiet caller re-prompted then hung up on, and the longest call."""

from __future__ import annotations

import asyncio
import time

import pytest

from bot.callflow import CallLimits
from bot.pipeline.call_timer import CallTimer
from bot.pipeline.frames import (
    CallAction,
    CallFinished,
    DataFrame,
    Dtmf,
    Frame,
    Speak,
    UserStartedSpeaking,
    UserStoppedSpeaking,
)
from bot.pipeline.processor import Collector
from bot.pipeline.turn import Turn


def say(turn: Turn | None, text: str) -> DataFrame:
    return Speak(turn=turn, text=text)


def spoken(frames: list[Frame]) -> list[str]:
    return [f.text for f in frames if isinstance(f, Speak)]


def rig(limits: CallLimits) -> tuple[CallTimer, Collector, list[str], dict[str, bool]]:
    out = Collector()
    events: list[str] = []
    state = {"speaking": False}
    timer = CallTimer(
        "c1",
        limits,
        answered_at=time.monotonic(),
        say=say,
        bot_speaking=lambda: state["speaking"],
        on_event=lambda kind, detail: events.append(kind),
    )
    timer.link(out)
    timer.start()
    return timer, out, events, state


async def test_a_quiet_caller_is_asked_then_hung_up_on() -> None:
    # Waits are 0.4 s clear of each limit either way (the timer looks every 0.2 s).
    limits = CallLimits(silence_reprompt_s=1.0, silence_hangup_s=1.0)
    timer, out, events, state = rig(limits)
    state["speaking"] = True  # the bot talking is not quiet
    await asyncio.sleep(1.4)
    assert spoken(out.frames) == []
    state["speaking"] = False
    await asyncio.sleep(0.5)
    await timer.put(UserStartedSpeaking(at=time.monotonic()))  # speaking: not quiet
    await asyncio.sleep(1.4)
    await timer.put(UserStoppedSpeaking(at=time.monotonic()))
    await asyncio.sleep(0.5)
    assert spoken(out.frames) == []
    await asyncio.sleep(0.9)  # 1.4 s quiet
    assert spoken(out.frames) == [limits.silence_prompt]
    await timer.put(Dtmf(digit="5", at=time.monotonic()))  # a key: the count starts again
    await asyncio.sleep(1.4)
    assert spoken(out.frames) == [limits.silence_prompt] * 2
    await asyncio.sleep(1.4)
    assert spoken(out.frames) == [limits.silence_prompt] * 2 + [limits.goodbye]
    actions = [f for f in out.frames if isinstance(f, CallAction)]
    assert len(actions) == 1 and (actions[0].action, actions[0].reason) == ("hangup", "silence")
    assert events == ["silence_prompt", "silence_prompt", "call_limit"]
    await timer.put(CallFinished(reason="bye", at=time.monotonic()))


async def test_the_longest_call_is_warned_then_ended_even_mid_conversation() -> None:
    limits = CallLimits(max_call_s=2.0, max_call_warning_s=1.0)
    timer, out, events, state = rig(limits)
    state["speaking"] = True  # a conversation going on does not hold the limit off
    await asyncio.sleep(0.6)
    assert spoken(out.frames) == []
    await asyncio.sleep(0.9)
    assert spoken(out.frames) == [limits.max_call_warning]
    await asyncio.sleep(1.0)
    assert spoken(out.frames) == [limits.max_call_warning, limits.max_call_goodbye]
    actions = [f for f in out.frames if isinstance(f, CallAction)]
    assert [(a.action, a.reason) for a in actions] == [("hangup", "max_duration")]
    assert events == ["max_call_warning", "call_limit"]
    await timer.put(CallFinished(reason="bye", at=time.monotonic()))


async def test_the_timer_stops_with_the_call() -> None:
    timer, out, _, _ = rig(CallLimits(silence_reprompt_s=0.3))
    await timer.put(CallFinished(reason="bye", at=time.monotonic()))
    await asyncio.sleep(0.6)
    assert spoken(out.frames) == []


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="needs silence_reprompt_s"):
        CallLimits(silence_hangup_s=5)
    with pytest.raises(ValueError, match="below max_call_s"):
        CallLimits(max_call_s=30, max_call_warning_s=60)
