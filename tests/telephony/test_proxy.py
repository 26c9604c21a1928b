"""Kamailio (infra/kamailio/kamailio.cfg) in front of nodes: round robin, failover, defences.

Real SIP through a real proxy over loopback: each call goes through Kamailio to a node, whose
on_call echoes the caller's tone; a draining node (what SIGTERM does) answers 503 and the
proxy moves the call to the other node, while the drained node's live call goes on to its BYE
through the proxy (Record-Route).

The proxy faces the public internet, so its defences are tested from bare UDP sockets on
loopback addresses of their own (a caller at 127.0.0.2 is another source than one at
127.0.0.3): a request in a dialog goes nowhere but along the route set the proxy put in (no
open relay), callers who flood, never ACK their answers or keep being refused are banned at
the proxy while other callers are still answered, and a call no node can take gets 503 with
Retry-After. Where a real node is not needed, a "node" is a socket of the test's own that
answers as told.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from telephony.dialer import dial
from telephony.floodguard import FrontLimits
from tests.support.kamailio import KamailioProxy, kamailio_binary, run_kamailio
from tests.telephony.nodekit import Calls, tone, wait_until
from tests.telephony.rawua import RawUA, Received, header

pytestmark = [
    pytest.mark.sip,
    pytest.mark.skipif(
        kamailio_binary() is None,
        reason="kamailio not installed (`bash infra/install.sh --test` installs it)",
    ),
]

#: No OPTIONS probes during the test: only a call's 503 or timeout takes a node out.
NO_PROBES_S = 3600


async def call_through(proxy_port: int, freq: float, seconds: float) -> Any:
    return await dial(
        f"sip:bot@127.0.0.1:{proxy_port}",
        play=tone(freq, seconds - 1.0),
        play_at_s=0.2,
        record_seconds=seconds,
    )


async def test_calls_through_kamailio_fail_over_from_a_draining_node(
    make_node: Any, hears_own_tone: Any
) -> None:
    calls_a, calls_b = Calls(), Calls()
    calls_a.echo = calls_b.echo = True
    async with (
        make_node(calls_a, max_calls=4) as node_a,
        make_node(calls_b, max_calls=4) as node_b,
    ):
        nodes = {"a": (node_a, calls_a), "b": (node_b, calls_b)}
        with run_kamailio([node_a.config.port, node_b.config.port], ping_s=NO_PROBES_S) as proxy:
            # Two calls one after the other: round robin gives one to each node.
            for f in (440.0, 620.0):
                hears_own_tone(await call_through(proxy.port, f, 3.0), f)
            assert len(calls_a.calls) == 1 and len(calls_b.calls) == 1, proxy.log.read_text()
            for node, _ in nodes.values():
                assert node.stats()["front_rejected_draining"] == 0

            # A long call is up on one node; that node then drains as on SIGTERM.
            live = asyncio.get_running_loop().create_task(call_through(proxy.port, 300.0, 8.0))
            await wait_until(
                lambda: node_a.active_calls + node_b.active_calls == 1, 10, "live call"
            )
            name = "a" if node_a.active_calls == 1 else "b"
            drained, drained_calls = nodes[name]
            other, other_calls = nodes["b" if name == "a" else "a"]
            drain = asyncio.get_running_loop().create_task(drained.drain(30.0))
            await wait_until(lambda: drained.draining, what="drain started")
            before = len(other_calls.calls)

            # New calls: round robin sends one of them to the draining node, which answers 503;
            # the proxy moves it to the other node. Every one is answered and echoed there.
            for f in (500.0, 700.0):
                hears_own_tone(await call_through(proxy.port, f, 3.0), f)
            assert len(other_calls.calls) == before + 2
            assert len(drained_calls.calls) == 2  # the first call and the live one, no new one
            assert drained.stats()["front_rejected_draining"] >= 1, proxy.log.read_text()
            assert other.stats()["front_rejected_draining"] == 0
            assert "next node" in proxy.log.read_text()

            # The drained node's live call went on and ended by its BYE through the proxy.
            hears_own_tone(await live, 300.0)
            assert await drain is True
            assert drained_calls.calls[-1].ended
            assert drained.stats()["calls_total"] == 2


async def test_calls_through_kamailio_skip_a_node_that_does_not_answer(
    make_node: Any, hears_own_tone: Any
) -> None:
    calls_a, calls_b = Calls(), Calls()
    calls_a.echo = calls_b.echo = True
    async with (
        make_node(calls_a, max_calls=4) as node_a,
        make_node(calls_b, max_calls=4) as node_b,
    ):
        ports = [node_a.config.port, node_b.config.port]
        with run_kamailio(ports, ping_s=NO_PROBES_S, node_timeout_ms=1000) as proxy:
            await node_a.stop()  # gone: its port is closed, nothing answers there
            # Round robin sends one of the two calls to the stopped node first: no reply in
            # 1 s, and the proxy relays it to the other node, which answers both.
            for f in (440.0, 620.0):
                hears_own_tone(await call_through(proxy.port, f, 3.0), f)
            assert not calls_a.calls
            assert len(calls_b.calls) == 2
            assert "next node" in proxy.log.read_text()


async def test_kamailio_probes_take_a_draining_node_out_before_any_call(
    make_node: Any, hears_own_tone: Any
) -> None:
    calls_a, calls_b = Calls(), Calls()
    calls_a.echo = calls_b.echo = True
    async with (
        make_node(calls_a, max_calls=4) as node_a,
        make_node(calls_b, max_calls=4) as node_b,
    ):
        ports = [node_a.config.port, node_b.config.port]
        with run_kamailio(ports, ping_s=1) as proxy:
            drain = asyncio.get_running_loop().create_task(node_a.drain(30.0))
            await wait_until(lambda: node_a.draining, what="drain started")
            probes = node_a.stats()["front_answered_options"]
            # Two OPTIONS probes answered 503 since: the first one's reply has been taken
            # by the proxy a second before the second probe came.
            await wait_until(
                lambda: node_a.stats()["front_answered_options"] >= probes + 2,
                10,
                "two probes of the draining node",
            )
            for f in (440.0, 620.0):
                hears_own_tone(await call_through(proxy.port, f, 3.0), f)
            assert len(calls_b.calls) == 2, proxy.log.read_text()
            # The proxy knew from its probes: no call was even offered to the draining node.
            assert not calls_a.calls
            assert node_a.stats()["front_rejected_draining"] == 0
            assert await drain is True


async def test_the_proxy_stays_on_the_route_of_the_dialog(make_node: Any) -> None:
    calls = Calls()

    async def hang_up_soon(call: Any) -> None:
        await asyncio.sleep(0.5)
        await call.hangup()

    calls.action = hang_up_soon
    async with make_node(calls, max_calls=4) as node:
        with run_kamailio([node.config.port], ping_s=NO_PROBES_S) as proxy:
            ua = RawUA("127.0.0.1")
            try:
                ua.invite(("127.0.0.1", proxy.port), "through-proxy")
                await wait_until(lambda: ua.finals("through-proxy") == [200], 10, "200 OK")
                ok = next(r for r in ua.got if r.first.startswith("SIP/2.0 200"))
                # The 200 came back through the proxy, which record-routed the dialog (the
                # node's own Record-Route values are above the proxy's)...
                assert ok.src == ("127.0.0.1", proxy.port)
                assert proxy_route(ok, proxy), record_routes(ok.head)
                # ...so the node's BYE comes through the proxy too, as does our 200 to it.
                await wait_until(lambda: bool(ua.requests("BYE")), 10, "the node's BYE")
                assert all(r.src == ("127.0.0.1", proxy.port) for r in ua.requests("BYE"))
                await wait_until(lambda: node.active_calls == 0, 10, "call ended on the node")
                await wait_until(lambda: bool(calls.ended()), 10, "call ended event")
            finally:
                ua.close()


# --- the proxy's defences -------------------------------------------------------------------

#: A bounded wait for something that must not come (a relayed request, an answer to a
#: banned source): every answer and relay in these tests takes milliseconds on loopback.
QUIET_S = 1.0
#: RFC 3261's reason phrases, the only ones the proxy's own answers may carry.
RFC_PHRASES = {
    100: "Trying",
    200: "OK",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    481: "Call/Transaction Does Not Exist",
    503: "Service Unavailable",
}


def record_routes(head: str) -> list[str]:
    """Every Record-Route value of a message, top first."""
    values: list[str] = []
    for m in re.finditer(r"(?im)^record-route[ \t]*:[ \t]*(.*?)\r?$", head):
        values += [v.strip() for v in m.group(1).split(",") if v.strip()]
    return values


def proxy_route(message: Received, proxy: KamailioProxy) -> str | None:
    """The Record-Route value the proxy put in a dialog, if ``message`` carries it."""
    for value in record_routes(message.head):
        if f"sip:{proxy.host}:{proxy.port};" in value and ";lr" in value:
            return value
    return None


def cseq_of(r: Received) -> str:
    return " ".join((header(r.head, "cseq") or "").split())


def responses(ua: RawUA, call_id: str, cseq: str) -> list[Received]:
    """The responses ``ua`` got to its request ``cseq`` ("7 INVITE") of ``call_id``."""
    return [
        r
        for r in ua.got
        if r.first.startswith("SIP/2.0 ") and r.call_id == call_id and cseq_of(r) == cseq
    ]


def final(ua: RawUA, call_id: str, cseq: str) -> Received | None:
    return next((r for r in responses(ua, call_id, cseq) if int(r.first[8:11]) >= 200), None)


def has_final(ua: RawUA, call_id: str, cseq: str) -> Callable[[], bool]:
    return lambda: final(ua, call_id, cseq) is not None


def has_response(ua: RawUA, call_id: str, cseq: str, code: int) -> Callable[[], bool]:
    return lambda: any(status(r) == code for r in responses(ua, call_id, cseq))


def finals_are(ua: RawUA, call_id: str, codes: list[int]) -> Callable[[], bool]:
    return lambda: ua.finals(call_id) == codes


def status(r: Received) -> int:
    return int(r.first[8:11])


def reply(request: Received, code: int, reason: str, extra: str = "", to_tag: str = "") -> bytes:
    """The response a node would send to ``request``: its Via, From, To (with ``to_tag``),
    Call-ID, CSeq and Record-Route copied; ``extra``: header lines, each ending CRLF."""
    lines = [f"SIP/2.0 {code} {reason}"]
    for line in request.head.split("\r\n")[1:]:
        name = line.split(":", 1)[0].strip().lower()
        if name in ("via", "v", "from", "f", "call-id", "i", "cseq", "record-route"):
            lines.append(line)
        elif name in ("to", "t"):
            lines.append(line + (f";tag={to_tag}" if to_tag and ";tag=" not in line else ""))
    return ("\r\n".join(lines) + f"\r\n{extra}Content-Length: 0\r\n\r\n").encode()


def request(
    ua: RawUA,
    method: str,
    ruri: str,
    call_id: str,
    cseq: int,
    *,
    from_: str,
    to: str,
    routes: tuple[str, ...] = (),
    body: str = "",
    branch: str = "",
) -> bytes:
    """A request from ``ua``; ``routes``: its Route values, top first; ``branch``: its Via's
    (a CANCEL's is its INVITE's), else a new one."""
    branch = branch or f"z9hG4bK-{uuid.uuid4().hex[:16]}"
    lines = [
        f"{method} {ruri} SIP/2.0",
        f"Via: SIP/2.0/UDP {ua.ip}:{ua.port};branch={branch};rport",
        f"From: {from_}",
        f"To: {to}",
        f"Call-ID: {call_id}",
        f"CSeq: {cseq} {method}",
        "Max-Forwards: 70",
        f"Contact: <sip:raw@{ua.ip}:{ua.port}>",
    ]
    lines += [f"Route: {route}" for route in routes]
    if body:
        lines.append("Content-Type: text/plain")
    lines.append(f"Content-Length: {len(body.encode())}")
    return ("\r\n".join(lines) + "\r\n\r\n" + body).encode()


def ack_along_route(ua: RawUA, call_id: str, dest: tuple[str, int]) -> None:
    """ACK the 2xx ``ua`` got for ``call_id`` as RFC 3261 12.2.1.1 has it: to its Contact,
    along the route set its Record-Route values make, sent to the first hop (``dest``)."""
    ok = next(r for r in responses(ua, call_id, "1 INVITE") if status(r) == 200)
    contact = re.search(r"<([^>]+)>", header(ok.head, "contact") or "")
    assert contact is not None, ok.head
    routes = tuple(reversed(record_routes(ok.head)))
    from_, to = header(ok.head, "from") or "", header(ok.head, "to") or ""
    ua.send(
        request(ua, "ACK", contact.group(1), call_id, 1, from_=from_, to=to, routes=routes), dest
    )


def neutral(r: Received) -> bool:
    """No header naming the product or its SIP stack, and RFC 3261's reason phrase."""
    if header(r.head, "server") is not None or header(r.head, "user-agent") is not None:
        return False
    return r.first == f"SIP/2.0 {status(r)} {RFC_PHRASES.get(status(r), '?')}"


