"""Who may call: CallerGate on its own, then a node with peers, called by sipp and pjsua."""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from typing import Any

import pytest

from telephony.peers import CallerGate, Peer, digest_response
from telephony.sipmsg import scan
from tests.telephony.nodekit import Calls, dial_tone

REALM = "switchboard"


def invite(user: str = "bot", auth: str = "", call_id: str = "c1", cseq: int = 1) -> bytes:
    head = (
        f"INVITE sip:{user}@127.0.0.1 SIP/2.0\r\n"
        "Via: SIP/2.0/UDP 127.0.0.9:5070;branch=z9hG4bK-p\r\n"
        "From: <sip:a@127.0.0.9>;tag=f1\r\nTo: <sip:bot@127.0.0.1>\r\n"
        f"Call-ID: {call_id}\r\nCSeq: {cseq} INVITE\r\n"
    )
    if auth:
        head += f"Authorization: {auth}\r\n"
    return (head + "Content-Length: 0\r\n\r\n").encode()


def authorization(challenge: str, user: str, password: str, uri: str = "sip:bot@127.0.0.1") -> str:
    nonce = re.search(r'nonce="([^"]+)"', challenge)
    assert nonce is not None
    response = digest_response(
        user, REALM, password, method="INVITE", uri=uri, nonce=nonce.group(1),
        qop="auth", nc="00000001", cnonce="abc",
    )  # fmt: skip
    return (
        f'Digest username="{user}", realm="{REALM}", nonce="{nonce.group(1)}", uri="{uri}", '
        f'response="{response}", algorithm=MD5, qop=auth, nc=00000001, cnonce="abc"'
    )


def test_no_peers_means_anyone() -> None:
    gate = CallerGate((), REALM)
    assert gate.open and gate.check(scan(invite()), "198.51.100.7", 0.0).answer is None


def test_network_peers_let_their_sources_on_and_nobody_else() -> None:
    trunk = Peer(name="trunk", networks=(ipaddress.ip_network("10.1.0.0/16"),))
    gate = CallerGate((trunk,), REALM)
    ok = gate.check(scan(invite()), "10.1.2.3", 0.0)
    assert ok.answer is None and ok.peer == "trunk"
    # A stranger: the same 403 whatever number it dials, counted as a failure.
    answers = {gate.check(scan(invite(user)), "10.2.0.1", 0.0) for user in ("bot", "100", "x")}
    (answer,) = answers
    assert answer.answer is not None and answer.answer.code == 403 and answer.failed


def test_digest_credentials_challenge_then_admit() -> None:
    pbx = Peer(name="pbx", username="pbx1", password="s3cret")  # type: ignore[arg-type]
    gate = CallerGate((pbx,), REALM)
    first = gate.check(scan(invite()), "192.0.2.10", 100.0)
    assert first.answer is not None and first.answer.code == 401 and not first.failed
    challenge = dict(first.answer.headers)["WWW-Authenticate"]
    assert 'realm="switchboard"' in challenge and 'qop="auth"' in challenge
    good = authorization(challenge, "pbx1", "s3cret")
    verdict = gate.check(scan(invite(auth=good, cseq=2)), "192.0.2.10", 101.0)
    assert verdict.answer is None and verdict.peer == "pbx"
    # Wrong password and unknown user: the same 403, each a failure.
    for user, password in (("pbx1", "guess"), ("admin", "s3cret")):
        bad = gate.check(
            scan(invite(auth=authorization(challenge, user, password))), "192.0.2.10", 101.0
        )
        assert bad.answer is not None and bad.answer.code == 403 and bad.failed
    # The nonce was given to another address, or is too old: a fresh challenge.
    elsewhere = gate.check(scan(invite(auth=good)), "192.0.2.11", 101.0)
    assert elsewhere.answer is not None and elsewhere.answer.code == 401
    stale = gate.check(scan(invite(auth=good)), "192.0.2.10", 100.0 + 301)
    assert stale.answer is not None and stale.answer.code == 401
    # Another scheme, or a forged response: 403.
    other = gate.check(scan(invite(auth="Basic cGJ4MTpzM2NyZXQ=")), "192.0.2.10", 101.0)
    assert other.answer is not None and other.answer.code == 403


def test_a_peer_with_networks_and_credentials_needs_both() -> None:
    pbx = Peer(
        name="pbx",
        networks=(ipaddress.ip_network("10.9.0.0/24"),),
        username="pbx1",
        password="s3cret",  # type: ignore[arg-type]
    )
    gate = CallerGate((pbx,), REALM)
    outside = gate.check(scan(invite()), "10.8.0.1", 0.0)
    assert outside.answer is not None and outside.answer.code == 403  # not even challenged
    inside = gate.check(scan(invite()), "10.9.0.5", 0.0)
    assert inside.answer is not None and inside.answer.code == 401
    challenge = dict(inside.answer.headers)["WWW-Authenticate"]
    auth = authorization(challenge, "pbx1", "s3cret")
    assert gate.check(scan(invite(auth=auth)), "10.9.0.5", 1.0).answer is None


def test_peer_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="networks, credentials, or both"):
        Peer(name="nothing")
    with pytest.raises(ValueError, match="both username and password"):
        Peer(name="half", username="u")


# ------------------------------------------------------------------------------ on the wire


