"""``POST /api/v1/webrtc/offer`` and malformed SDP: a 422 whose reason names the line and
what is wrong, never a 500.

Found by a security test: an ``m=audio`` port that was not a number, a video-only offer and
~600 extra ``m=`` lines each ended in an ``AssertionError`` inside aiortc's SDP parser (500),
other bad SDP in a 422 of no use ("sdp: None is not in list"), and offers without a DTLS
fingerprint or with bare LF line ends were answered and could never connect. Here the offers
reach the app's real aiortc answerer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription
from hypothesis import HealthCheck, given, settings
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.settings import AdminSettings
from tests.admin.conftest import add_token, bearer
from tests.admin.test_webrtc_limits import OFFER, BrowserNode, api_of, offer_of
from tests.telephony.test_webrtc_sdp import CHROME, FIREFOX, REFUSED, mutated


@pytest.fixture(params=["sqlite"])
def admin_db_url(tmp_path: object) -> str:
    """The answers are the node's, not the database's: SQLite only."""
    return f"sqlite+aiosqlite:///{tmp_path}/webrtc.db"


@pytest.fixture
def node() -> BrowserNode:
    """Places for more offers than a test makes: no answer here is a 503."""
    return BrowserNode(limit=1000)


@pytest.fixture
async def api(admin_engine: AsyncEngine, node: BrowserNode) -> AsyncIterator[httpx.AsyncClient]:
    """Room for every offer a test makes (fewer than 100), each dropped a moment after
    if it does not connect."""
    limits = AdminSettings(
        webrtc_max_calls_per_user=100, webrtc_max_calls=1000, webrtc_connect_timeout_s=0.2
    )
    async with api_of(admin_engine, node, limits) as c:
        yield c


@pytest.fixture
async def token(admin_engine: AsyncEngine) -> str:
    return await add_token(admin_engine, "vic", "viewer")


def _replace(sdp: str, old: str, new: str) -> str:
    assert old in sdp, old
    return sdp.replace(old, new)


async def test_malformed_and_unconnectable_offers_get_422_with_the_reason(
    api: httpx.AsyncClient, token: str, node: BrowserNode
) -> None:
    pc = RTCPeerConnection()
    real = await offer_of(pc)  # aiortc's own, as a WebRTC client sends it
    await pc.close()
    fingerprints = [line for line in real.split("\r\n") if line.startswith("a=fingerprint:")]
    first_m = real.split("\r\n").index(next(x for x in real.split("\r\n") if x.startswith("m=")))
    cases = {
        "the port not a number": (
            _replace(real, "m=audio ", "m=audio x"),
            f"line {first_m + 1} (m=audio): the port is not a number",
        ),
        "video only": (
            _replace(real, "m=audio ", "m=video "),
            "m=video, and no m=audio line",
        ),
        "600 extra m= lines": (
            real + "m=audio 9 RTP/AVP 0\r\n" * 600,
            "lines, more than 300",
        ),
        "no fingerprint": (
            "".join(x + "\r\n" for x in real.split("\r\n")[:-1] if x not in fingerprints),
            "no a=fingerprint of sha-256, sha-384 or sha-512",
        ),
        "no audio m-line": (real.split("m=audio", maxsplit=1)[0], "no m=audio line"),
        "no ICE password": (
            "".join(x + "\r\n" for x in real.split("\r\n")[:-1] if not x.startswith("a=ice-pwd:")),
            "no a=ice-pwd",
        ),
        **{name: case for name, case in REFUSED.items() if len(case[0]) <= 20_000},
    }
    for name, (sdp, reason) in cases.items():
        r = await api.post(OFFER, json={"sdp": sdp, "type": "offer"}, headers=bearer(token))
        assert r.status_code == 422, (name, r.status_code, r.text)
        (item,) = r.json()["detail"]
        assert item["loc"] == ["body", "sdp"], (name, item)
        assert item["msg"].startswith("SDP offer refused: "), (name, item)
        assert reason in item["msg"], (name, item)
    assert node.calls.in_progress == 0 and node.held == 0  # none took a place


async def test_an_offer_with_bare_lf_line_ends_connects(
    token: str, node: BrowserNode, admin_engine: AsyncEngine
) -> None:
    """A bare LF ends a line (RFC 8866 section 5): the offer is answered and the call is up."""
    limits = AdminSettings(webrtc_connect_timeout_s=30)
    async with api_of(admin_engine, node, limits) as patient:
        pc = RTCPeerConnection()
        try:
            sdp = (await offer_of(pc)).replace("\r\n", "\n")
            r = await patient.post(OFFER, json={"sdp": sdp, "type": "offer"}, headers=bearer(token))
            assert r.status_code == 200, r.text
            await pc.setRemoteDescription(RTCSessionDescription(**r.json()))
            await asyncio.wait_for(node.connected.wait(), 30)
            assert len(node.started) == 1
        finally:
            await pc.close()


#: Offers the fuzzing starts from: the browsers', without Chrome's mDNS candidate (whose
#: name the answerer would ask the network for).
BASES = (
    "".join(line + "\r\n" for line in CHROME.split("\r\n")[:-1] if ".local " not in line),
    FIREFOX,
)


@settings(
    max_examples=90,  # every offer answered could be pending at once: under the user's 100
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(sdp=mutated(BASES))
async def test_no_offer_gets_a_server_error(api: httpx.AsyncClient, token: str, sdp: str) -> None:
    r = await api.post(OFFER, json={"sdp": sdp, "type": "offer"}, headers=bearer(token))
    # 422: the check's reason, or the body's own bounds (an empty or too long offer).
    assert r.status_code in (200, 422), (r.status_code, r.text)