class AnsweringNode:
    """A node of the dispatcher list made of one socket on 127.0.0.1: it answers each new
    INVITE with ``code`` (200: with a To tag, its own Contact and the Record-Route copied;
    180: ringing until a CANCEL, answered 200, ends it with 487) and records everything, so
    that a test sees exactly what the proxy relayed to it."""

    def __init__(self, code: int = 200, reason: str = "OK", extra: str = "") -> None:
        self.ua = RawUA("127.0.0.1", ack=False, answer_bye=False)
        self.code, self.reason, self.extra = code, reason, extra
        self._answers: dict[str, tuple[bytes, tuple[str, int]]] = {}
        self._task = asyncio.get_running_loop().create_task(self._answer())

    @property
    def port(self) -> int:
        return self.ua.port

    @property
    def contact(self) -> str:
        return f"<sip:bot@127.0.0.1:{self.port}>"

    def requests(self, method: str, call_id: str | None = None) -> list[Received]:
        return self.ua.requests(method, call_id)

    def resend(self, call_id: str) -> None:
        """Send the answer to ``call_id``'s INVITE again (a 2xx's retransmission)."""
        data, dest = self._answers[call_id]
        self.ua.send(data, dest)

    async def _answer(self) -> None:
        answered: set[str] = set()
        while True:
            await asyncio.sleep(0.01)
            for r in self.ua.requests("CANCEL"):
                key = r.call_id + cseq_of(r)
                if key in answered:
                    continue
                answered.add(key)
                self.ua.send(reply(r, 200, "OK"), r.src)
                invite = next(i for i in self.ua.requests("INVITE", r.call_id))
                self.ua.send(reply(invite, 487, "Request Terminated", to_tag="node"), r.src)
            for r in self.ua.requests("INVITE"):
                key = r.call_id + cseq_of(r)
                if key in answered or (header(r.head, "to") or "").find(";tag=") >= 0:
                    continue
                answered.add(key)
                extra = self.extra
                if self.code == 200:
                    extra += f"Contact: {self.contact}\r\n"
                to_tag = "node" if self.code >= 200 else "ringing"
                data = reply(r, self.code, self.reason, extra, to_tag)
                self._answers[r.call_id] = (data, r.src)
                self.ua.send(data, r.src)

    def close(self) -> None:
        self._task.cancel()
        self.ua.close()


