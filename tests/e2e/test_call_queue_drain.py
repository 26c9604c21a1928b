"""SIGTERM on a real node with a caller waiting in its call queue (capacity 1).

The waiting caller is already connected to this node: the drain keeps serving them as
slots free; at the drain's limit they hear the apology and the node hangs up (the overflow
target, when one is set, is tested in test_call_queue_overflow.py). A new caller gets 503
throughout. Each test starts a node of its own and pays a model load.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from bot.profile import DEFAULT_PROFILE, load_profile
from bot.queue.settings import QueueSettings
from telephony.dialer import dial
from testkit.botproc import run_bot
from tests.e2e.conftest import Listener
from tests.e2e.test_call_queue import audio, events_by_call, logged, wait_for
from tests.e2e.test_drain import ask
from tests.support.text import word_error_rate

pytestmark = [pytest.mark.sip, pytest.mark.models]

RATE = 8000


def queue_env(data_dir: Path, drain_s: float) -> dict[str, str]:
    return {
        "SWITCHBOARD_DATA_DIR": str(data_dir),
        "SWITCHBOARD_SIP__MAX_CALLS": "2",
        "SWITCHBOARD_SIP__DRAIN_S": str(drain_s),
        "SWITCHBOARD_QUEUE__MAX_ACTIVE": "1",
        "SWITCHBOARD_QUEUE__MAX_WAITING": "1",
        "SWITCHBOARD_QUEUE__MAX_WAIT_S": "120",
        "SWITCHBOARD_QUEUE__UPDATE_EVERY_S": "60",
    }


async def test_sigterm_serves_the_caller_in_line_once_the_conversation_ends(
    tmp_path: Path, listener: Listener
) -> None:
    greeting = load_profile(DEFAULT_PROFILE).greeting
    with run_bot(env=queue_env(tmp_path, drain_s=60)) as bot:
        # Caller 1 talks to the bot and hangs up at 14 s; caller 2 waits in line.
        first = asyncio.ensure_future(dial(bot.uri, record_seconds=14))
        await wait_for(lambda: logged(bot, "greeting queued") >= 1, 20, "caller 1 answered")
        second = asyncio.ensure_future(dial(bot.uri, record_seconds=28))
        await wait_for(lambda: logged(bot, "queued at position 1") >= 1, 20, "caller 2 queued")
        bot.proc.send_signal(signal.SIGTERM)
        await wait_for(lambda: logged(bot, "draining") >= 1, 5, "the drain started")
        reply = await asyncio.to_thread(ask, bot.port, "INVITE")
        assert reply.startswith("SIP/2.0 503 "), reply[:200]  # a new caller: elsewhere
        one = await first
        # Caller 2 gets the slot during the drain: the bot greets them.
        await wait_for(lambda: logged(bot, "greeting queued") >= 2, 10, "caller 2 served")
        two = await second
        assert await asyncio.to_thread(bot.proc.wait, 20) == 0
        assert logged(bot, "drained: no live call") == 1
    assert one.sip_final_status == 200 and not one.ended_by_remote, one.error
    assert two.sip_final_status == 200 and not two.ended_by_remote, two.error
    assert one.first_tick_at is not None and two.first_tick_at is not None
    # Caller 1 hung up 14 s into its media (its own clock: the dialer's return may come
    # later on a loaded machine); caller 2's greeting follows at once.
    served_s = one.first_tick_at + 14.0 - two.first_tick_at
    heard = await listener.hear(audio(two, served_s - 0.3, served_s + 6.5))
    assert word_error_rate(greeting, heard) <= 0.35, heard

    calls = events_by_call(tmp_path)
    assert len(calls) == 2, calls
    (c1, _), (c2, e2) = calls
    assert [k for k, _ in e2][:2] == ["queued", "dequeued"], e2
    assert not [k for k, _ in e2 if k in ("queue_closed", "queue_abandoned")], e2
    for call in (c1, c2):
        assert call.ended_at is not None and call.end_reason is not None, call


async def test_at_the_drain_limit_the_caller_in_line_hears_the_apology_before_the_stop(
    tmp_path: Path, listener: Listener
) -> None:
    drain_s = 8.0
    apology = QueueSettings().timeout
    with run_bot(env=queue_env(tmp_path, drain_s=drain_s)) as bot:
        # Both callers would stay 40 s: the conversation holds the only slot all along.
        first = asyncio.ensure_future(dial(bot.uri, record_seconds=40))
        await wait_for(lambda: logged(bot, "greeting queued") >= 1, 20, "caller 1 answered")
        second = asyncio.ensure_future(dial(bot.uri, record_seconds=40))
        await wait_for(lambda: logged(bot, "queued at position 1") >= 1, 20, "caller 2 queued")
        signalled = time.monotonic()
        bot.proc.send_signal(signal.SIGTERM)
        await wait_for(lambda: logged(bot, "draining") >= 1, 5, "the drain started")
        one, two = await asyncio.gather(first, second)
        assert await asyncio.to_thread(bot.proc.wait, 20) == 0
    # Caller 2: the apology from the drain's limit on, then the node's BYE.
    assert two.sip_final_status == 200 and two.ended_by_remote, two.error
    assert two.first_tick_at is not None
    limit_s = signalled + drain_s - two.first_tick_at
    assert len(two.received) / RATE < limit_s + 12, "no hang-up after the apology"
    heard = await listener.hear(audio(two, limit_s - 0.5))
    assert word_error_rate(apology, heard) <= 0.35, heard
    # Caller 1: the conversation went on until the limit, then the node hung up.
    assert one.sip_final_status == 200 and one.ended_by_remote, one.error

    calls = events_by_call(tmp_path)
    assert len(calls) == 2, calls
    (c1, _), (c2, e2) = calls
    assert [k for k, _ in e2] == ["queued", "queue_closed"], e2
    assert (e2[1][1] or "").startswith("node stopping, waited "), e2
    assert c2.end_reason == "queue_closed" and c2.ended_at is not None
    assert c1.ended_at is not None and c1.end_reason is not None
    assert logged(bot, "dismissing 1 callers in line") == 1
