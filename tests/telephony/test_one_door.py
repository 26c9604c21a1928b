"""One door into a node: every request of a call passes the front, and nothing else does.

The front record-routes every call (its relay socket towards the worker, its own address
towards the caller), so the caller's ACK, BYE, keepalives and keys, and the worker's BYE,
all pass the front, where bans, peers and limits live. A worker answers a new INVITE only
with the front's stamp, and drops every other request outside its dialogs: an INVITE sent
straight to a worker's port from a banned source or a stranger is refused, and an
out-of-dialog SUBSCRIBE makes it send nothing anywhere.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from telephony.events import DtmfIn
from telephony.floodguard import FrontLimits
from telephony.peers import Peer
from tests.telephony.nodekit import Calls, wait_until
from tests.telephony.rawua import RawUA, header, route_set

pytestmark = pytest.mark.sip


def worker_port(node: Any) -> int:
    addr = node._slots[0].addr
    assert addr is not None
    return int(addr[1])


def out_of_dialog(
    method: str, ua: RawUA, dest: tuple[str, int], call_id: str, contact: str
) -> bytes:
    extra = "Event: presence\r\nExpires: 60\r\n" if method == "SUBSCRIBE" else ""
    body = "hello" if method == "MESSAGE" else ""
    ctype = "Content-Type: text/plain\r\n" if body else ""
    return (
        f"{method} sip:bot@{dest[0]}:{dest[1]} SIP/2.0\r\n"
        f"Via: SIP/2.0/UDP {ua.ip}:{ua.port};branch=z9hG4bK-{call_id};rport\r\n"
        f"From: <sip:raw@{ua.ip}>;tag=f-{call_id}\r\nTo: <sip:bot@{dest[0]}>\r\n"
        f"Call-ID: {call_id}\r\nCSeq: 1 {method}\r\nMax-Forwards: 70\r\n"
        f"Contact: <{contact}>\r\n{extra}{ctype}Content-Length: {len(body)}\r\n\r\n{body}"
    ).encode()


async def test_an_invite_straight_to_a_worker_is_refused_from_strangers_and_banned_sources(
    make_node: Any,
) -> None:
    calls = Calls()
    # Only 127.0.0.1 may call; one failed authentication bans a source.
    peers = (Peer.model_validate({"name": "pbx", "networks": ["127.0.0.1/32"]}),)
    limits = FrontLimits(ban_after_auth_failures=1)
    async with make_node(calls, max_calls=2, peers=peers, limits=limits) as node:
        front = ("127.0.0.1", node.config.port)
        worker = ("127.0.0.1", worker_port(node))
        stranger = RawUA("127.0.0.7")
        banned = RawUA("127.0.0.8")
        try:
            # The stranger, at the front: 403 (not a peer), and that bans it.
            banned.invite(front, "door-ban")
            await wait_until(lambda: banned.finals("door-ban") == [403], what="403 at the front")
            assert node.stats()["front_bans"] == 1
            # Now both go straight to the worker's own port.
            banned.invite(worker, "door-banned-direct")
            stranger.invite(worker, "door-stranger-direct")
            await wait_until(
                lambda: (
                    bool(stranger.finals("door-stranger-direct"))
                    and bool(banned.finals("door-banned-direct"))
                ),
                what="final answers from the worker",
            )
            assert stranger.finals("door-stranger-direct") == [403]
            assert banned.finals("door-banned-direct") == [403]
            await asyncio.sleep(0.3)
            assert node.active_calls == 0 and not calls.calls
            await wait_until(
                lambda: node.stats()["rejected_unstamped"] == 2, what="the worker's count"
            )
        finally:
            stranger.close()
            banned.close()


@pytest.mark.parametrize("method", ["SUBSCRIBE", "MESSAGE", "NOTIFY", "OPTIONS", "PUBLISH"])
async def test_a_worker_takes_no_out_of_dialog_request(make_node: Any, method: str) -> None:
    """Nothing comes back to the sender, and nothing goes to the address its Contact names."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.setblocking(False)
    target = f"sip:victim@127.0.0.1:{listener.getsockname()[1]}"
    async with make_node(Calls(), max_calls=1) as node:
        worker = ("127.0.0.1", worker_port(node))
        ua = RawUA("127.0.0.9")
        try:
            ua.send(out_of_dialog(method, ua, worker, f"reflect-{method}", target), worker)
            await wait_until(
                lambda: node.stats()["strangers_dropped"] >= 1, what="the worker's drop"
            )
            await asyncio.sleep(2.0)  # pjsua's first NOTIFY came at once, then for 32 s
            assert not [r for r in ua.got if r.call_id == f"reflect-{method}"]
            with pytest.raises(BlockingIOError):
                listener.recvfrom(65535)
        finally:
            ua.close()
            listener.close()