async def test_the_proxy_relays_nothing_to_a_request_uri_of_a_callers_choosing() -> None:
    node = AnsweringNode()
    # A stranger's SIP server: toll fraud would be the proxy relaying a call to it.
    stranger = RawUA("127.0.0.1", ack=False, answer_bye=False)
    caller = RawUA("127.0.0.2", ack=False, answer_bye=False)
    try:
        with run_kamailio([node.port], ping_s=NO_PROBES_S) as proxy:
            dest = (proxy.host, proxy.port)
            target = f"sip:0900123456@127.0.0.1:{stranger.port}"
            # A real call through the proxy: the caller learns the proxy's Record-Route from
            # the answer, mark and all.
            caller.invite(dest, "relay-call")
            await wait_until(lambda: caller.finals("relay-call") == [200], 10, "the answer")
            ok = next(r for r in responses(caller, "relay-call", "1 INVITE") if status(r) == 200)
            our_route = proxy_route(ok, proxy)
            assert our_route is not None, ok.head
            dialog = {"from_": header(ok.head, "from") or "", "to": header(ok.head, "to") or ""}

            # Along the route set, the dialog's ACK reaches the node (the requests below are
            # made the same way and differ only in where they aim).
            ack_along_route(caller, "relay-call", dest)
            await wait_until(lambda: bool(node.requests("ACK", "relay-call")), 5, "ACK")

            bare_route = f"<sip:{proxy.host}:{proxy.port};lr>"
            stranger_route = f"<sip:127.0.0.1:{stranger.port};lr>"
            strange_dialog = {
                "from_": f"<sip:attacker@127.0.0.2>;tag=a-{uuid.uuid4().hex[:8]}",
                "to": f"<sip:0900123456@127.0.0.1>;tag=b-{uuid.uuid4().hex[:8]}",
            }
            # (method, Call-ID, CSeq, Route values, dialog, the proxy's answer)
            attempts: list[tuple[str, str, int, tuple[str, ...], dict[str, str], int | None]] = [
                # a made-up dialog, a Route naming the proxy: the current relay
                ("INVITE", "relay-1", 1, (bare_route,), strange_dialog, 404),
                ("MESSAGE", "relay-2", 1, (bare_route,), strange_dialog, 405),
                ("BYE", "relay-3", 1, (bare_route,), strange_dialog, 404),
                # the caller's own dialog and the proxy's own Record-Route, aimed elsewhere
                ("INVITE", "relay-call", 2, (our_route,), dialog, 403),
                ("MESSAGE", "relay-call", 3, (our_route,), dialog, 405),
                ("INFO", "relay-call", 4, (our_route, stranger_route), dialog, 403),
                ("ACK", "relay-call", 2, (our_route,), dialog, None),
            ]
            for method, call_id, cseq, routes, d, _ in attempts:
                caller.send(
                    request(caller, method, target, call_id, cseq, routes=routes, **d), dest
                )
            # Nothing reached the stranger...
            await asyncio.sleep(QUIET_S)
            assert stranger.got == [], [r.head for r in stranger.got]
            # ...nor the node, but for the call and its ACK (an INVITE the proxy sent again
            # on a slow machine is the same call)...
            got = {(r.first.split()[0], r.call_id, cseq_of(r)) for r in node.ua.got}
            assert got == {("INVITE", "relay-call", "1 INVITE"), ("ACK", "relay-call", "1 ACK")}, [
                r.first for r in node.ua.got
            ]
            # ...and every attempt but the ACK got the proxy's final answer.
            for method, call_id, cseq, _, _, code in attempts:
                if code is not None:
                    seq = f"{cseq} {method}"
                    await wait_until(has_final(caller, call_id, seq), 5, f"answer to {seq}")
                    answer = final(caller, call_id, seq)
                    assert answer is not None and status(answer) == code, (method, answer)
            # Nothing the proxy answered names the product or its SIP stack.
            answers = [r for r in caller.got if r.src == dest]
            assert answers and all(neutral(r) for r in answers), [r.head for r in answers]
            assert "is no node" in proxy.log_text()
    finally:
        node.close()
        stranger.close()
        caller.close()


