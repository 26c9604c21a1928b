"""Browser test calls are bounded: per user, per node, and by the node's own call limit.

Found by a security test: one viewer held 30 browser calls open at once for about 65 s (the
node's SIP limit is 20), each logged and recorded. Here real aiortc peers offer and connect
over loopback to the app's real aiortc answerer; the calls behind it are only drained.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import AudioStreamTrack
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.settings import AdminSettings
from telephony.webrtc import WebRtcCall, WebRtcCalls
from tests.admin.conftest import add_token, bearer
from tests.admin.fake_node import FakeNode

OFFER = "/api/v1/webrtc/offer"


async def _drain(call: WebRtcCall) -> None:
    async for _ in call.receive():
        pass


@pytest.fixture(params=["sqlite"])
def admin_db_url(tmp_path: object) -> str:
    """The limits are the node's, not the database's: SQLite only."""
    return f"sqlite+aiosqlite:///{tmp_path}/webrtc.db"


class _Node:
    """A node's browser calls, and its phone calls as the node would report them."""

    def __init__(self) -> None:
        self.phone_calls = 0
        self.calls = WebRtcCalls(_drain, sample_rate=16_000, call_limit=self.call_limit)

    def call_limit(self) -> tuple[int, int]:
        """Calls in progress (phone and browser) and the node's limit."""
        return self.phone_calls + self.calls.in_progress, 6


@pytest.fixture
def node() -> _Node:
    return _Node()


@pytest.fixture
async def api(admin_engine: AsyncEngine, node: _Node) -> AsyncIterator[httpx.AsyncClient]:
    settings = AdminSettings(webrtc_max_calls_per_user=2, webrtc_max_calls=3)
    app = create_app(admin_engine, settings, node=FakeNode(webrtc=node.calls))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as c:
        yield c
    await node.calls.close()


async def _call(api: httpx.AsyncClient, token: str, peers: list[RTCPeerConnection]) -> int:
    pc = RTCPeerConnection()
    pc.addTrack(AudioStreamTrack())
    await pc.setLocalDescription(await pc.createOffer())
    r = await api.post(
        OFFER, json={"sdp": pc.localDescription.sdp, "type": "offer"}, headers=bearer(token)
    )
    if r.status_code == 200:
        await pc.setRemoteDescription(RTCSessionDescription(**r.json()))
        peers.append(pc)
    else:
        await pc.close()
        assert r.headers["retry-after"] == "10"
    return r.status_code


async def test_browser_calls_are_bounded(
    api: httpx.AsyncClient, admin_engine: AsyncEngine, node: _Node
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
