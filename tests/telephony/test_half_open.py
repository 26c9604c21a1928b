"""Half-open calls over real SIP: 200 OKs never ACKed, BYEs never answered.

A caller that never ACKs its 200 OK, or has gone when the node's BYE comes, leaves a call
slot held in its worker's pjsua for 64*T1 at each step. These tests check that such calls
end, that their source is banned, and that the front never sends a call to a slot pjsua
still holds (pjsua would answer 486, which sends no trunk or proxy to another node): the
front answers 503 with Retry-After itself.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from telephony.events import NO_ACK
from telephony.floodguard import FrontLimits
from telephony.remote_call import RemoteCall
from tests.telephony.nodekit import Calls, dial_tone, wait_until
from tests.telephony.rawua import RawUA

pytestmark = pytest.mark.sip

#: A new INVITE, and the front's 503 with its Retry-After, never anything else.
BUSY_503 = """  <recv response="100" optional="true"/>
  <recv response="503">
    <action><ereg regexp="Retry-After: *23" search_in="msg" check_it="true" assign_to="ra"/>
    </action>
  </recv>
"""


def busy(helpers: Any) -> str:
    h = helpers
    return h.scenario(
        h.invite(h.sdp()), BUSY_503, h.ack(non2xx=True), '  <Reference variables="ra"/>\n'
    )


async def test_unacked_answers_end_free_their_slots_and_ban_their_source(
    make_node: Any, sipp: Any, helpers: Any, hears_own_tone: Any
) -> None:
    calls = Calls()
    calls.echo = True
    limits = FrontLimits(ban_after_unacked=3)
    # T1 100 ms: 64*T1 is 6.4 s (32 s at RFC 3261's 500 ms).
    async with make_node(calls, max_calls=3, t1_ms=100, retry_after_s=23, limits=limits) as node:
        dest = ("127.0.0.1", node.config.port)
        attacker = RawUA("127.0.0.5", ack=False, answer_bye=False)
        try:
            for i in range(3):
                attacker.invite(dest, f"half-open-{i}")
            await wait_until(lambda: node.active_calls == 3, what="three calls answered")
            answered = time.monotonic()
            # A call counts as answered once its 200 OK is sent; the caller reads it after.
            await wait_until(
                lambda: all(attacker.finals(f"half-open-{i}") for i in range(3)),
                what="a final answer to each INVITE",
            )
            assert all(attacker.finals(f"half-open-{i}") == [200] for i in range(3))
            res = await sipp(busy(helpers), node.config.port)  # the node is full
            assert res.ok, res.stdout + res.errors

            # 64*T1 after its 200 OK, each call ends for its bot, and pjsip sends a BYE.
            await wait_until(lambda: len(calls.ended()) == 3, timeout_s=20, what="calls ended")
            assert time.monotonic() - answered > 6.0
            assert {e.reason for e in calls.ended()} == {NO_ACK}
            assert all(attacker.requests("BYE", f"half-open-{i}") for i in range(3))
            stats = node.stats()
            assert stats["front_unacked"] == 3 and stats["front_bans"] == 1
            assert stats["front_slots_ending"] == 3  # the BYEs go unanswered for 64*T1

            # Their slots stay taken while those BYEs last: 503, not pjsua's 486.
            res = await sipp(busy(helpers), node.config.port)
            assert res.ok, res.stdout + res.errors
            # The source is banned: its next INVITE gets nothing at all.
            attacker.invite(dest, "half-open-3")
            await asyncio.sleep(1.0)
            assert not [r for r in attacker.got if r.call_id == "half-open-3"]

            # Once the BYEs are over, the slots are free: a caller is answered.
            await wait_until(
                lambda: node.stats()["front_slots_ending"] == 0, timeout_s=15, what="BYEs over"
            )
            assert len(attacker.requests("BYE", "half-open-0")) > 3  # retransmitted all along
            attacker.invite(dest, "half-open-4")  # still banned, while the caller talks
            res = await dial_tone(node.config.port, 700.0, 2.5)
            hears_own_tone(res, 700.0)
            await wait_until(lambda: node.stats()["calls_unacked"] == 3, what="worker stats")
            # Each stream left the bridge before its teardown (``telephony.stream_release``):
            # the three unACKed calls' before pjsip's BYE was over, the caller's at its BYE.
            await wait_until(lambda: node.stats()["streams_released"] == 4, what="streams out")
            stats = node.stats()
        finally:
            attacker.close()
    assert stats["front_dropped_banned"] >= 2
    assert not [r for r in attacker.got if r.call_id in ("half-open-3", "half-open-4")]


async def test_slots_held_by_ending_calls_get_503_never_486(
    make_node: Any, sipp: Any, helpers: Any, hears_own_tone: Any
) -> None:
    calls = Calls()
    calls.echo = True
    gone_ids = {f"gone-{i}" for i in range(3)}

    async def hang_up_on_the_gone(call: RemoteCall) -> None:
        if call.call_id in gone_ids:
            await asyncio.sleep(0.5)
            await call.hangup()

    calls.action = hang_up_on_the_gone
    # RFC 3261's T1 (500 ms): a BYE to a caller that has gone lasts 32 s.
    async with make_node(calls, max_calls=3, retry_after_s=23) as node:
        assert node.workers == 1
        dest = ("127.0.0.1", node.config.port)
        gone = RawUA("127.0.0.6", ack=True, answer_bye=False)  # ACKs, then is never heard
        try:
            for call_id in sorted(gone_ids):
                gone.invite(dest, call_id)
            await wait_until(lambda: len(calls.ended()) == 3, timeout_s=10, what="hung up")
            # The bot's end of each call is reported as the worker sends its BYE; the datagram
            # is read here a moment later.
            await wait_until(
                lambda: all(gone.requests("BYE", c) for c in gone_ids), timeout_s=5, what="BYEs"
            )
            ended = min(r.at for r in gone.requests("BYE"))
            # The worker's calls are over for its bot, but its pjsua holds their slots while
            # the BYEs are retransmitted: three new calls at once each get 503.
            res = await sipp(busy(helpers), node.config.port, calls=3, rate=100)
            assert res.ok, res.stdout + res.errors
            assert time.monotonic() - ended < 20  # well inside the BYEs' 32 s
            stats = node.stats()
            assert stats["front_slots_ending"] == 3 and stats["front_busy_rewritten"] == 0
            assert stats["rejected_busy"] == stats["front_rejected_busy"] == 3
            # The BYEs given up on, the worker takes calls again.
            await wait_until(
                lambda: node.stats()["front_slots_ending"] == 0, timeout_s=40, what="BYEs over"
            )
            assert time.monotonic() - ended > 25
            res = await dial_tone(node.config.port, 900.0, 2.5)
            hears_own_tone(res, 900.0)
        finally:
            gone.close()