async def test_requests_from_outside_that_no_call_needs_are_refused_at_the_proxy() -> None:
    node = AnsweringNode()
    caller = RawUA("127.0.0.2", ack=False, answer_bye=False)
    try:
        with run_kamailio([node.port], ping_s=NO_PROBES_S) as proxy:
            dest = (proxy.host, proxy.port)
            expected = {
                "REGISTER": 405,
                "MESSAGE": 405,
                "SUBSCRIBE": 405,
                "PUBLISH": 405,
                "REFER": 403,
                "NOTIFY": 403,
                "BYE": 481,
                "FOO": 501,
            }
            for method in expected:
                caller.send(
                    request(caller, method, f"sip:bot@{proxy.host}:{proxy.port}",
                            f"outside-{method}", 1, from_="<sip:x@127.0.0.2>;tag=x",
                            to=f"<sip:bot@{proxy.host}>"),
                    dest,
                )  # fmt: skip
            for method, code in expected.items():
                await wait_until(
                    has_final(caller, f"outside-{method}", f"1 {method}"),
                    5,
                    f"answer to {method}",
                )
                answer = final(caller, f"outside-{method}", f"1 {method}")
                assert answer is not None and status(answer) == code, answer
                if code == 405:
                    assert "INVITE" in (header(answer.head, "allow") or ""), answer.head
            await asyncio.sleep(QUIET_S)
            assert node.ua.got == [], [r.first for r in node.ua.got]
    finally:
        node.close()
        caller.close()