async def test_a_call_passes_the_front_both_ways_and_keeps_alive_on_options_and_info(
    make_node: Any,
) -> None:
    calls = Calls()
    ended_by_node = asyncio.Event()

    async with make_node(calls, max_calls=1) as node:
        front = ("127.0.0.1", node.config.port)
        ua = RawUA("127.0.0.1")
        try:
            ua.invite(front, "door-call")
            await wait_until(lambda: ua.finals("door-call") == [200], what="200 OK")
            ok = ua.answer_of("door-call")
            assert ok is not None
            # The 200 names the front on the route, the stack nowhere.
            assert f"<sip:127.0.0.1:{node.config.port};lr>" in route_set(ok.head)
            assert "switchboard" not in ok.head.lower() and "pjsip" not in ok.head.lower()
            assert "s=pjmedia" not in ok.body and "X-nat" not in ok.body
            assert "s=-" in ok.body
            await wait_until(lambda: node.active_calls == 1, what="call up")
            # The ACK went to the front (the caller follows the route set).
            await wait_until(lambda: len(calls.calls) == 1, what="the bot has the call")

            # A PBX's keepalive: in-dialog OPTIONS, 200, and the call goes on.
            assert ua.in_dialog("door-call", "OPTIONS", 2) == front
            await wait_until(lambda: ua.responses("door-call", "OPTIONS") == [200], what="200")
            # DTMF by INFO, both kinds: the keys reach the call as RFC 4733 ones do.
            ua.in_dialog(
                "door-call",
                "INFO",
                3,
                content_type="application/dtmf-relay",
                body="Signal=5\r\nDuration=160\r\n",
            )
            ua.in_dialog("door-call", "INFO", 4, content_type="application/dtmf", body="#")
            # Another INFO: 415, never 500, and the call still goes on.
            ua.in_dialog("door-call", "INFO", 5, content_type="application/x-custom", body="x")
            await wait_until(
                lambda: sorted(ua.responses("door-call", "INFO")) == [200, 200, 415],
                what="INFO answers",
            )
            await wait_until(
                lambda: (
                    [e.digit for e in calls.events.get("door-call", []) if isinstance(e, DtmfIn)]
                    == ["5", "#"]
                ),
                what="keys heard",
            )
            await asyncio.sleep(0.5)
            assert node.active_calls == 1 and not calls.ended()

            # The node hangs up: its BYE comes from the front, and the caller's 200 to it
            # goes back through the front to the worker, which lets the slot go at once.
            await calls.calls[0].hangup()
            ended_by_node.set()
            await wait_until(lambda: bool(ua.requests("BYE", "door-call")), what="BYE")
            bye = ua.requests("BYE", "door-call")[0]
            assert bye.src == front
            assert not (header(bye.head, "route") or "")
            await wait_until(
                lambda: node.stats()["front_responses_relayed"] >= 1, what="200 relayed"
            )
            await wait_until(
                lambda: node.stats()["front_slots_ending"] == 0, timeout_s=3.0, what="slot free"
            )
        finally:
            ua.close()


async def test_one_source_holds_at_most_its_share_of_unconfirmed_calls(make_node: Any) -> None:
    """A source that never ACKs gets 503 + Retry-After beyond its unconfirmed calls, while
    another source is still answered."""
    limits = FrontLimits(max_unconfirmed_per_source=2)
    async with make_node(Calls(), max_calls=3, limits=limits, retry_after_s=7) as node:
        front = ("127.0.0.1", node.config.port)
        hog = RawUA("127.0.0.11", ack=False, answer_bye=False)
        caller = RawUA("127.0.0.12")
        try:
            for i in range(3):
                hog.invite(front, f"hog-{i}")
            await wait_until(
                lambda: all(hog.finals(f"hog-{i}") for i in range(3)), what="three finals"
            )
            assert sorted(hog.finals(f"hog-{i}")[0] for i in range(3)) == [200, 200, 503]
            refused = next(r for r in hog.got if r.first.startswith("SIP/2.0 503"))
            assert header(refused.head, "retry-after") == "7"
            caller.invite(front, "fair-caller")
            await wait_until(lambda: caller.finals("fair-caller") == [200], what="answered")
            assert node.stats()["front_unconfirmed_refused"] == 1
        finally:
            hog.close()
            caller.close()
