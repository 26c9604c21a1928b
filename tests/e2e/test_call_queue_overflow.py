"""The call queue's overflow target over real SIP: a caller who waited too long goes to an
agent the test starts.

The node (capacity 1, one place in line, 6 s the longest wait) has its overflow target in
``SWITCHBOARD_SIP__TRANSFER_TARGETS`` and, in the profile, as a ``refer`` target that falls
back to a bridge: the project's dialer declines every REFER, so the caller first gets the
REFER (seen in its result), then the node calls the agent (baresip, answering by itself and
saying hello) and joins the two. The agent hangs up when its WAV ends: the caller gets the
BYE. The call log and the node's log are read back.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.profile import DEFAULT_PROFILE, load_profile
from telephony.dialer import dial
from testkit.botproc import run_bot
from testkit.ports import free_udp_port
from tests.e2e.conftest import Listener
from tests.e2e.test_call_flows import window
from tests.e2e.test_call_queue import events_by_call, logged, wait_for
from tests.e2e.test_transfers import AGENT_HELLO, agent_voice, last_utterance
from tests.support.agents import baresip_agent
from tests.support.text import word_error_rate

pytestmark = [pytest.mark.sip, pytest.mark.models]

MAX_WAIT_S = 6.0
INTENT_TARGET = "sip:agents@127.0.0.1:5070"  # the default profile's talk_to_person


def overflow_profile(path: Path, target: str) -> Path:
    """The default profile, the overflow target listed as a REFER that falls back to a
    bridge (and the intent's own target, so that it stays listed)."""
    text = DEFAULT_PROFILE.read_text(encoding="utf-8")
    text += f"""
[[transfer_targets]]
uri = "{target}"
mode = "refer"
bridge_on_refer_failure = true

[[transfer_targets]]
uri = "{INTENT_TARGET}"
"""
    path.write_text(text, encoding="utf-8")
    load_profile(path)
    return path


async def test_a_caller_who_waited_too_long_is_put_through_to_the_overflow_agent(
    tmp_path: Path, listener: Listener
) -> None:
    port = free_udp_port()
    target = f"sip:overflow@127.0.0.1:{port}"
    env = {
        "SWITCHBOARD_DATA_DIR": str(tmp_path),
        "SWITCHBOARD_SIP__MAX_CALLS": "2",
        "SWITCHBOARD_SIP__TRANSFER_TARGETS": f"{INTENT_TARGET},{target}",
        "SWITCHBOARD_QUEUE__MAX_ACTIVE": "1",
        "SWITCHBOARD_QUEUE__MAX_WAITING": "1",
        "SWITCHBOARD_QUEUE__MAX_WAIT_S": str(MAX_WAIT_S),
        "SWITCHBOARD_QUEUE__UPDATE_EVERY_S": "60",
        "SWITCHBOARD_QUEUE__OVERFLOW_TARGET": target,
    }
    profile = overflow_profile(tmp_path / "overflow.toml", target)
    voice = await asyncio.to_thread(agent_voice, 2.0, AGENT_HELLO, 2.0)
    with run_bot(env=env, profile=profile) as bot:
        async with baresip_agent(
            port, voice, tmp_path / "agent", timeout_s=90, user="overflow"
        ) as agent:
            first = asyncio.ensure_future(dial(bot.uri, record_seconds=30))
            await wait_for(lambda: logged(bot, "greeting queued") >= 1, 20, "caller 1 answered")
            second = asyncio.ensure_future(dial(bot.uri, record_seconds=40))
            await wait_for(lambda: logged(bot, "queued at position 1") >= 1, 20, "queued")
            two = await second
            one = await first
        await asyncio.sleep(1.0)  # the call log's last records
    lines = "\n".join(line for line in bot.lines if "transfer" in line or "bridge" in line)
    assert one.sip_final_status == 200 and not one.ended_by_remote, one.error
    assert two.sip_final_status == 200, two.error
    # The REFER came first (the dialer declined it), then the bridge to the agent.
    assert [t.strip("<>") for t in two.transfer_requests] == [target], lines
    assert agent.answered, (agent.log[-2000:], lines)
    assert two.ended_by_remote, "the caller's leg did not end with the agent's"
    assert len(two.received) / 8000 < 30, "the caller stayed on after the agent hung up"
    # The caller heard the overflow message at the longest wait, then the agent.
    before = (await listener.hear(window(two.received, MAX_WAIT_S - 0.5, MAX_WAIT_S + 5))).lower()
    assert "transfer" in before, before
    hello = (await listener.hear(last_utterance(two.received))).lower()
    assert word_error_rate(AGENT_HELLO, hello) <= 0.35, hello

    calls = events_by_call(tmp_path)
    assert len(calls) == 2, calls
    (_, e1), (c2, e2) = calls
    kinds = [(k, d) for k, d in e2]
    assert [k for k, _ in kinds] == [
        "queued",
        "transfer",
        "transfer_failed",
        "bridged",
        "bridge_ended",
        "queue_transfer",
    ], kinds
    assert kinds[1] == ("transfer", target)
    assert kinds[2] == ("transfer_failed", "603 Decline; bridging"), kinds
    assert kinds[3] == ("bridged", f"bridge {target}") and kinds[4][1] == "agent hung up"
    waited = float((kinds[5][1] or "").split()[1])
    assert MAX_WAIT_S <= waited < MAX_WAIT_S + 3, kinds
    assert c2.end_reason == "transferred" and c2.ended_at is not None
    assert not [k for k, _ in e1 if k.startswith("queue")]