async def test_a_caller_that_never_acks_is_banned_at_the_proxy_and_others_are_answered(
    make_node: Any,
) -> None:
    calls = Calls()
    # The node spares the proxy (docs/proxy.md): every caller comes from its address.
    limits = FrontLimits(upstreams=["127.0.0.1/32"])
    async with make_node(calls, max_calls=8, limits=limits) as node:
        settings = {"SB_ACK_WAIT_S": 2, "SB_BAN_AFTER_UNACKED": 3}
        with run_kamailio([node.config.port], ping_s=NO_PROBES_S, settings=settings) as proxy:
            dest = (proxy.host, proxy.port)
            never_acks = RawUA("127.0.0.2", ack=False, answer_bye=False)
            other = RawUA("127.0.0.3", ack=False, answer_bye=False)
            try:
                # Another caller's call, ACKed along its route set (through the proxy).
                other.invite(dest, "other-1")
                await wait_until(finals_are(other, "other-1", [200]), 10, "other's answer")
                ack_along_route(other, "other-1", dest)
                for i in range(3):
                    never_acks.invite(dest, f"unacked-{i}")
                for i in range(3):
                    await wait_until(
                        finals_are(never_acks, f"unacked-{i}", [200]), 10, f"answer {i}"
                    )
                # Each answer counts once its ACK is SB_ACK_WAIT_S late; the third bans.
                await wait_until(
                    lambda: "banned 127.0.0.2 " in proxy.log_text(), 15, "the proxy's ban"
                )
                assert "3 unACKed answers" in proxy.log_text()
                answered = len(calls.calls)
                never_acks.invite(dest, "unacked-banned")
                other.invite(dest, "other-2")
                await wait_until(finals_are(other, "other-2", [200]), 10, "other's answer")
                await asyncio.sleep(QUIET_S)
                # The banned source gets no answer at all, and its call never reached a node.
                assert not [r for r in never_acks.got if r.call_id == "unacked-banned"]
                assert len(calls.calls) == answered + 1
                assert node.stats()["front_bans"] == 0  # the node banned nobody
                # The other caller's ACK came: its answer, older than the banned caller's,
                # was never counted.
                assert "unACKed answer to 127.0.0.3 " not in proxy.log_text()
            finally:
                never_acks.close()
                other.close()


