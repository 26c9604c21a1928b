"""The SIP front of a SipServer: parsing, stateless responses, and routing between UDP sockets.

The routing tests stand plain UDP sockets in for the workers: what the front forwards and
relays is checked datagram by datagram.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import pytest

from telephony.sip_dispatch import (
    SILENT_INVITE_S,
    SipFront,
    WorkerSlot,
    invite_status,
    scan,
    stateless_response,
    top_via_parm,
    with_rport,
)
from tests.support.corpus import rfc4475_dir

CLIENT = ("127.0.0.1", 5070)


def request(method: str = "INVITE", call_id: str = "c1", cseq: int = 1, via: str = "") -> bytes:
    via = via or "SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK-1"
    return (
        f"{method} sip:bot@127.0.0.1 SIP/2.0\r\n"
        f"Via: {via}\r\n"
        "From: <sip:a@127.0.0.1>;tag=f1\r\n"
        "To: <sip:bot@127.0.0.1>\r\n"
        f"Call-ID: {call_id}\r\n"
        f"CSeq: {cseq} {method}\r\n"
        "Content-Length: 4\r\n\r\nbody"
    ).encode()


def corpus() -> dict[str, bytes]:
    corpus_dir = rfc4475_dir()
    return {p.stem: p.read_bytes() for p in sorted(corpus_dir.glob("TC_*.dat"))}


def test_scan_never_raises_on_the_torture_corpus_cut_anywhere() -> None:
    for name, data in corpus().items():
        for cut in range(0, len(data) + 1, 3):
            scan(data[:cut])
        msg = scan(data)
        assert msg.is_response == data.startswith(b"SIP/"), name
    wsinv = scan(corpus()["TC_WSINV"])
    assert wsinv.method == "INVITE" and wsinv.call_id == "wsinv.ndaksdj@192.0.2.1"
    assert wsinv.cseq == (9, "INVITE")
    assert (
        top_via_parm(wsinv.all("via")[0].value) == b"SIP  /   2.0 /UDP 192.0.2.2;branch=390skdjuw"
    )
    esc01 = scan(corpus()["TC_ESC01_V"])  # compact "i:" Call-ID
    assert esc01.call_id == "esc01.239409asdfakjkn23onasd0-3234"
    assert scan(corpus()["TC_INSUF_I"]).call_id is None
    assert not scan(corpus()["TC_TEST_I"]).start_line_ok  # no SIP version


def test_rport_goes_into_the_first_via_parm_only() -> None:
    plain = request()
    out = with_rport(plain, scan(plain))
    assert b"Via: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK-1;rport\r\n" in out
    assert out.endswith(b"\r\n\r\nbody")
    already = request(via="SIP/2.0/UDP 127.0.0.1:5070;rport;branch=z9hG4bK-1")
    assert with_rport(already, scan(already)) is already
    listed = request(via='SIP/2.0/UDP h1;branch=z9hG4bKa;x="a,b" , SIP/2.0/UDP h2;branch=z9hG4bKb')
    assert b'x="a,b";rport , SIP/2.0/UDP h2' in with_rport(listed, scan(listed))
    data = corpus()["TC_WSINV"]  # folded Via over three lines, two Via headers
    out = with_rport(data, scan(data))
    assert b"    192.0.2.2;branch=390skdjuw;rport\r\n" in out
    assert len(out) == len(data) + len(b";rport")
    again = scan(out)
    assert again.call_id == scan(data).call_id
    assert top_via_parm(again.all("via")[0].value).endswith(b";rport")
    assert len(again.all("via")) == len(scan(data).all("via"))


def test_stateless_503_copies_the_transaction_headers() -> None:
    data = request(via="SIP/2.0/UDP 10.0.0.9:5070;branch=z9hG4bK-1;rport")
    data = data.replace(b"Via:", b"Via: SIP/2.0/UDP p.example;branch=z9hG4bK-p\r\nv:", 1)
    msg = scan(data)
    resp = stateless_response(
        msg, 503, "Service Unavailable", ("127.0.0.1", 5999), extra=(("Retry-After", "30"),)
    )
    lines = resp.decode().split("\r\n")
    assert lines[0] == "SIP/2.0 503 Service Unavailable"
    assert lines[1] == "Via: SIP/2.0/UDP p.example;branch=z9hG4bK-p;received=127.0.0.1"
    assert lines[2] == "Via: SIP/2.0/UDP 10.0.0.9:5070;branch=z9hG4bK-1;rport"
    assert lines[3] == "From: <sip:a@127.0.0.1>;tag=f1"
    assert lines[4].startswith("To: <sip:bot@127.0.0.1>;tag=")
    assert lines[5:9] == ["Call-ID: c1", "CSeq: 1 INVITE", "Retry-After: 30", "Content-Length: 0"]
    assert resp.endswith(b"\r\n\r\n")
    # a retransmission gets the same To tag; an existing tag is kept; rport gets its value
    assert stateless_response(msg, 503, "x", ("127.0.0.1", 5999)) == stateless_response(
        msg, 503, "x", ("127.0.0.1", 5999)
    )
    tagged = scan(request().replace(b"To: <sip:bot@127.0.0.1>", b"To: <sip:bot@h>;tag=t9"))
    assert b"To: <sip:bot@h>;tag=t9\r\n" in stateless_response(tagged, 481, "x", CLIENT)
    bare = scan(request(via="SIP/2.0/UDP 127.0.0.1:5070;rport;branch=z9hG4bK-1"))
    assert b";rport=5070;branch=z9hG4bK-1;received=127.0.0.1" in stateless_response(
        bare, 400, "x", CLIENT
    )


def test_invite_status() -> None:
    assert invite_status(b"SIP/2.0 180 Ringing\r\nCSeq: 1 INVITE\r\n\r\n") == 180
    assert invite_status(b"SIP/2.0 487 Terminated\r\ncseq:  7  INVITE\r\n\r\n") == 487
    assert invite_status(b"SIP/2.0 200 OK\r\nCSeq: 2 CANCEL\r\n\r\n") == 0
    assert invite_status(b"OPTIONS sip:x SIP/2.0\r\nCSeq: 1 INVITE\r\n\r\n") == 0
    assert invite_status(b"SIP/2.0 200 OK\r\n\r\nCSeq: 1 INVITE") == 0  # in the body


# --------------------------------------------------------------------------- routing


class Harness:
    """A front with two one-call 'workers' (plain UDP sockets) and a client socket."""

    def __init__(self) -> None:
        self.workers = [WorkerSlot(0, 1), WorkerSlot(1, 1)]
        self.worker_socks = [udp() for _ in self.workers]
        for slot, sock in zip(self.workers, self.worker_socks, strict=True):
            slot.addr = sock.getsockname()
        self.client = udp()
        self.front = SipFront("127.0.0.1", 0, self.workers, retry_after_s=9, linger_s=0.2)

    @property
    def addr(self) -> tuple[str, int]:
        return ("127.0.0.1", self.front.port)

    async def send(self, data: bytes, sock: socket.socket | None = None) -> None:
        await asyncio.get_running_loop().sock_sendto(sock or self.client, data, self.addr)

    async def recv(self, sock: socket.socket) -> tuple[bytes, tuple[str, int]]:
        loop = asyncio.get_running_loop()
        data, src = await asyncio.wait_for(loop.sock_recvfrom(sock, 65535), 1.0)
        return data, src

    async def nothing(self, sock: socket.socket) -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.get_running_loop().sock_recv(sock, 65535), 0.15)

    def close(self) -> None:
        self.front.close()
        self.front.close_relays()
        for s in [*self.worker_socks, self.client]:
            s.close()


def udp() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setblocking(False)
    return s


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    h = Harness()
    await h.front.start()
    try:
        yield h
    finally:
        h.close()


async def test_invites_spread_then_503_then_a_freed_slot_is_reused(harness: Harness) -> None:
    h = harness
    w0, w1 = h.worker_socks
    await h.send(request(call_id="a"))
    got, relay_a = await h.recv(w0)
    assert b";branch=z9hG4bK-1;rport\r\n" in got and b"Call-ID: a" in got
    await h.send(request(call_id="b"))
    got, _ = await h.recv(w1)
    assert b"Call-ID: b" in got
    await h.send(request(call_id="c"))  # both workers full: the front answers itself
    busy, src = await h.recv(h.client)
    assert busy.startswith(b"SIP/2.0 503 Service Unavailable\r\n") and b"Retry-After: 9\r\n" in busy
    assert src == h.addr
    await h.send(request("ACK", call_id="c"))  # the ACK of our 503: absorbed
    await h.nothing(w0)
    # a retransmission and the CANCEL of call a go to worker 0 through the same relay
    await h.send(request(call_id="a"))
    await h.send(request("CANCEL", call_id="a"))
    for method in (b"INVITE", b"CANCEL"):
        got, relay = await h.recv(w0)
        assert got.startswith(method) and relay == relay_a
    # worker 0 answers through the relay; the client hears it from the front's port
    final = b"SIP/2.0 487 Request Terminated\r\nCall-ID: a\r\nCSeq: 1 INVITE\r\n\r\n"
    await asyncio.get_running_loop().sock_sendto(w0, final, relay_a)
    got, src = await h.recv(h.client)
    assert got == final and src == h.addr
    assert h.workers[0].load == 0  # the final response freed the slot
    await h.send(request(call_id="d"))
    got, _ = await h.recv(w0)
    assert b"Call-ID: d" in got
    c = h.front.counters
    assert c["front_rejected_busy"] == 1 and c["front_dropped_acks"] == 1
    assert c["front_relayed_to_clients"] == 1


async def test_relays_accept_only_their_worker(harness: Harness) -> None:
    h = harness
    await h.send(request(call_id="a"))
    _, relay = await h.recv(h.worker_socks[0])
    stranger = udp()
    try:
        await asyncio.get_running_loop().sock_sendto(stranger, b"SIP/2.0 200 OK\r\n\r\n", relay)
        await h.nothing(h.client)
    finally:
        stranger.close()
    assert h.front.counters["front_relay_foreign"] == 1


async def test_call_lifecycle_and_worker_death(harness: Harness) -> None:
    h = harness
    w0 = h.worker_socks[0]
    await h.send(request(call_id="a"))
    _, relay = await h.recv(w0)
    ok = b"SIP/2.0 200 OK\r\nCall-ID: a\r\nCSeq: 1 INVITE\r\n\r\n"
    await asyncio.get_running_loop().sock_sendto(w0, ok, relay)
    await h.recv(h.client)
    h.front.call_started("a")
    route = h.front.routes["a"]
    assert route.answered and route.holds_slot
    h.front.sweep(time.monotonic() + 3600)  # a live call never idles out
    assert "a" in h.front.routes and h.workers[0].load == 1
    await h.send(request("BYE", call_id="a", cseq=2))  # in-dialog requests sent here still work
    got, _ = await h.recv(w0)
    assert got.startswith(b"BYE")
    h.front.call_finished("a")
    assert h.workers[0].load == 0
    h.front.sweep(time.monotonic() + 1)  # past the linger time: the relay closes
    assert "a" not in h.front.routes
    await h.send(request(call_id="b"))
    await h.recv(w0)
    h.workers[0].addr = None
    h.front.worker_down(h.workers[0])
    assert h.front.routes == {} and h.workers[0].load == 0


async def test_silent_invite_stops_holding_its_slot(harness: Harness) -> None:
    h = harness
    await h.send(request(call_id="a"))
    _, relay = await h.recv(h.worker_socks[0])
    assert h.workers[0].load == 1
    h.front.sweep(time.monotonic() + SILENT_INVITE_S + 0.1)
    assert h.workers[0].load == 0 and "a" in h.front.routes
    ringing = b"SIP/2.0 180 Ringing\r\nCall-ID: a\r\nCSeq: 1 INVITE\r\n\r\n"
    await asyncio.get_running_loop().sock_sendto(h.worker_socks[0], ringing, relay)
    await h.recv(h.client)
    assert h.workers[0].load == 1  # answered after all: the slot is held again


async def test_requests_the_front_answers_or_drops(harness: Harness) -> None:
    h = harness
    await h.send(request("CANCEL", call_id="nobody"))
    got, _ = await h.recv(h.client)
    assert got.startswith(b"SIP/2.0 481 ")
    await h.send(request().replace(b"Call-ID: c1\r\n", b""))
    got, _ = await h.recv(h.client)
    assert got.startswith(b"SIP/2.0 400 Bad Request (Missing Call-ID)\r\n")
    await h.send(b"\r\n\r\n")
    got, _ = await h.recv(h.client)
    assert got == b"\r\n"
    for junk in (b"SIP/2.0 200 OK\r\nCall-ID: x\r\n\r\n", b"\x00\xff" * 40, b"hello", b""):
        await h.send(junk)
    await h.nothing(h.client)
    # OPTIONS and other out-of-dialog requests are answered here: no route, no relay, no
    # worker message
    await h.send(request("OPTIONS", call_id="o1"))
    got, _ = await h.recv(h.client)
    assert got.startswith(b"SIP/2.0 200 OK\r\n") and b"\r\nAllow: INVITE, ACK, " in got
    for method, code in ((b"REGISTER", b"405"), (b"MESSAGE", b"405"), (b"FOO", b"501")):
        await h.send(request(method.decode(), call_id="o2"))
        got, _ = await h.recv(h.client)
        assert got.startswith(b"SIP/2.0 " + code + b" ") and b"\r\nAllow: " in got
    await h.send(request("BYE", call_id="o3"))  # no such call
    got, _ = await h.recv(h.client)
    assert got.startswith(b"SIP/2.0 481 ")
    await h.send(request().replace(b"CSeq: 1", b"Require: foo, timer\r\nCSeq: 1"))
    got, _ = await h.recv(h.client)
    assert got.startswith(b"SIP/2.0 420 Bad Extension\r\n") and b"\r\nUnsupported: foo\r\n" in got
    await h.nothing(h.worker_socks[0])
    assert h.front.routes == {} and h.workers[0].load == 0
    c = h.front.counters
    assert c["front_answered_481"] == 2 and c["front_answered_400"] == 1
    assert c["front_answered_options"] == 1 and c["front_rejected_request"] == 4
    assert c["front_keepalives"] == 2 and c["front_dropped_responses"] == 1  # b"" counts too
    assert c["front_malformed"] == 3  # the 400'd request, the binary junk and b"hello"


async def test_no_worker_up_means_503(harness: Harness) -> None:
    h = harness
    for slot in h.workers:
        slot.addr = None
    await h.send(request("OPTIONS", call_id="o1"))
    got, _ = await h.recv(h.client)
    assert got.startswith(b"SIP/2.0 503 ")
    await h.nothing(h.worker_socks[0])


async def test_a_workers_486_goes_out_as_503_with_retry_after(harness: Harness) -> None:
    h = harness
    await h.send(request(call_id="a"))
    _, relay = await h.recv(h.worker_socks[0])
    busy = b"SIP/2.0 486 Busy Here\r\nCall-ID: a\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
    await asyncio.get_running_loop().sock_sendto(h.worker_socks[0], busy, relay)
    got, _ = await h.recv(h.client)
    assert got == (
        b"SIP/2.0 503 Service Unavailable\r\nRetry-After: 9\r\nCall-ID: a\r\nCSeq: 1 INVITE\r\n"
        b"Content-Length: 0\r\n\r\n"
    )
    assert h.workers[0].load == 0 and h.front.counters["front_busy_rewritten"] == 1


async def test_slots_a_worker_reports_ending_are_not_free(harness: Harness) -> None:
    h = harness
    h.workers[0].ending = 1  # its pjsua still holds the slot of a call that is over
    await h.send(request(call_id="a"))
    await h.recv(h.worker_socks[1])  # the other worker takes it
    await h.send(request(call_id="b"))  # neither has a free slot: the front's own 503
    busy, _ = await h.recv(h.client)
    assert busy.startswith(b"SIP/2.0 503 Service Unavailable\r\n") and b"Retry-After: 9" in busy
    await h.nothing(h.worker_socks[0])
    h.workers[0].ending = 0  # its BYE is over
    await h.send(request(call_id="c"))
    got, _ = await h.recv(h.worker_socks[0])
    assert b"Call-ID: c" in got
