"""One count of a node's calls, SIP and browser (node/call_places.py): one call limit, one
drain. A real SipServer (its front and a worker process) called by the test dialer, and a
real aiortc peer calling its browser side, composed as ``switchboard run`` composes them.

Found by a security test: with ``SWITCHBOARD_SIP__MAX_CALLS=2``, one SIP and one browser
call up, a second browser offer was refused but a second SIP call answered (3 calls on a
limit of 2); and SIGTERM's drain waited for SIP calls only, cutting the browser calls.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription

from node.call_places import CallPlaces
from telephony import EndpointConfig, SipServer
from telephony.dialer import dial
from telephony.remote_call import RemoteCall
from telephony.webrtc import CallRefused, WebRtcCall, WebRtcCalls
from testkit.ports import free_udp_port
from tests.admin.test_webrtc_limits import offer_of
from tests.telephony.nodekit import Calls, wait_until

pytestmark = pytest.mark.sip


@dataclass
class _Node:
    """What ``Node`` holds of its calls: the SIP server, the browser calls, their places."""

    sip: SipServer
    browser: WebRtcCalls
    places: CallPlaces
    phone: Calls
    #: Set by the test: the node hangs up its phone calls.
    hang_up: asyncio.Event
    #: Set when a browser call is up (connected, in the node's pipeline).
    browser_up: asyncio.Event

    @property
    def uri(self) -> str:
        return f"sip:bot@127.0.0.1:{self.sip.config.port}"


@pytest.fixture
async def node() -> AsyncIterator[_Node]:
    hang_up, browser_up = asyncio.Event(), asyncio.Event()
    phone = Calls()

    async def until_hung_up(call: RemoteCall) -> None:
        await hang_up.wait()
        await call.hangup()

    phone.action = until_hung_up

    async def browser_call(call: WebRtcCall) -> None:
        browser_up.set()
        async for _ in call.receive():
            pass

    cfg = EndpointConfig(
        port=free_udp_port(),
        rtp_port_start=random.randrange(30000, 38000, 2),
        rtp_port_range=400,
        log_level=1,
        max_calls=2,
    )
    places = CallPlaces()
    sip = SipServer(cfg, phone)
    browser = WebRtcCalls(browser_call, sample_rate=16_000, take_place=places.take_browser)
    places.browser = browser
    await sip.start()
    places.sip = sip
    try:
        yield _Node(sip, browser, places, phone, hang_up, browser_up)
    finally:
        hang_up.set()
        await browser.close()
        await asyncio.wait_for(sip.stop(), 20)


async def _browser_call(node: _Node, pc: RTCPeerConnection, who: str = "webrtc:vic") -> None:
    """Offer a call from ``pc``, connect it; ``CallRefused`` when the node takes none."""
    sdp, kind = await node.browser.answer(await offer_of(pc), "offer", who, max_calls=4)
    await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type=kind))


async def test_sip_and_browser_calls_share_one_limit_and_one_drain(node: _Node) -> None:
    peers: list[RTCPeerConnection] = []
    first = asyncio.ensure_future(dial(node.uri, record_seconds=60))
    try:
        await wait_until(lambda: node.sip.active_calls == 1, 30, "the first SIP call up")
        peers.append(RTCPeerConnection())
        await _browser_call(node, peers[0])
        await asyncio.wait_for(node.browser_up.wait(), 30)
        assert node.places.live == (1, 1) and node.places.taken == 2 == node.places.limit

        # Two calls up on a limit of two: the SIP front refuses the next SIP call...
        second = await dial(node.uri, record_seconds=2)
        assert second.sip_final_status == 503, second.error
        assert node.sip.stats()["front_rejected_busy"] == 1
        # ... and the browser side the next offer.
        peers.append(RTCPeerConnection())
        with pytest.raises(CallRefused) as full:
            await _browser_call(node, peers[1], "webrtc:wes")
        assert full.value.node_full and "call limit (2 of 2" in str(full.value)

        # The drain waits for both: the SIP call ends, and it goes on waiting for the
        # browser call; new browser offers are refused meanwhile.
        draining = asyncio.ensure_future(node.places.drain(60, give_up=asyncio.Event()))
        node.hang_up.set()
        result = await first
        assert result.sip_final_status == 200 and result.ended_by_remote, result.error
        await wait_until(lambda: node.sip.active_calls == 0, 10, "the SIP call over")
        peers.append(RTCPeerConnection())
        with pytest.raises(CallRefused, match="draining"):
            await _browser_call(node, peers[2], "webrtc:wes")
        await asyncio.sleep(0.5)  # the SIP side's drain looks every 0.1 s
        assert not draining.done(), "the drain ended with a browser call up"
        assert node.places.live == (0, 1)
        await peers[0].close()  # the browser hangs up
        assert await asyncio.wait_for(draining, 30) is True
        assert node.places.live == (0, 0)
    finally:
        first.cancel()
        for pc in peers:
            await pc.close()