async def test_an_answer_retransmitted_after_its_ack_is_not_counted_unacked() -> None:
    node = AnsweringNode()
    acks = RawUA("127.0.0.2", ack=False, answer_bye=False)
    never_acks = RawUA("127.0.0.3", ack=False, answer_bye=False)
    try:
        settings = {"SB_ACK_WAIT_S": 1}
        with run_kamailio([node.port], ping_s=NO_PROBES_S, settings=settings) as proxy:
            dest = (proxy.host, proxy.port)
            acks.invite(dest, "acked")
            await wait_until(finals_are(acks, "acked", [200]), 5, "the answer")
            ack_along_route(acks, "acked", dest)
            await wait_until(lambda: bool(node.requests("ACK", "acked")), 5, "the ACK")
            # The node's retransmission timer fired before the ACK came (a long round trip):
            # its 200 passes the proxy again, after the ACK.
            node.resend("acked")
            await wait_until(lambda: len(responses(acks, "acked", "1 INVITE")) >= 3, 5, "again")
            # A caller that never ACKs, answered after it, is counted...
            never_acks.invite(dest, "not-acked")
            await wait_until(finals_are(never_acks, "not-acked", [200]), 5, "the answer")
            await wait_until(
                lambda: "unACKed answer to 127.0.0.3 " in proxy.log_text(), 10, "the count"
            )
            await asyncio.sleep(QUIET_S)
            # ...the one that ACKed is not.
            assert "unACKed answer to 127.0.0.2 " not in proxy.log_text()
    finally:
        node.close()
        acks.close()
        never_acks.close()


async def test_a_callers_calls_not_yet_confirmed_are_capped_at_the_proxy() -> None:
    node = AnsweringNode()
    caller = RawUA("127.0.0.2", ack=False, answer_bye=False)
    burst = RawUA("127.0.0.3", ack=False, answer_bye=False)
    other = RawUA("127.0.0.4", ack=False, answer_bye=False)
    try:
        settings = {"SB_MAX_UNCONFIRMED": 2}
        with run_kamailio([node.port], ping_s=NO_PROBES_S, settings=settings) as proxy:
            dest = (proxy.host, proxy.port)
            # Two answered calls the caller has not ACKed: its third gets 503 at the proxy.
            for call_id in ("cap-1", "cap-2"):
                caller.invite(dest, call_id)
                await wait_until(finals_are(caller, call_id, [200]), 5, f"{call_id} answered")
            caller.invite(dest, "cap-3")
            await wait_until(has_final(caller, "cap-3", "1 INVITE"), 5, "cap-3's answer")
            refused = final(caller, "cap-3", "1 INVITE")
            assert refused is not None and status(refused) == 503, refused
            assert header(refused.head, "retry-after") == "30" and neutral(refused)
            assert not node.requests("INVITE", "cap-3")
            # Another caller is answered meanwhile.
            other.invite(dest, "other")
            await wait_until(finals_are(other, "other", [200]), 5, "other's answer")
            # An ACK confirms one of the two: the caller's next call goes through.
            ack_along_route(caller, "cap-1", dest)
            await wait_until(lambda: bool(node.requests("ACK", "cap-1")), 5, "the ACK")
            caller.invite(dest, "cap-4")
            await wait_until(finals_are(caller, "cap-4", [200]), 5, "cap-4 answered")
            # Six at once from one address: two reach the node, four get 503.
            for i in range(6):
                burst.invite(dest, f"burst-{i}")
            await wait_until(
                lambda: all(burst.finals(f"burst-{i}") for i in range(6)), 5, "six answers"
            )
            codes = sorted(burst.finals(f"burst-{i}")[0] for i in range(6))
            assert codes == [200, 200, 503, 503, 503, 503], codes
            assert len({r.call_id for r in node.requests("INVITE") if "burst" in r.call_id}) == 2
    finally:
        node.close()
        caller.close()
        burst.close()
        other.close()


