"""Browser test calls are bounded: per user, per node, by the node's own call limit, and in
time: an offer never connected is dropped.

Found by a security test: one viewer held 30 browser calls open at once for about 65 s (the
node's SIP limit is 20), each logged and recorded; and an offer never followed by a
connection kept its place for good (two viewers, four offers: every other offer got 503).
Here real aiortc peers offer and connect over loopback to the app's real aiortc answerer;
the calls behind it are only drained.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import AudioStreamTrack
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.settings import AdminSettings
from telephony.webrtc import CallRefused, WebRtcCall, WebRtcCalls
from tests.admin.conftest import add_token, bearer
from tests.admin.fake_node import FakeNode

OFFER = "/api/v1/webrtc/offer"


class BrowserNode:
    """A node's browser calls, and its phone calls as the node would count them: ``limit``
    places in all, phone and browser alike."""

    def __init__(self, limit: int = 6) -> None:
        self.limit = limit
        self.phone_calls = 0
        self.held = 0  # places browser calls hold
        #: Calls that reached the node's pipeline (connected), by call id.
        self.started: list[str] = []
        self.connected = asyncio.Event()  # set by the first
        self.calls = WebRtcCalls(self._run, sample_rate=16_000, take_place=self.take_place)

    async def _run(self, call: WebRtcCall) -> None:
        self.started.append(call.call_id)
        self.connected.set()
        async for _ in call.receive():
            pass

    def take_place(self) -> Callable[[], None]:
        if self.phone_calls + self.held >= self.limit:
            raise CallRefused("the node is at its call limit", node_full=True)
        self.held += 1

        def give_back() -> None:
            self.held -= 1

        return give_back


@pytest.fixture(params=["sqlite"])
def admin_db_url(tmp_path: object) -> str:
    """The limits are the node's, not the database's: SQLite only."""
    return f"sqlite+aiosqlite:///{tmp_path}/webrtc.db"


@pytest.fixture
def node() -> BrowserNode:
    return BrowserNode()


@contextlib.asynccontextmanager
async def api_of(
    engine: AsyncEngine, node: BrowserNode, settings: AdminSettings
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the admin API over ASGI, its node's browser calls those of ``node``."""
    app = create_app(engine, settings, node=FakeNode(webrtc=node.calls))
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as c:
            yield c
    finally:
        await node.calls.close()


@pytest.fixture
async def api(admin_engine: AsyncEngine, node: BrowserNode) -> AsyncIterator[httpx.AsyncClient]:
    settings = AdminSettings(webrtc_max_calls_per_user=2, webrtc_max_calls=3)
    async with api_of(admin_engine, node, settings) as c:
        yield c


async def offer_of(pc: RTCPeerConnection) -> str:
    """``pc``'s offer of one audio track, its candidates gathered (as the console sends it)."""
    pc.addTrack(AudioStreamTrack())
    await pc.setLocalDescription(await pc.createOffer())
    sdp: str = pc.localDescription.sdp
    return sdp


async def _call(
    api: httpx.AsyncClient,
    token: str,
    peers: list[RTCPeerConnection],
    edit: Callable[[str], str] = lambda sdp: sdp,
    *,
    connect: bool = True,
) -> int:
    """Offer a call as ``token``'s user (``edit`` changes the offer first); on 200 the peer
    is kept in ``peers``, and takes the answer when ``connect``: it never connects else."""
    pc = RTCPeerConnection()
    sdp = edit(await offer_of(pc))
    r = await api.post(OFFER, json={"sdp": sdp, "type": "offer"}, headers=bearer(token))
    if r.status_code == 200:
        if connect:
            await pc.setRemoteDescription(RTCSessionDescription(**r.json()))
        peers.append(pc)
    else:
        await pc.close()
        if r.status_code in (429, 503):
            assert r.headers["retry-after"] == "10"
    return r.status_code


def trickled(sdp: str) -> str:
    """The offer as a trickling browser sends it before its candidates: none in it, and no
    end of them. Unanswered, such an offer never connects and never fails either."""
    return "".join(
        line
        for line in sdp.splitlines(keepends=True)
        if not line.startswith(("a=candidate:", "a=end-of-candidates"))
    )


async def test_browser_calls_are_bounded(
    api: httpx.AsyncClient, admin_engine: AsyncEngine, node: BrowserNode
) -> None:
    calls = node.calls
    vic = await add_token(admin_engine, "vic", "viewer")
    wes = await add_token(admin_engine, "wes", "viewer")
    xena = await add_token(admin_engine, "xena", "viewer")
    peers: list[RTCPeerConnection] = []
    try:
        # Two each at most.
        assert [await _call(api, vic, peers) for _ in range(3)] == [200, 200, 429]
        # Three on the node at most.
        assert await _call(api, wes, peers) == 200
        assert await _call(api, xena, peers) == 503
        assert calls.in_progress == 3

        # A call that ends frees its place.
        await peers.pop(0).close()
        for _ in range(100):
            if calls.in_progress == 2:
                break
            await asyncio.sleep(0.1)
        assert calls.in_progress == 2
        assert await _call(api, xena, peers) == 200

        # Phone calls count: at the node's limit, no browser call, whoever asks.
        await peers.pop(0).close()
        for _ in range(100):
            if calls.in_progress == 2:
                break
            await asyncio.sleep(0.1)
        node.phone_calls = 4
        assert await _call(api, vic, peers) == 503
        node.phone_calls = 3
        assert await _call(api, vic, peers) == 200
    finally:
        node.phone_calls = 0
        for pc in peers:
            await pc.close()


async def test_an_offer_never_connected_is_dropped_and_its_place_freed(
    admin_engine: AsyncEngine, node: BrowserNode
) -> None:
    """Two viewers, four offers never followed by a connection: the node's browser places
    are full (503 for a third viewer) until the offers' connect time is over; then their
    places are free again, and none of them was ever a call of the node."""
    # Long enough for five offers to be answered on a loaded machine (a few hundred ms
    # each), which the check of a full node needs: it waits for no clock but this one.
    connect_s = 5.0
    settings = AdminSettings(
        webrtc_max_calls_per_user=2, webrtc_max_calls=4, webrtc_connect_timeout_s=connect_s
    )
    calls = node.calls
    peers: list[RTCPeerConnection] = []
    async with api_of(admin_engine, node, settings) as api:
        vic = await add_token(admin_engine, "vic", "viewer")
        wes = await add_token(admin_engine, "wes", "viewer")
        xena = await add_token(admin_engine, "xena", "viewer")
        try:
            started = time.monotonic()
            answers = [
                await _call(api, who, peers, trickled, connect=False)
                for who in (vic, vic, wes, wes)
            ]
            answers.append(await _call(api, xena, peers))
            held = (calls.in_progress, node.held)
            took = time.monotonic() - started
            assert took < connect_s, f"five offers took {took:.1f} s, past their connect time"
            assert answers == [200, 200, 200, 200, 503] and held == (4, 4)
            await asyncio.wait_for(calls.wait_idle(), 30)
            assert calls.in_progress == 0 and node.held == 0
            assert calls.dropped_unconnected == 4 and node.started == []
            # The places are free again.
            assert await _call(api, xena, peers, trickled, connect=False) == 200
            assert calls.in_progress == 1 and node.held == 1
        finally:
            for pc in peers:
                await pc.close()
