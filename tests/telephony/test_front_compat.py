"""What a caller learns from the node's headers, and an RFC 2543 caller, over real SIP."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from telephony.remote_call import RemoteCall
from tests.support.corpus import rfc4475_dir
from tests.telephony.nodekit import Calls, wait_until
from tests.telephony.rawua import RawUA, header

pytestmark = pytest.mark.sip


def options(dest: tuple[str, int], ua: RawUA, call_id: str) -> bytes:
    return (
        f"OPTIONS sip:bot@{dest[0]}:{dest[1]} SIP/2.0\r\n"
        f"Via: SIP/2.0/UDP {ua.ip}:{ua.port};branch=z9hG4bK-{call_id};rport\r\n"
        f"From: <sip:raw@{ua.ip}>;tag=o1\r\nTo: <sip:bot@{dest[0]}>\r\nCall-ID: {call_id}\r\n"
        "CSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nAccept: application/sdp\r\n"
        "Content-Length: 0\r\n\r\n"
    ).encode()


def hang_up_soon(calls: Calls) -> None:
    async def action(call: RemoteCall) -> None:
        await asyncio.sleep(0.3)
        await call.hangup()

    calls.action = action


async def _one_of_each(node: Any, ua: RawUA, tag: str) -> None:
    """An OPTIONS, an INVITE answered (then the bot's BYE) and one the front refuses."""
    dest = ("127.0.0.1", node.config.port)
    ua.send(options(dest, ua, f"{tag}-options"), dest)
    ua.invite(dest, f"{tag}-call")
    await wait_until(lambda: bool(ua.requests("BYE", f"{tag}-call")), what="the bot's BYE")
    ua.invite(dest, f"{tag}-refused", "Accept: text/html\r\n")  # the front's own 406
    await wait_until(lambda: ua.finals(f"{tag}-refused") == [406], what="406")


async def test_no_product_name_unless_the_operator_sets_one(make_node: Any) -> None:
    calls = Calls()
    hang_up_soon(calls)
    async with make_node(calls, max_calls=3) as node:  # SWITCHBOARD_SIP__USER_AGENT unset
        assert node.config.user_agent == ""
        ua = RawUA("127.0.0.1")
        try:
            await _one_of_each(node, ua, "plain")
        finally:
            ua.close()
    assert ua.finals("plain-call") == [200]
    got = {r.first.split(" ")[0] if not r.first.startswith("SIP/") else r.first for r in ua.got}
    assert {"SIP/2.0 100 Trying", "SIP/2.0 200 OK", "BYE"} <= got, got
    for r in ua.got:  # the front's answers, the worker's answers and its BYE
        assert header(r.head, "server") is None and header(r.head, "user-agent") is None, r.head

    async with make_node(calls, max_calls=3, user_agent="Acme IVR") as node:
        ua = RawUA("127.0.0.1")
        try:
            await _one_of_each(node, ua, "named")
        finally:
            ua.close()
    (ok,) = [r for r in ua.got if r.call_id == "named-options"]
    assert ok.first == "SIP/2.0 200 OK" and header(ok.head, "server") == "Acme IVR"
    (refused,) = [r for r in ua.got if r.call_id == "named-refused"]
    assert header(refused.head, "server") == "Acme IVR"
    (bye,) = {r.head for r in ua.requests("BYE", "named-call")}
    assert header(bye, "user-agent") == "Acme IVR"


async def test_rfc2543_invite_is_a_call(make_node: Any) -> None:
    """RFC 4475 3.4.1 (INV2543): no Contact, no branch, no From tag, no Max-Forwards, no
    Content-Length. Its Record-Route (a made-up proxy) is left out, and its addresses are
    moved to loopback, so that the call's BYE comes back here."""
    calls = Calls()
    hang_up_soon(calls)
    data = (rfc4475_dir() / "TC_INV2543_I.dat").read_bytes().replace(b"192.0.2.", b"127.0.0.")
    data = re.sub(rb"Record-Route: [^\r\n]*\r\n", b"", data)
    assert b"Contact" not in data and b"branch" not in data
    async with make_node(calls, max_calls=3) as node:
        ua = RawUA("127.0.0.1")
        try:
            ua.send(data, ("127.0.0.1", node.config.port))
            await wait_until(lambda: len(calls.ended()) == 1, timeout_s=10, what="call ended")
            call_id = "inv2543.1717@ift.client.example.com"
            await wait_until(lambda: bool(ua.requests("BYE", call_id)), what="BYE")
        finally:
            ua.close()
    assert ua.finals(call_id) == [200] and calls.calls[0].codec == "PCMU/8000"
    (bye,) = {r.head for r in ua.requests("BYE", call_id)}
    # The BYE went where the INVITE came from, to the From's user: the Contact the front gave.
    assert bye.startswith(f"BYE sip:+13035551111@127.0.0.1:{ua.port} SIP/2.0")
    (ended,) = calls.ended()
    assert ended.reason.startswith("200")  # the caller answered the BYE
