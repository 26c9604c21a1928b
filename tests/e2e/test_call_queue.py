"""The call queue on a real node: capacity 1, three callers over loopback.

The first caller talks to the bot; the second and third are answered into the line and
hear their place in it; the second gets the bot's greeting once the first hangs up; the
third waits the longest allowed and hears the apology, then the bot hangs up. The call
log has each step. About 40 s of calls after the model load.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from bot.calllog.models import Call, CallEvent
from bot.profile import DEFAULT_PROFILE, load_profile
from bot.queue.settings import QueueSettings
from telephony.dialer import DialResult, dial
from testkit.botproc import BotProcess, run_bot
from testkit.wire import FRAME_MS, segments, voiced_frames
from tests.e2e.conftest import Listener
from tests.support.text import word_error_rate

pytestmark = [pytest.mark.sip, pytest.mark.models]

RATE = 8000
MAX_WAIT_S = 12.0


async def wait_for(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.05)


def logged(bot: BotProcess, text: str) -> int:
    return sum(text in line for line in list(bot.lines))


def audio(result: DialResult, start_s: float, end_s: float | None = None) -> np.ndarray:
    """What the caller heard from ``start_s`` to ``end_s`` after its media started."""
    a = int(start_s * RATE)
    b = None if end_s is None else int(end_s * RATE)
    return result.received[a:b]


def speech_start_near(result: DialResult, at_s: float, before_s: float, after_s: float) -> float:
    """Where the caller first heard speech start from ``before_s`` before ``at_s`` to
    ``after_s`` after it (s of the caller's media). The hold chime (about 1 s every 4 s) is
    shorter than a spoken sentence."""
    runs = segments(voiced_frames(result.received), 400)
    starts = [a * FRAME_MS / 1000 for a, b in runs if (b - a) * FRAME_MS >= 1500]
    near = [s for s in starts if at_s - before_s <= s <= at_s + after_s]
    window = f"from {before_s} s before to {after_s} s after {at_s:.1f} s"
    assert near, f"no speech starts {window}: {starts}"
    return near[0]


def events_by_call(data_dir: Path) -> list[tuple[Call, list[tuple[str, str | None]]]]:
    engine = create_engine(f"sqlite:///{data_dir / 'switchboard.db'}")
    try:
        with Session(engine) as session:
            out = []
            for call in session.scalars(select(Call).order_by(Call.answered_at)):
                rows = session.scalars(
                    select(CallEvent).where(CallEvent.call_id == call.id).order_by(CallEvent.at)
                ).all()
                out.append((call, [(e.kind, e.detail) for e in rows]))
            return out
    finally:
        engine.dispose()


async def test_capacity_one_queues_two_callers_then_serves_one_and_times_out_one(
    tmp_path: Path, listener: Listener
) -> None:
    env = {
        "SWITCHBOARD_DATA_DIR": str(tmp_path),
        "SWITCHBOARD_SIP__MAX_CALLS": "3",
        "SWITCHBOARD_QUEUE__MAX_ACTIVE": "1",
        "SWITCHBOARD_QUEUE__MAX_WAITING": "2",
        "SWITCHBOARD_QUEUE__MAX_WAIT_S": str(MAX_WAIT_S),
        "SWITCHBOARD_QUEUE__UPDATE_EVERY_S": "60",
    }
    queue = QueueSettings()
    greeting = load_profile(DEFAULT_PROFILE).greeting
    with run_bot(env=env) as bot:
        # Caller 1 talks to the bot for 9 s, then hangs up.
        first = asyncio.ensure_future(dial(bot.uri, record_seconds=9))
        await wait_for(lambda: logged(bot, "greeting queued") >= 1, 20, "caller 1 answered")
        # Caller 2 and then caller 3 find the node full: in line, in that order.
        second = asyncio.ensure_future(dial(bot.uri, record_seconds=30))
        await wait_for(lambda: logged(bot, "queued at position 1") >= 1, 20, "caller 2 queued")
        third = asyncio.ensure_future(dial(bot.uri, record_seconds=40))
        await wait_for(lambda: logged(bot, "queued at position 2") >= 1, 20, "caller 3 queued")
        one = await first
        two, three = await asyncio.gather(second, third)
        await asyncio.sleep(1.0)  # the call log's last records
    assert one.sip_final_status == 200 and not one.ended_by_remote, one.error

    # The call log: one row per caller, the queue's steps as events.
    calls = events_by_call(tmp_path)
    assert len(calls) == 3, calls
    (c1, e1), (c2, e2), (c3, e3) = calls
    assert [k for k, _ in e1 if k.startswith(("queue", "dequeue"))] == []
    assert [k for k, _ in e2][:2] == ["queued", "dequeued"], e2
    assert e2[0][1] == "position 1"
    waited = float((e2[1][1] or "").split()[1])
    assert 3.0 < waited < MAX_WAIT_S, e2
    assert [k for k, _ in e3] == ["queued", "queue_timeout"], e3
    assert e3[0][1] == "position 2"
    assert c3.end_reason == "queue_timeout" and c2.end_reason not in (None, "queue_timeout")
    assert all(c.ended_at is not None for c in (c1, c2, c3))

    # Caller 2: answered at once, told its place, then the bot's greeting after caller 1.
    # When it was served comes from the node's own clock (its wait in line, from the moment
    # it was answered into the line); the test's clock (when caller 1's dial returned) runs
    # seconds late on a loaded machine.
    assert two.sip_final_status == 200 and not two.ended_by_remote, two.error
    assert two.first_tick_at is not None
    in_line = await listener.hear(audio(two, 0.0, min(waited, 7.0)))
    welcome = queue.welcome.format(position=1)
    assert word_error_rate(welcome, in_line.replace("one", "1")) <= 0.4, in_line
    greeted_s = speech_start_near(two, waited, 1.5, 3.0)
    heard = await listener.hear(audio(two, max(0.0, greeted_s - 0.2), greeted_s + 6.0))
    assert word_error_rate(greeting, heard) <= 0.35, heard

    # Caller 3: told it is second in line, then the apology, then the bot's hang-up.
    assert three.sip_final_status == 200 and three.ended_by_remote, three.error
    assert three.first_tick_at is not None
    in_line = await listener.hear(audio(three, 0.0, 7.0))
    assert word_error_rate(queue.welcome.format(position=2), in_line.replace("two", "2")) <= 0.4
    goodbye = await listener.hear(audio(three, MAX_WAIT_S - 1.0))
    assert word_error_rate(queue.timeout, goodbye) <= 0.35, goodbye
    assert len(three.received) / RATE < MAX_WAIT_S + 12, "the bot did not hang up"