async def test_a_cancelled_call_is_no_longer_counted_unconfirmed() -> None:
    node = AnsweringNode(180, "Ringing")
    caller = RawUA("127.0.0.2", ack=False, answer_bye=False)
    try:
        settings = {"SB_MAX_UNCONFIRMED": 1}
        with run_kamailio([node.port], ping_s=NO_PROBES_S, settings=settings) as proxy:
            dest = (proxy.host, proxy.port)
            for call_id in ("ring-1", "ring-2"):
                caller.invite(dest, call_id)
                await wait_until(has_response(caller, call_id, "1 INVITE", 180), 5, "ringing")
                caller.send(
                    request(caller, "CANCEL", f"sip:bot@{proxy.host}:{proxy.port}", call_id, 1,
                            from_=f"<sip:raw@127.0.0.2>;tag=t-{call_id}",
                            to=f"<sip:bot@{proxy.host}>",
                            branch=f"z9hG4bK-{call_id}"),
                    dest,
                )  # fmt: skip
                # The call ends 487; the caller's next call is not refused as unconfirmed.
                await wait_until(finals_are(caller, call_id, [487]), 5, f"{call_id}'s 487")
    finally:
        node.close()
        caller.close()


async def test_a_caller_the_nodes_keep_refusing_is_banned_at_the_proxy() -> None:
    # What a node answers a digest guesser (a wrong password, not a peer): 403.
    node = AnsweringNode(403, "Forbidden")
    guesser = RawUA("127.0.0.2", ack=False, answer_bye=False)
    other = RawUA("127.0.0.3", ack=False, answer_bye=False)
    try:
        # (one call not yet confirmed at a time: each 403 must give the caller's back)
        settings = {"SB_BAN_AFTER_REFUSED": 3, "SB_MAX_UNCONFIRMED": 1}
        with run_kamailio([node.port], ping_s=NO_PROBES_S, settings=settings) as proxy:
            dest = (proxy.host, proxy.port)
            for i in range(3):
                guesser.invite(dest, f"guess-{i}")
                await wait_until(finals_are(guesser, f"guess-{i}", [403]), 5, "403")
            await wait_until(lambda: "banned 127.0.0.2 " in proxy.log_text(), 5, "the ban")
            guesser.invite(dest, "guess-banned")
            other.invite(dest, "other-caller")
            await wait_until(lambda: other.finals("other-caller") == [403], 5, "other's answer")
            await asyncio.sleep(QUIET_S)
            assert not [r for r in guesser.got if r.call_id == "guess-banned"]
            assert not node.requests("INVITE", "guess-banned")
    finally:
        node.close()
        guesser.close()
        other.close()


async def test_a_flooding_source_is_banned_at_the_proxy_and_others_are_answered() -> None:
    flooder = RawUA("127.0.0.4", ack=False, answer_bye=False)
    other = RawUA("127.0.0.5", ack=False, answer_bye=False)
    trunk = RawUA("127.0.0.6", ack=False, answer_bye=False)  # in SB_TRUSTED_NETS
    node = AnsweringNode()
    try:
        settings: dict[str, str | int] = {
            "SB_PIKE_REQS": 10,
            "SB_PIKE_WINDOW_S": 2,
            "SB_TRUSTED_NETS": '"192.0.2.0/24,127.0.0.6/32"',
        }
        with run_kamailio([node.port], ping_s=NO_PROBES_S, settings=settings) as proxy:
            dest = (proxy.host, proxy.port)

            def options(ua: RawUA, call_id: str) -> None:
                ua.send(
                    request(ua, "OPTIONS", f"sip:{proxy.host}:{proxy.port}", call_id, 1,
                            from_=f"<sip:x@{ua.ip}>;tag=x", to=f"<sip:{proxy.host}>"),
                    dest,
                )  # fmt: skip

            # 60 requests at once: six times what the proxy takes in its window.
            for i in range(60):
                options(flooder, f"flood-{i}")
                options(trunk, f"trunk-{i}")
            await wait_until(lambda: "banned 127.0.0.4 " in proxy.log_text(), 5, "the ban")
            assert "flood" in proxy.log_text()
            options(flooder, "flood-after")
            options(other, "other")
            await wait_until(has_final(other, "other", "1 OPTIONS"), 5, "other's 200")
            # A trusted network (a trunk) is never limited: each of its 60 is answered.
            await wait_until(lambda: len(trunk.got) == 60, 5, "the trunk's answers")
            await asyncio.sleep(QUIET_S)
            answer = final(other, "other", "1 OPTIONS")
            assert answer is not None and status(answer) == 200
            assert not [r for r in flooder.got if r.call_id == "flood-after"]
            # The flood was cut: far fewer than 60 answers.
            assert len(flooder.got) < 30, len(flooder.got)
            assert "banned 127.0.0.6 " not in proxy.log_text()
    finally:
        node.close()
        flooder.close()
        other.close()
        trunk.close()