def _raw_invite(port: int, source: str, user: str) -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((source, 0))
        me = s.getsockname()[1]
        msg = (
            f"INVITE sip:{user}@127.0.0.1:{port} SIP/2.0\r\n"
            f"Via: SIP/2.0/UDP {source}:{me};branch=z9hG4bK-{user}\r\n"
            f"From: <sip:scan@{source}>;tag=s1\r\nTo: <sip:{user}@127.0.0.1>\r\n"
            f"Call-ID: scan-{user}@{source}\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\n"
            f"Contact: <sip:scan@{source}:{me}>\r\nContent-Length: 0\r\n\r\n"
        )
        s.settimeout(3.0)
        s.sendto(msg.encode(), ("127.0.0.1", port))
        return s.recv(65535).decode(errors="replace")


def _shape(reply: str) -> list[str]:
    """A reply without what differs by request (tags, Call-ID, Via, From, To)."""
    keep = []
    for line in reply.split("\r\n"):
        name = line.split(":", 1)[0].lower()
        if name not in {"via", "from", "to", "call-id", "cseq"}:
            keep.append(line)
    return keep


AUTH_INVITE = """  <send retrans="500"><![CDATA[
INVITE sip:bot@[remote_ip]:[remote_port] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>
Call-ID: [call_id]
CSeq: {cseq} INVITE
Contact: sip:sipp@[local_ip]:[local_port]
Max-Forwards: 70
{auth}Content-Type: application/sdp
Content-Length: [len]

{sdp}
]]></send>
"""


def _auth_scenario(h: Any, expect_after_auth: str) -> str:
    sdp = h.sdp()
    steps = [
        AUTH_INVITE.format(cseq=1, auth="", sdp=sdp),
        '  <recv response="100" optional="true"/>\n  <recv response="401" auth="true"/>\n',
        h.ack(non2xx=True),
        AUTH_INVITE.format(cseq=2, auth="[authentication]\n", sdp=sdp),
        '  <recv response="100" optional="true"/>\n',
    ]
    if expect_after_auth == "200":
        steps += [
            '  <recv response="200" rtd="true"/>\n',
            h.ack(cseq=2),
            h.pause(500),
            h.bye().replace("CSeq: 2 BYE", "CSeq: 3 BYE"),
        ]
    else:
        steps += [f'  <recv response="{expect_after_auth}"/>\n', h.ack(cseq=2, non2xx=True)]
    return h.scenario(*steps)


@pytest.mark.sip
async def test_node_with_peers_admits_them_and_tells_strangers_nothing(
    make_node: Any, sipp: Any, helpers: Any, hears_own_tone: Any
) -> None:
    calls = Calls()
    calls.echo = True
    peers = (
        Peer(name="trunk", networks=(ipaddress.ip_network("127.0.0.1/32"),)),
        Peer(name="pbx", username="pbx1", password="s3cret"),  # type: ignore[arg-type]
    )
    async with make_node(calls, max_calls=3, peers=peers) as node:
        port = node.config.port
        # The trunk, by its address: a pjsua caller, answered and heard.
        res = await dial_tone(port, 600.0, 2.5)
        hears_own_tone(res, 600.0)
        # The PBX from another address, by digest (sipp's own digest client).
        ok = await sipp(
            _auth_scenario(helpers, "200"),
            port,
            extra=("-i", "127.0.0.2", "-au", "pbx1", "-ap", "s3cret"),
        )
        assert ok.ok, ok.stdout + ok.errors
        # The right user with a wrong password: 403 after the challenge.
        bad = await sipp(
            _auth_scenario(helpers, "403"),
            port,
            extra=("-i", "127.0.0.4", "-au", "pbx1", "-ap", "nope"),
        )
        assert bad.ok, bad.stdout + bad.errors
        # A stranger without credentials is challenged, whatever number it dials, with the
        # same answer (wrong credentials get one 403 for every user: the unit tests above).
        replies = [
            await asyncio.to_thread(_raw_invite, port, "127.0.0.5", user)
            for user in ("bot", "1000", "admin")
        ]
        assert all(r.startswith("SIP/2.0 401 Unauthorized\r\n") for r in replies), replies
        shapes = [
            [ln for ln in _shape(r) if not ln.startswith("WWW-Authenticate")] for r in replies
        ]
        assert shapes[0] == shapes[1] == shapes[2]
        stats = node.stats()
        assert stats["calls_total"] == 2 and len(calls.calls) == 2
        assert stats["front_rejected_forbidden"] == 1 and stats["front_auth_failures"] == 1


@pytest.mark.sip
async def test_network_only_peers_give_strangers_one_403(make_node: Any) -> None:
    peers = (Peer(name="trunk", networks=(ipaddress.ip_network("127.0.0.1/32"),)),)
    async with make_node(Calls(), max_calls=3, peers=peers) as node:
        replies = [
            await asyncio.to_thread(_raw_invite, node.config.port, "127.0.0.6", user)
            for user in ("bot", "1000", "admin", "+15551234567")
        ]
        assert all(r.startswith("SIP/2.0 403 Forbidden\r\n") for r in replies), replies
        assert len({tuple(_shape(r)) for r in replies}) == 1
        stats = node.stats()
        assert stats["front_rejected_forbidden"] == 4 and stats["front_relayed_to_workers"] == 0
