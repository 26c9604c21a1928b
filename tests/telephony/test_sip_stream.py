"""SIP over TCP and TLS at the node's front: framing, the front's rewriting, and real calls
from the project's pjsua dialer over loopback to a real node (front + worker processes).

The bot echoes what it hears, so a caller that gets its own tone back had its call set up
over the stream and its media up; the hang-ups check that the dialog's later requests
(the caller's ACK and BYE, the bot's BYE) take the connection through the front.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telephony.remote_call import RemoteCall
from telephony.sip_stream import (
    BRANCH_PREFIX,
    StreamSettings,
    creates_dialog,
    drop_routes,
    next_frame,
    pop_own_via,
    route_target,
)
from telephony.sipmsg import scan
from testkit.voices import write_wav
from tests.support.baresip import baresip_call
from tests.telephony.nodekit import Calls, dial_tone, tone, wait_until

RATE = 8000


def request(
    method: str = "OPTIONS", *, call_id: str = "c1", body: bytes = b"", extra: str = ""
) -> bytes:
    head = (
        f"{method} sip:bot@127.0.0.1 SIP/2.0\r\n"
        "Via: SIP/2.0/TCP 127.0.0.1:5999;branch=z9hG4bK-test1\r\n"
        "Max-Forwards: 70\r\n"
        "From: <sip:a@127.0.0.1>;tag=1\r\n"
        "To: <sip:bot@127.0.0.1>\r\n"
        f"Call-ID: {call_id}\r\n"
        f"CSeq: 1 {method}\r\n"
        f"{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


# --------------------------------------------------------------------------- framing


def test_a_message_is_cut_at_its_content_length() -> None:
    one = request("MESSAGE", body=b"hello")
    two = request("OPTIONS", call_id="c2")
    frame = next_frame(one + two, 65536)
    assert frame.kind == "message" and frame.message == one and frame.used == len(one)
    assert next_frame((one + two)[frame.used :], 65536).message == two


def test_a_partial_message_waits_for_the_rest() -> None:
    msg = request("MESSAGE", body=b"hello")
    for cut in (1, 20, len(msg) - 6, len(msg) - 1):
        assert next_frame(msg[:cut], 65536).kind == "need", cut


def test_keepalive_pings_between_messages() -> None:
    assert next_frame(b"\r\n\r\n", 65536).kind == "ping"
    assert next_frame(b"\r\n", 65536).kind == "need"
    msg = request()
    frame = next_frame(b"\r\n" + msg, 65536)  # a stray CRLF before a message is skipped
    assert frame.kind == "message" and frame.message == msg and frame.used == len(msg) + 2


def test_framing_errors() -> None:
    no_length = request().replace(b"Content-Length: 0\r\n", b"")
    assert next_frame(no_length, 65536).reason == "Missing Content-Length"
    bad = request().replace(b"Content-Length: 0", b"Content-Length: -3")
    assert next_frame(bad, 65536).code == 400
    twice = request().replace(b"Content-Length: 0\r\n", b"Content-Length: 0\r\nl: 5\r\n")
    assert next_frame(twice, 65536).reason == "Bad Content-Length"
    big = request("MESSAGE", body=b"x" * 2000)
    assert next_frame(big, 1024).code == 513
    endless = b"OPTIONS sip:bot@127.0.0.1 SIP/2.0\r\nX: " + b"y" * 3000
    assert next_frame(endless, 1024).code == 513


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.integers(min_value=64, max_value=2048))
def test_framing_never_raises_and_never_overreads(data: bytes, limit: int) -> None:
    frame = next_frame(data, limit)
    assert 0 <= frame.used <= len(data)
    if frame.kind == "message":
        assert frame.message and frame.message in data and len(frame.message) <= limit
    if frame.kind in ("need", "error"):
        assert frame.used == 0


# --------------------------------------------------------------------------- rewriting


def test_only_the_fronts_route_values_are_dropped() -> None:
    data = request(
        "BYE",
        extra=(
            "Route: <sip:127.0.0.1:5070;transport=tcp;lr>, <sip:127.0.0.1:40001;lr>\r\n"
            "Route: <sip:proxy.example.com;lr>\r\n"
        ),
    )
    out = drop_routes(data, scan(data), {b"127.0.0.1:5070", b"127.0.0.1:40001"})
    routes = [h.value for h in scan(out).all("route")]
    assert routes == [b"<sip:proxy.example.com;lr>"], out
    assert out.endswith(b"Content-Length: 0\r\n\r\n") and out.startswith(b"BYE ")
    untouched = request("BYE", extra="Route: <sip:other:5060;lr>\r\n")
    assert drop_routes(untouched, scan(untouched), {b"127.0.0.1:5070"}) == untouched


def test_route_targets() -> None:
    assert route_target(b"<sip:127.0.0.1:5070;transport=tcp;lr>") == b"127.0.0.1:5070"
    assert route_target(b"<sip:User@Host.Example;lr>") == b"host.example:5060"
    assert route_target(b"<sips:[::1]:5061;lr>") == b"[::1]:5061"


def test_the_fronts_via_comes_off_a_response_and_no_other() -> None:
    own = f"Via: SIP/2.0/TCP 127.0.0.1:5070;branch={BRANCH_PREFIX.decode()}ab\r\n"
    worker = "Via: SIP/2.0/UDP 127.0.0.1:41000;branch=z9hG4bKw;rport\r\n"
    response = (
        "SIP/2.0 200 OK\r\n" + own + worker + "Call-ID: c1\r\nCSeq: 2 BYE\r\n"
        "Content-Length: 0\r\n\r\n"
    ).encode()
    out = pop_own_via(response, scan(response))
    assert out is not None and [h.value for h in scan(out).all("via")] == [
        b"SIP/2.0/UDP 127.0.0.1:41000;branch=z9hG4bKw;rport"
    ]
    one_line = response.replace(b"ab\r\nVia:", b"ab,")
    out = pop_own_via(one_line, scan(one_line))
    assert out is not None and scan(out).get("via") is not None
    assert scan(out).get("via").value.startswith(b"SIP/2.0/UDP 127.0.0.1:41000")  # type: ignore[union-attr]
    foreign = response.replace(BRANCH_PREFIX, b"z9hG4bK-other-")
    assert pop_own_via(foreign, scan(foreign)) is None


def test_only_a_new_invite_creates_a_dialog() -> None:
    assert creates_dialog(scan(request("INVITE")))
    tagged = request("INVITE").replace(b"To: <sip:bot@127.0.0.1>", b"To: <sip:bot@127.0.0.1>;tag=9")
    assert not creates_dialog(scan(tagged))
    assert not creates_dialog(scan(request("OPTIONS")))


def test_tls_needs_a_certificate() -> None:
    with pytest.raises(ValueError, match="tls_cert_file"):
        StreamSettings(tls=True)
    missing = StreamSettings(
        tls=True, tls_cert_file=Path("/nonexistent/cert.pem"), tls_key_file=Path("key.pem")
    )
    with pytest.raises(ValueError, match=r"cannot load the TLS certificate /nonexistent/cert\.pem"):
        missing.server_context()


# --------------------------------------------------------------------------- real calls


def echoing() -> Calls:
    calls = Calls()
    calls.echo = True
    return calls


def heard_itself(result: Any, freq: float, helpers: Any) -> None:
    assert result.sip_final_status == 200, result.error
    assert helpers.tone_ratio(result.received, freq) > 0.8


@pytest.mark.sip
async def test_a_call_over_tcp_is_answered_and_hung_up_through_the_front(
    make_node: Any, helpers: Any
) -> None:
    async with make_node(echoing(), stream=StreamSettings(tcp=True)) as node:
        port = node.stream_port("TCP")
        assert port == node.config.port
        result = await dial_tone(port, 700.0, seconds=3.0, uri_params=";transport=tcp")
        await wait_until(lambda: node.active_calls == 0, what="the call ended")
        stats = node.stats()
    heard_itself(result, 700.0, helpers)
    assert not result.ended_by_remote  # the caller's BYE went over TCP, through the front
    assert stats["calls_total"] == 1 and stats["front_stream_connections"] >= 1, stats
    assert stats["front_stream_messages"] >= 3, stats  # INVITE, ACK, BYE at least


@pytest.mark.sip
async def test_the_bots_hang_up_reaches_a_tcp_caller(make_node: Any, helpers: Any) -> None:
    calls = echoing()

    async def hang_up_soon(call: RemoteCall) -> None:
        await asyncio.sleep(2.5)
        await call.hangup()

    calls.action = hang_up_soon
    # The call outlasts idle_s with no SIP message: its connection must stay for the BYE.
    async with make_node(calls, stream=StreamSettings(tcp=True, idle_s=1.0)) as node:
        result = await dial_tone(node.config.port, 700.0, seconds=8.0, uri_params=";transport=tcp")
        await wait_until(lambda: node.active_calls == 0, what="the call ended")
        stats = node.stats()
    assert result.sip_final_status == 200, result.error
    assert result.ended_by_remote, result  # the worker's BYE came over the caller's connection
    assert len(result.received) < 6 * RATE, len(result.received)
    assert stats["front_stream_responses_relayed"] >= 1, stats  # the caller's 200 to the BYE
    assert stats["front_stream_idle_closed"] == 0 and stats["front_stream_lost"] == 0, stats


def _exchange(sock: socket.socket, data: bytes, timeout_s: float = 5.0) -> bytes:
    sock.settimeout(timeout_s)
    sock.sendall(data)
    out = b""
    while b"\r\n\r\n" not in out:
        chunk = sock.recv(65536)
        if not chunk:
            break
        out += chunk
    return out


@pytest.mark.sip
async def test_a_malformed_message_is_answered_and_the_connection_serves_on(
    make_node: Any,
) -> None:
    async with make_node(Calls(), stream=StreamSettings(tcp=True)) as node:

        def talk() -> tuple[bytes, bytes, bytes, bytes, bytes]:
            with socket.create_connection(("127.0.0.1", node.config.port)) as sock:
                sock.settimeout(5.0)
                sock.sendall(b"\r\n\r\n")
                pong = sock.recv(100)
                bad = _exchange(sock, request("INVITE", extra="CSeq: 5 INVITE\r\n"))
                ok = _exchange(sock, request("OPTIONS", call_id="c9"))
                unknown = _exchange(sock, request("FOO", call_id="c10"))
                broken = _exchange(sock, request().replace(b"Content-Length: 0\r\n", b""))
                sock.settimeout(5.0)
                closed = sock.recv(100)
            return pong, bad, ok, unknown + b"|" + broken, closed

        pong, bad, ok, rest, closed = await asyncio.to_thread(talk)
        stats = node.stats()
    assert pong == b"\r\n"
    assert bad.startswith(b"SIP/2.0 400 "), bad  # two CSeq headers: malformed, answered
    assert ok.startswith(b"SIP/2.0 200 OK"), ok  # the same connection still serves
    unknown, broken = rest.split(b"|", 1)
    assert unknown.startswith(b"SIP/2.0 501 "), unknown
    assert broken.startswith(b"SIP/2.0 400 Missing Content-Length"), broken
    assert closed == b""  # framing lost: the connection is closed
    assert stats["front_stream_framing_errors"] == 1 and stats["calls_total"] == 0, stats


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.mark.sip
async def test_a_call_over_tls_is_answered_with_srtp(
    make_node: Any, helpers: Any, certificate: tuple[Path, Path], free_udp_port: Any
) -> None:
    cert, key = certificate
    stream = StreamSettings(
        tls=True, tls_port=free_udp_port(), tls_cert_file=cert, tls_key_file=key
    )
    async with make_node(echoing(), stream=stream) as node:
        port = node.stream_port("TLS")
        assert port == stream.tls_port and node.stream_port("TCP") is None

        def options() -> bytes:
            ctx = ssl.create_default_context(cafile=str(cert))
            ctx.check_hostname = False
            with (
                socket.create_connection(("127.0.0.1", port)) as raw,
                ctx.wrap_socket(raw) as sock,
            ):
                return _exchange(sock, request("OPTIONS").replace(b"/TCP", b"/TLS"))  # type: ignore[arg-type]

        answer = await asyncio.to_thread(options)
        # SRTP with its keys in SDP that crossed the network encrypted.
        result = await dial_tone(port, 700.0, seconds=3.0, uri_params=";transport=tls", srtp=True)
        await wait_until(lambda: node.active_calls == 0, what="the call ended")
        stats = node.stats()
    assert answer.startswith(b"SIP/2.0 200 OK"), answer
    heard_itself(result, 700.0, helpers)
    assert "RTP/SAVP" in result.answer_sdp and "a=crypto:" in result.answer_sdp
    assert stats["calls_total"] == 1 and stats["front_stream_connections"] >= 2, stats


@pytest.mark.sip
async def test_baresip_calls_over_tcp_and_tls_with_srtp(
    make_node: Any,
    helpers: Any,
    certificate: tuple[Path, Path],
    free_udp_port: Any,
    tmp_path: Path,
) -> None:
    """Another SIP stack than the project's dialer: baresip (libre), SRTP mandatory on its
    side, over each stream transport; it hears its tone echoed and hangs up at its end."""
    cert, key = certificate
    stream = StreamSettings(
        tcp=True, tls=True, tls_port=free_udp_port(), tls_cert_file=cert, tls_key_file=key
    )
    source = tmp_path / "tone.wav"
    write_wav(source, bytes(int(0.5 * RATE) * 2) + tone(700.0, 2.5) + bytes(RATE))
    async with make_node(echoing(), stream=stream) as node:
        calls = {}
        for proto, port in (("tcp", node.config.port), ("tls", stream.tls_port)):
            calls[proto] = await asyncio.to_thread(
                baresip_call,
                f"sip:bot@127.0.0.1:{port};transport={proto}",
                source,
                tmp_path / proto,
                20,
                account_params=";mediaenc=srtp-mand",
                config="module srtp.so\nsip_verify_server no\n",
            )
        await wait_until(lambda: node.active_calls == 0, what="the calls ended")
        stats = node.stats()
    for proto, call in calls.items():
        ratio = helpers.tone_ratio(call.received, 700.0)
        assert ratio > 0.8, (proto, ratio, call.log[-2000:])
        assert "SRTP is Enabled" in call.log and "Call established" in call.log, call.log
        assert f"transport={proto} terminated" in call.log, call.log  # it hung up
    assert stats["calls_total"] == 2 and stats["rtp_discarded"] == 0, stats


def _closed(sock: socket.socket) -> bool:
    """Whether the far end closes the connection (within 5 s) without sending anything."""
    sock.settimeout(5.0)
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True


@pytest.mark.sip
async def test_connections_are_bounded_per_source_and_closed_when_idle(make_node: Any) -> None:
    settings = StreamSettings(tcp=True, max_per_source=2, idle_s=1.0)
    async with make_node(Calls(), stream=settings) as node:

        def connect() -> tuple[bool, bytes, bool, float]:
            addr = ("127.0.0.1", node.config.port)
            with (
                socket.create_connection(addr) as first,
                socket.create_connection(addr) as second,
                socket.create_connection(addr) as third,
            ):
                refused = _closed(third)  # closed at once: the source is at its bound
                answer = _exchange(second, request("OPTIONS"))
                t0 = time.monotonic()
                idle = _closed(first)  # closed by the front after idle_s without a message
                return refused, answer, idle, time.monotonic() - t0

        refused, answer, idle, waited = await asyncio.to_thread(connect)
        stats = node.stats()
    assert refused and idle
    assert answer.startswith(b"SIP/2.0 200 OK"), answer
    assert waited < 4.0, waited
    assert stats["front_stream_refused"] == 1 and stats["front_stream_idle_closed"] >= 1, stats