@pytest.mark.parametrize(
    ("nodes", "retry_after"),
    [
        # Retry-After of the first call, then of the second: the proxy's own
        # SB_RETRY_AFTER_S (30), or the node's when its 503 had one.
        ("none listening", ("30", "30")),
        ("every node 503 without Retry-After", ("30", "30")),
        ("every node 503 with Retry-After", ("7", "30")),
        ("every node 500", ("30", "30")),
    ],
)
async def test_a_call_no_node_can_take_gets_503_with_retry_after(
    nodes: str, retry_after: tuple[str, str]
) -> None:
    fleet: list[AnsweringNode] = []
    if nodes == "none listening":
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            ports = [s.getsockname()[1]]  # closed again: nothing answers there
    else:
        code, reason = (500, "Server Internal Error") if "500" in nodes else (503, "x")
        extra = "Retry-After: 7\r\n" if "with Retry-After" in nodes else ""
        fleet = [AnsweringNode(code, reason, extra) for _ in range(2)]
        ports = [n.port for n in fleet]
    caller = RawUA("127.0.0.2", ack=False, answer_bye=False)
    try:
        with run_kamailio(ports, ping_s=NO_PROBES_S, node_timeout_ms=1000) as proxy:
            # The first call finds out (a timeout, or every node's refusal); the second finds
            # every node marked out.
            for call_id, seconds in zip(("no-node-1", "no-node-2"), retry_after, strict=True):
                caller.invite((proxy.host, proxy.port), call_id)
                await wait_until(has_final(caller, call_id, "1 INVITE"), 10, "final")
                answer = final(caller, call_id, "1 INVITE")
                assert answer is not None and status(answer) == 503, answer
                assert header(answer.head, "retry-after") == seconds, answer.head
                assert neutral(answer), answer.head
            if fleet:
                assert all(n.requests("INVITE", "no-node-1") for n in fleet)
    finally:
        for n in fleet:
            n.close()
        caller.close()


async def test_the_proxy_takes_sip_over_tcp_and_tls(make_node: Any, hears_own_tone: Any) -> None:
    def options_over(sock: socket.socket, proxy: KamailioProxy, transport: str) -> str:
        """OPTIONS to the proxy itself on a connection, and the first bytes of its answer."""
        local = sock.getsockname()
        port = proxy.port if transport == "TCP" else proxy.tls_port
        sock.sendall(
            (
                f"OPTIONS sip:{proxy.host}:{port};transport={transport.lower()} SIP/2.0\r\n"
                f"Via: SIP/2.0/{transport} {local[0]}:{local[1]};branch=z9hG4bK-{transport}\r\n"
                f"From: <sip:probe@{local[0]}>;tag=p\r\nTo: <sip:{proxy.host}>\r\n"
                f"Call-ID: stream-{transport}\r\nCSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\n"
                "Content-Length: 0\r\n\r\n"
            ).encode()
        )
        return sock.recv(4096).decode(errors="replace")

    calls = Calls()
    calls.echo = True
    async with make_node(calls, max_calls=4) as node:
        with run_kamailio([node.config.port], ping_s=NO_PROBES_S, tls=True) as proxy:
            assert proxy.tls_port is not None
            tls_port = proxy.tls_port

            def over_tcp() -> str:
                with socket.create_connection((proxy.host, proxy.port), timeout=5) as tcp:
                    return options_over(tcp, proxy, "TCP")

            def over_tls() -> str:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                with (
                    socket.create_connection((proxy.host, tls_port), timeout=5) as raw,
                    context.wrap_socket(raw) as tls,
                ):
                    return options_over(tls, proxy, "TLS")

            # (in threads: the node's front runs on this event loop)
            assert (await asyncio.to_thread(over_tcp)).startswith("SIP/2.0 200 OK")
            assert (await asyncio.to_thread(over_tls)).startswith("SIP/2.0 200 OK")
            # A call over TLS to the proxy, over UDP from the proxy to the node: answered,
            # its tone echoed, and its BYE through the proxy ends it on the node.
            result = await dial(
                f"sip:bot@{proxy.host}:{proxy.tls_port};transport=tls",
                play=tone(440.0, 2.0),
                play_at_s=0.2,
                record_seconds=3.0,
            )
            hears_own_tone(result, 440.0)
            await wait_until(lambda: bool(calls.ended()), 10, "the call ended on the node")
