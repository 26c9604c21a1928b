"""The node's SIP front: one UDP port that routes each Call-ID to one worker process.

The front is not a proxy (it adds no Via, keeps Max-Forwards): it is a Call-ID-sticky
datagram relay in front of ``SipEndpoint`` worker processes, so that the node looks like one
SIP endpoint at ``host:port``.

- A request is routed by its Call-ID. A new INVITE goes to the least-loaded worker with a free
  call slot; later requests with the same Call-ID (retransmissions, CANCEL, the ACK of a
  non-2xx, a re-INVITE sent here) go to the same worker.
- Each Call-ID gets its own relay socket towards its worker. The front adds ``rport`` to the
  top Via (RFC 3581) so that pjsip answers to the source of the request, i.e. the relay
  socket; whatever the worker sends there is passed back, unchanged, from the front's own
  port to the client's address. The client sees ``rport=<relay port>;received=<host>`` in its
  Via, which RFC 3261 clients ignore.
- Every call passes the front both ways (docs/design.md, "One door"): a dialog-creating
  INVITE is record-routed twice (the relay socket towards the worker, the front towards the
  caller) and stamped for its worker (``telephony.front_token``), so the caller's ACK, BYE
  and re-INVITEs come back here, and the worker's BYE leaves from here with the front's Via
  on top (the caller's response to it comes back here and goes on to the worker). Inside a
  call the front answers OPTIONS (200), INFO (a DTMF key to the call, else 415), and
  SUBSCRIBE, MESSAGE, PUBLISH, REGISTER (405) itself.
- When every worker is full (or none is up) a new INVITE gets a stateless ``503`` with
  ``Retry-After``. A worker's slots count as taken while its pjsua still holds them for
  calls that are over (``WorkerSlot.ending``: a BYE to a caller that has gone lasts
  64*T1); a worker's ``486`` (pjsua with no slot left) goes out as ``503`` + Retry-After.
  An INVITE the worker does not answer at all within ``SILENT_INVITE_S`` (pjsip drops some
  malformed ones) stops holding a call slot, so junk cannot fill the node.
- Before anything is made for a datagram (in this order): the flood guard
  (``telephony.floodguard``: per-source and node-wide rates, bans) drops it unanswered if
  its source is over a limit; a request with no Via to answer along is dropped; a request
  the checks of ``telephony.sipcheck`` find malformed gets a stateless 400 (505 for another
  SIP version); responses and junk are dropped and counted, except the registrar's
  responses to the node's own REGISTERs (``telephony.registration``), handed to it.
- A request for a Call-ID the front does not route is answered here, statelessly, unless it
  is a new INVITE: 501/405 for methods the node does not take, 420 for an unknown Require,
  416 for an unknown URI scheme, 481 for CANCEL, BYE and the other in-dialog methods and a
  To-tagged INVITE, 200 for OPTIONS (503 while draining); an ACK is absorbed. So no request
  but a new INVITE gets a relay socket or reaches a worker.
- With peers configured (``telephony.peers``) a new INVITE from anyone else gets 403 (or a
  401 challenge); while draining (``SipServer.drain``), 503 with Retry-After.
- Everything that goes on to a worker is answered there (415, 488, ...) exactly as a single
  ``SipEndpoint`` would.

See docs/design.md, "The SIP front's defences".
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from telephony import front_token
from telephony.dialog_requests import dtmf_key, neutral_response
from telephony.floodguard import GUARD_KEYS, FloodGuard, FrontLimits
from telephony.peers import CallerGate
from telephony.registration import Registration
from telephony.sip_stream import (
    BRANCH_PREFIX,
    STREAM_KEYS,
    StreamConn,
    creates_dialog,
    drop_routes,
    insert_headers,
    own_branch,
    pop_own_via,
)
from telephony.sipcheck import (
    ALLOW,
    IN_DIALOG_ONLY,
    SUPPORTED,
    Rejection,
    accept_rejection,
    check_request,
    method_rejection,
    require_unsupported,
    scheme_rejection,
)
from telephony.sipmsg import (
    SipScan,
    first_comma,
    head_end_at,
    scan,
    top_via_parm,
)

log = logging.getLogger(__name__)

Addr = tuple[Any, ...]  # (host, port) or the 4-tuple of AF_INET6

T1_S = 0.5
TRANSACTION_S = 64 * T1_S  # RFC 3261 timer B/H: the longest a transaction lives
# An INVITE the worker has not answered at all (pjsip answers a valid one with 100 at once,
# and drops some unparseable ones silently) stops holding a call slot after this long.
SILENT_INVITE_S = 2 * T1_S
SWEEP_S = 0.5
MAX_DATAGRAM = 65535

_RPORT = re.compile(rb";\s*rport\s*(=\s*\d*\s*)?(?=;|$)", re.I)
_BARE_RPORT = re.compile(rb";\s*rport\s*(?=;|$)", re.I)
_RECEIVED = re.compile(rb";\s*received\s*=", re.I)
_TAG = re.compile(rb";\s*tag\s*=", re.I)
_FROM_USER = re.compile(rb"sips?:([^@;>\s]+)@", re.I)
# Enough of a response to see whether it ends an INVITE transaction (checked on every datagram
# a worker sends back, so no full parse).
_CSEQ_INVITE = re.compile(rb"(?im)^(?:cseq)[ \t]*:[ \t]*\d+[ \t]+INVITE\b")
# Enough of a Via to answer with (the answer goes to the datagram's source).
_VIA = re.compile(rb"SIP\s*/\s*\d+\.\d+\s*/\s*[A-Za-z]+\s+[^\s;,]+")
OPTIONS_HEADERS = (
    ("Allow", ", ".join(ALLOW)),
    ("Accept", "application/sdp"),
    ("Supported", ", ".join(SUPPORTED)),
)


def with_rport(data: bytes, msg: SipScan) -> bytes:
    """``data`` with ``;rport`` added to the top Via, unless it has one (RFC 3581).

    The insertion is made in the raw bytes, after the last non-blank byte of the first
    via-parm, so folding, compact names and the body (and its Content-Length) are untouched.
    """
    via = msg.get("via")
    if via is None or _RPORT.search(top_via_parm(via.value)):
        return data
    at = first_comma(data, via.value_start, via.value_end)
    while at > via.value_start and data[at - 1] in b" \t\r\n":
        at -= 1
    return data[:at] + b";rport" + data[at:]


def with_contact(data: bytes, msg: SipScan, src: Addr) -> tuple[bytes, SipScan]:
    """An INVITE without Contact (RFC 2543 did not require one), given the address it came
    from as its Contact, which pjsip requires (RFC 3261 8.1.1.8; RFC 4475 3.4.1, INV2543,
    asks that such an INVITE be taken). The user part is the From's."""
    frm = msg.get("from")
    user = _FROM_USER.search(frm.value) if frm is not None else None
    host = str(src[0])
    where = f"[{host}]:{src[1]}" if ":" in host else f"{host}:{src[1]}"
    contact = b"Contact: <sip:" + (user.group(1) + b"@" if user else b"") + where.encode()
    data = insert_headers(data, msg, [contact + b">\r\n"])
    return data, scan(data)


def _stamp_via(value: bytes, src: Addr) -> bytes:
    """Top via-parm with ``received`` and a filled-in ``rport`` (RFC 3261 18.2.1, RFC 3581)."""
    cut = first_comma(value, 0, len(value))
    parm, rest = value[:cut].rstrip(), value[cut:]
    parm = _BARE_RPORT.sub(lambda _m: b";rport=" + str(src[1]).encode(), parm, count=1)
    if not _RECEIVED.search(parm):
        parm += b";received=" + str(src[0]).encode()
    return parm + rest


def _to_tag(msg: SipScan) -> bytes:
    """Stable To tag: a retransmitted request gets the same stateless response."""
    h = hashlib.blake2s(digest_size=6)
    for name in ("call-id", "via", "cseq", "from"):
        hdr = msg.get(name)
        h.update(hdr.value if hdr is not None else b"-")
        h.update(b"\0")
    return h.hexdigest().encode()


def _has_tag(to_value: bytes) -> bool:
    gt = to_value.rfind(b">")
    return bool(_TAG.search(to_value[gt + 1 :] if gt >= 0 else to_value))


def stateless_response(
    msg: SipScan,
    code: int,
    reason: str,
    src: Addr,
    *,
    extra: Sequence[tuple[str, str]] = (),
    server: str = "",
) -> bytes:
    """A response built from the request alone (RFC 3261 8.2.6, 16.11).

    Copies every Via (the top one stamped with ``received``/``rport``), From, To (with a
    tag added), Call-ID and CSeq; no body.
    """
    lines = [f"SIP/2.0 {code} {reason}".encode()]
    for n, via in enumerate(msg.all("via")):
        lines.append(b"Via: " + (_stamp_via(via.value, src) if n == 0 else via.value))
    for name, label in (("from", b"From"), ("to", b"To"), ("call-id", b"Call-ID")):
        hdr = msg.get(name)
        if hdr is None:
            continue
        value = hdr.value
        if name == "to" and code > 100 and not _has_tag(value):
            value += b";tag=" + _to_tag(msg)
        lines.append(label + b": " + value)
    cseq = msg.get("cseq")
    if cseq is not None:
        lines.append(b"CSeq: " + cseq.value)
    lines += [f"{k}: {v}".encode() for k, v in extra]
    if server:
        lines.append(b"Server: " + server.encode())
    lines.append(b"Content-Length: 0")
    return b"\r\n".join(lines) + b"\r\n\r\n"


DTMF_ACCEPT = "application/dtmf-relay, application/dtmf"


def _own_via_on_top(msg: SipScan) -> bool:
    via = msg.get("via")
    return via is not None and BRANCH_PREFIX in top_via_parm(via.value)


def _local_towards(family: int, addr: Addr) -> str:
    """The local address the kernel sends from towards ``addr`` (no packet is sent)."""
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(tuple(addr[:2]))
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1" if family == socket.AF_INET else "::1"


def invite_status(data: bytes) -> int:
    """Status code if ``data`` is a response to an INVITE, else 0."""
    if len(data) < 12 or not data.startswith(b"SIP/2.0 "):
        return 0
    code = data[8:11]
    if not code.isdigit():
        return 0
    head = data[: head_end_at(data, 0)]
    return int(code) if _CSEQ_INVITE.search(head) else 0


def busy_as_unavailable(data: bytes, retry_after_s: int) -> bytes:
    """A 486 response as 503 with ``Retry-After`` (the rest unchanged)."""
    eol = data.find(b"\n")
    if eol < 0:
        return data
    return (
        b"SIP/2.0 503 Service Unavailable\r\n"
        + f"Retry-After: {retry_after_s}\r\n".encode()
        + data[eol + 1 :]
    )


# --------------------------------------------------------------------------- the front


class WorkerSlot:
    """One worker process as the front sees it: where it listens and the calls routed to it."""

    def __init__(self, index: int, capacity: int) -> None:
        self.index = index
        self.capacity = capacity
        self.addr: Addr | None = None  # SIP address while the worker is up
        self.load = 0  # INVITEs routed here and not yet over
        #: Slots its pjsua still holds for calls that are over (their BYE not done: 64*T1
        #: when the caller has gone), as the worker reports them. Counted taken: pjsua
        #: answers 486 to a call beyond its slots, and a 486 sends no trunk elsewhere.
        self.ending = 0

    @property
    def free(self) -> int:
        return self.capacity - self.load - self.ending if self.addr is not None else 0

    def __repr__(self) -> str:
        return f"WorkerSlot({self.index}, addr={self.addr}, load={self.load}/{self.capacity})"


FRONT_KEYS = (
    "front_datagrams",
    "front_relayed_to_workers",
    "front_relayed_to_clients",
    "front_rejected_busy",
    "front_malformed",
    "front_answered_400",
    "front_answered_481",
    "front_dropped_responses",
    "front_dropped_acks",
    "front_keepalives",
    "front_relay_foreign",
    "front_route_overflow",
    "front_send_errors",
    "front_answered_505",
    "front_answered_options",
    "front_rejected_request",
    "front_rejected_draining",
    "front_rejected_forbidden",
    "front_challenged",
    "front_registration_responses",
    "front_busy_rewritten",  # a worker's 486 passed on as 503 + Retry-After
    "front_unacked",  # calls whose caller never ACKed the 200 OK
    "front_dialog_options",  # in-dialog OPTIONS (a PBX's keepalive) answered here
    "front_dialog_keys",  # in-dialog INFO with a DTMF key, passed to the call
    "front_dialog_info_refused",  # in-dialog INFO of another kind: 415
    "front_dialog_refused",  # in-dialog SUBSCRIBE, MESSAGE, PUBLISH, REGISTER: 405
    "front_responses_relayed",  # a caller's response to a worker's request (its BYE)
    "front_unconfirmed_refused",  # a source over max_unconfirmed_per_source: 503
    "front_dropped_stopping",  # a request of no routed call while the node stops
    *GUARD_KEYS,
    *STREAM_KEYS,
)


@dataclass(slots=True, eq=False)
class _Route:
    call_id: str
    worker: WorkerSlot
    client: Addr
    relay: _Relay | None = None
    #: The caller's TCP or TLS connection (None: a UDP caller, answered from the front's port).
    conn: StreamConn | None = None
    #: The front's own ``host:port`` as a UDP caller reaches it (its Record-Route and Via).
    own: bytes = b""
    #: Counted in its source's unconfirmed calls (``max_unconfirmed_per_source``) until
    #: its INVITE's answer is ACKed, refused, or the route ends.
    unconfirmed: str | None = None
    holds_slot: bool = False  # counted in worker.load (an INVITE not yet over)
    responded: bool = False  # the worker has sent something back for this Call-ID
    invite_at: float = 0.0  # when the INVITE holding the slot was forwarded
    answered: bool = False  # a 2xx to the INVITE went back to the client
    started: bool = False  # the node reported the call's media up: never idles out
    invite_cseq: int = -1
    last_seen: float = 0.0
    expires_at: float | None = None  # set once the call or transaction is over


class _Relay:
    """A UDP socket carrying one Call-ID's datagrams to its worker and back."""

    def __init__(self, front: SipFront, route: _Route) -> None:
        self.front = front
        self.route = route
        self.sock = socket.socket(front.family, socket.SOCK_DGRAM)
        try:
            self.sock.setblocking(False)
            self.sock.bind((front.relay_host, 0))
            front.loop.add_reader(self.sock.fileno(), self._readable)
        except OSError:
            self.sock.close()
            raise
        host, port = self.sock.getsockname()[:2]
        host = f"[{host}]" if ":" in host else host
        #: ``host:port`` of the socket: the worker-facing Record-Route of a stream caller.
        self.local = f"{host}:{port}".encode()

    def send(self, data: bytes, dest: Addr) -> None:
        try:
            self.sock.sendto(data, dest)
        except OSError as exc:
            self.front.counters["front_send_errors"] += 1
            log.debug("relay send to %s failed: %s", dest, exc)

    def _readable(self) -> None:
        for _ in range(64):
            try:
                data, src = self.sock.recvfrom(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. ICMP port unreachable reported on the socket
                log.debug("relay recv: %s", exc)
                return
            self.front.from_worker(self.route, data, src)

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self.front.loop.remove_reader(self.sock.fileno())
            self.sock.close()


class SipFront(asyncio.DatagramProtocol):
    """The UDP front of a ``SipServer``; see the module docstring for the routing rules."""

    def __init__(
        self,
        host: str,
        port: int,
        workers: Sequence[WorkerSlot],
        *,
        retry_after_s: int,
        server: str = "",
        idle_s: float = TRANSACTION_S,
        linger_s: float = TRANSACTION_S,
        ringing_s: float = 0.0,
        limits: FrontLimits | None = None,
        gate: CallerGate | None = None,
        public_host: str | None = None,
        stamp_key: bytes | None = None,
        on_key: Callable[[str, str, int], bool] | None = None,
    ) -> None:
        self.host, self.port = host, port
        #: The address callers are told to reach the front at (Record-Route, Via); None:
        #: the bound host, or for a wildcard the local address the kernel picks towards
        #: each caller.
        self.public_host = public_host
        #: The key of the stamp every new INVITE gets for its worker (``front_token``).
        self.stamp_key = stamp_key if stamp_key is not None else front_token.new_key()
        #: Hands an in-dialog INFO's DTMF key to the call of that Call-ID (True if taken).
        self.on_key = on_key
        self._towards: dict[str, bytes] = {}  # a wildcard front's local address per caller
        self._unconfirmed: dict[str, int] = {}  # source -> its routes' unconfirmed calls
        self.workers = workers
        self.retry_after_s = retry_after_s
        self.server = server
        self.idle_s = idle_s  # a route with no traffic and no call this long is dropped
        self.linger_s = linger_s  # a relay stays open this long after its call or transaction
        self.ringing_s = ringing_s  # extra time an unanswered INVITE may stay quiet
        self.limits = limits if limits is not None else FrontLimits()
        self.max_routes = self.limits.max_routes
        self.guard = FloodGuard(self.limits, time.monotonic())
        self.draining = False  # new calls get 503 + Retry-After (SIGTERM)
        self.stopping = False  # the node stops: only routed calls' traffic passes
        #: Places held by the node's calls of another transport (browser calls): counted
        #: against the node's call limit with the workers' own (``SipServer.hold_place``).
        self.held = 0
        self.gate = gate  # who may call (None: anyone)
        #: The node's registration with its registrars: gets their responses.
        self.registration: Registration | None = None
        self._overflow_logged = -1e9
        self.family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # Where relays bind and send: the front's own address (a wildcard means loopback).
        self.relay_host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        self.routes: dict[str, _Route] = {}
        self.counters = dict.fromkeys(FRONT_KEYS, 0)
        self.guard.counters = self.counters  # one table of counters, shared
        self.transport: asyncio.DatagramTransport | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.route_cost_s = 0.0  # CPU time spent in datagram_received (for stats)
        self._socket_closed = asyncio.Event()  # set once the bound socket is closed

    # lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        """Bind the front's UDP socket."""
        self._loop = asyncio.get_running_loop()
        transport, _ = await self._loop.create_datagram_endpoint(
            lambda: self, local_addr=(self.host, self.port), family=self.family
        )
        self.transport = transport
        self._socket_closed = asyncio.Event()
        self.port = int(transport.get_extra_info("sockname")[1])
        self._sweeper = self._loop.create_task(self._sweep_forever(), name="sip-front-sweep")

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("SipFront not started")
        return self._loop

    def stop_taking(self) -> None:
        """Take no request that belongs to no routed call (dropped unanswered, as on a
        closed port); the calls' own requests and responses still pass, both ways, until
        ``close``: the workers' BYEs leave from here and the callers' answers come back."""
        self.stopping = True

    def close(self) -> None:
        """Stop listening; relays stay until ``close_relays`` (final responses may follow)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    def close_relays(self) -> None:
        for route in list(self.routes.values()):
            self._drop(route)

    @property
    def relays_open(self) -> int:
        return sum(1 for r in self.routes.values() if r.relay is not None)

    # client side -----------------------------------------------------------------
    def datagram_received(self, data: bytes, addr: Addr) -> None:
        t0 = time.thread_time()  # CPU, not wall: preemption on a busy box is not our cost
        try:
            self._route(data, addr)
        finally:
            self.route_cost_s += time.thread_time() - t0

    def error_received(self, exc: Exception) -> None:
        log.debug("front socket error: %s", exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self._socket_closed.set()

    async def closed(self, timeout_s: float = 2.0) -> None:
        """Wait until the socket ``close`` let go of is closed (its port free again)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._socket_closed.wait(), timeout_s)

    def stream_received(self, data: bytes, conn: StreamConn) -> None:
        """One message framed off a TCP or TLS connection (``telephony.sip_stream``)."""
        t0 = time.thread_time()
        try:
            self._route(data, conn.peer, conn)
        finally:
            self.route_cost_s += time.thread_time() - t0

    def reply_on(self, conn: StreamConn, msg: SipScan, code: int, reason: str) -> None:
        """A stateless answer on a connection (its framing errors)."""
        self._reply(msg, code, reason, conn.peer, conn=conn)

    def _route(self, data: bytes, addr: Addr, conn: StreamConn | None = None) -> None:
        c = self.counters
        c["front_datagrams"] += 1
        now = time.monotonic()
        if not self.guard.admit(addr[0], now):
            return  # over a rate or banned: nothing made, nothing answered
        if conn is None and not data.strip(b"\r\n"):  # RFC 5626: CRLFCRLF ping, CRLF pong
            c["front_keepalives"] += 1
            if data == b"\r\n\r\n":
                self._reply_raw(b"\r\n", addr)
            return
        msg = scan(data)
        if msg.is_response and (conn is not None or _own_via_on_top(msg)):
            self._client_response(data, msg)
            return
        if msg.is_response and self.registration is not None and self.registration.response(msg):
            c["front_registration_responses"] += 1
            return
        if msg.is_response or not msg.method:
            key = "front_dropped_responses" if msg.is_response else "front_malformed"
            c[key] += 1
            return
        if self.stopping and (msg.call_id is None or msg.call_id not in self.routes):
            c["front_dropped_stopping"] += 1
            return
        via = msg.get("via")
        if via is None or not _VIA.match(via.value):
            c["front_malformed"] += 1  # nothing to answer with
            return
        call_id = msg.call_id
        route = self.routes.get(call_id) if call_id is not None else None
        if route is not None:  # checked when it made the route; the worker judges the rest
            if msg.method == "INVITE" and not self._admit_again(route, msg):
                self._reject_busy(msg, addr, conn)
                return
            answer = self._answer_in_dialog(route, data, msg)
            if answer is not None:
                self._reply(msg, answer.code, answer.reason, addr, answer.headers, conn=conn)
                return
            if msg.method == "ACK" and route.answered:
                self._confirm(route)
            route.client, route.conn = addr, conn
            self._forward(route, data, msg, now)
            return
        bad = check_request(data, msg)
        if bad is not None:
            c["front_malformed"] += 1
            if msg.method != "ACK":
                c["front_answered_400" if bad.code == 400 else "front_answered_505"] += 1
                self._reply(msg, bad.code, bad.reason, addr, bad.headers, conn=conn)
            return
        assert call_id is not None  # check_request requires one
        if msg.method == "ACK":  # nothing here to acknowledge: our answers need no ACK
            c["front_dropped_acks"] += 1
            return
        answer = self._answer_here(msg)
        if answer is not None:
            self._reply(msg, answer.code, answer.reason, addr, answer.headers, conn=conn)
            return
        # A new INVITE: the only request that makes anything here (a route, a relay).
        if self.gate is not None and not self.gate.open:
            verdict = self.gate.check(msg, addr[0], now)
            if verdict.answer is not None:
                if verdict.failed:
                    c["front_rejected_forbidden"] += 1
                    self.guard.auth_failed(addr[0], now)
                else:
                    c["front_challenged"] += 1
                answer = verdict.answer
                self._reply(msg, answer.code, answer.reason, addr, answer.headers, conn=conn)
                return
        worker = self._pick(need_slot=True)
        if worker is None or len(self.routes) >= self.max_routes:
            if worker is not None:
                c["front_route_overflow"] += 1
                if now - self._overflow_logged >= 60.0:
                    self._overflow_logged = now
                    log.warning(
                        "SIP front: %d routes (SWITCHBOARD_SIP__LIMITS__MAX_ROUTES): new "
                        "calls get 503",
                        self.max_routes,
                    )
            self._reject_busy(msg, addr, conn)
            return
        source = str(addr[0])
        spared = self.guard.upstream(source)
        if (
            not spared
            and self._unconfirmed.get(source, 0) >= self.limits.max_unconfirmed_per_source
        ):
            self.counters["front_unconfirmed_refused"] += 1
            self._reject_busy(msg, addr, conn)
            return
        route = _Route(call_id, worker, addr, conn=conn, last_seen=now)
        try:
            route.relay = _Relay(self, route)
        except OSError as exc:
            log.warning("no relay socket for %s: %s", call_id, exc)
            self._reject_busy(msg, addr, conn)
            return
        if conn is None:
            route.own = self._own_address(addr)
        if not spared:
            route.unconfirmed = source
            self._unconfirmed[source] = self._unconfirmed.get(source, 0) + 1
        self.routes[call_id] = route
        self._hold(route, msg)
        self._forward(route, data, msg, now)

    def _answer_here(self, msg: SipScan) -> Rejection | None:
        """The front's own answer to a request with no route, or None for a new call.

        In RFC 3261 8.2's order: the method (405, 501), Require (420), the Request-URI's
        scheme (416); then what needs no worker: a request of a dialog the front does not
        know (481), OPTIONS (200, or 503 while draining or with no worker up). Only an
        INVITE without a To tag goes on, to a worker.
        """
        c = self.counters
        method = msg.method
        answer = method_rejection(method)
        if answer is None and method != "CANCEL":
            tags = require_unsupported(msg)
            if tags:
                answer = Rejection(420, "Bad Extension", (("Unsupported", ", ".join(tags)),))
        if answer is None:
            answer = scheme_rejection(msg)
        if answer is not None:
            c["front_rejected_request"] += 1
            return answer
        to = msg.get("to")
        in_dialog = to is not None and _has_tag(to.value)
        if method in ("CANCEL", *IN_DIALOG_ONLY) or (method == "INVITE" and in_dialog):
            c["front_answered_481"] += 1
            return Rejection(481, "Call/Transaction Does Not Exist")
        if method == "OPTIONS":
            c["front_answered_options"] += 1
            if self.draining or not any(w.addr is not None for w in self.workers):
                return self._unavailable()
            return Rejection(200, "OK", OPTIONS_HEADERS)
        answer = accept_rejection(msg)
        if answer is not None:
            c["front_rejected_request"] += 1
            return answer
        if self.draining:
            c["front_rejected_draining"] += 1
            return Rejection(
                503, "Service Unavailable", (("Retry-After", str(self.retry_after_s)),)
            )
        return None

    def _answer_in_dialog(self, route: _Route, data: bytes, msg: SipScan) -> Rejection | None:
        """The front's own answer to a request inside a routed call, or None to forward it.

        OPTIONS (a PBX's or SBC's session keepalive): 200 while the call lasts. INFO with a
        DTMF key: the key goes to the call, 200; any other INFO: 415 with what is accepted.
        SUBSCRIBE, MESSAGE, PUBLISH, REGISTER: 405, as outside a call.
        """
        method = msg.method
        c = self.counters
        if method == "OPTIONS":
            c["front_dialog_options"] += 1
            return Rejection(200, "OK", OPTIONS_HEADERS)
        if method == "INFO":
            key = dtmf_key(msg, data)
            if key is None:
                c["front_dialog_info_refused"] += 1
                return Rejection(415, "Unsupported Media Type", (("Accept", DTMF_ACCEPT),))
            taken = self.on_key is not None and self.on_key(route.call_id, key[0], key[1])
            if not taken:
                return Rejection(481, "Call/Transaction Does Not Exist")
            c["front_dialog_keys"] += 1
            return Rejection(200, "OK")
        answer = method_rejection(method)
        if answer is not None and answer.code == 405:
            c["front_dialog_refused"] += 1
            return answer
        return None

    def _own_address(self, addr: Addr) -> bytes:
        """``host:port`` of the front as the caller at ``addr`` reaches it over UDP."""
        host = self.public_host or self.host
        if host in ("", "0.0.0.0", "::"):
            ip = str(addr[0])
            host_b = self._towards.get(ip)
            if host_b is None:
                host_b = _local_towards(self.family, addr).encode()
                if len(self._towards) >= 4096:
                    self._towards.clear()
                self._towards[ip] = host_b
            host = host_b.decode()
        host = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return f"{host}:{self.port}".encode()

    @property
    def places_taken(self) -> int:
        """The node's call places taken: calls routed to workers and not over, slots their
        pjsua still holds for calls that are over, and places held by other transports."""
        return sum(w.load + w.ending for w in self.workers) + self.held

    @property
    def places(self) -> int:
        """The node's call places: every worker's slots."""
        return sum(w.capacity for w in self.workers)

    def _pick(self, *, need_slot: bool) -> WorkerSlot | None:
        if need_slot and self.places_taken >= self.places:
            return None
        up = [w for w in self.workers if w.addr is not None and (w.free > 0 or not need_slot)]
        if not up:
            return None
        return min(up, key=lambda w: ((w.load + w.ending) / max(w.capacity, 1), w.index))

    def _hold(self, route: _Route, msg: SipScan) -> None:
        route.holds_slot = True
        route.worker.load += 1
        route.responded = False
        route.invite_at = time.monotonic()
        cseq = msg.cseq
        route.invite_cseq = cseq[0] if cseq else route.invite_cseq
        route.expires_at = None

    def _admit_again(self, route: _Route, msg: SipScan) -> bool:
        """An INVITE on a known Call-ID: retransmission, re-INVITE, or a new attempt.

        A new attempt (higher CSeq after a final non-2xx, e.g. after a 401) needs a slot on
        the same worker again. Returns False if it cannot have one.
        """
        cseq = msg.cseq
        if route.holds_slot or route.answered or route.started:
            return True
        if cseq is None or cseq[0] <= route.invite_cseq:
            return True  # a retransmission: the worker answers it from its transaction
        if route.worker.free <= 0:
            return False
        self._hold(route, msg)
        return True

    def _forward(self, route: _Route, data: bytes, msg: SipScan, now: float) -> None:
        route.last_seen = now
        addr = route.worker.addr
        if addr is None or route.relay is None:
            return
        self.counters["front_relayed_to_workers"] += 1
        if route.conn is None and msg.method == "INVITE" and msg.get("contact") is None:
            data, msg = with_contact(data, msg, route.client)
        data, msg = self._towards_worker(route, route.relay, data, msg)
        route.relay.send(with_rport(data, msg), addr)

    def _towards_worker(
        self, route: _Route, relay: _Relay, data: bytes, msg: SipScan
    ) -> tuple[bytes, SipScan]:
        """A caller's request as its worker gets it: the front's Route values gone, a
        dialog-creating INVITE record-routed twice (the relay socket, what the worker sees
        first, and the front as the caller reaches it: RFC 5658's double Record-Route) and
        stamped for the worker (``front_token``). So every later request of the call, both
        ways, passes the front (``telephony.sip_stream`` says the same for TCP and TLS)."""
        conn = route.conn
        own = conn.local if conn is not None else route.own
        kept = drop_routes(data, msg, {relay.local, own})
        if kept is not data:
            data, msg = kept, scan(kept)
        if creates_dialog(msg):
            front_rr = conn.record_route if conn is not None else b"<sip:" + own + b";lr>"
            lines = [
                b"Record-Route: <sip:" + relay.local + b";lr>\r\n",
                b"Record-Route: " + front_rr + b"\r\n",
                front_token.header_line(self.stamp_key, route.call_id),
            ]
            data = insert_headers(data, msg, lines)
            msg = scan(data)
        return data, msg

    def _client_response(self, data: bytes, msg: SipScan) -> None:
        """A caller's response to a worker's request (its BYE, a REFER): to the worker,
        less the front's Via."""
        route = self.routes.get(msg.call_id or "")
        rest = pop_own_via(data, msg)
        if route is None or route.relay is None or route.worker.addr is None or rest is None:
            self.counters["front_dropped_responses"] += 1
            return
        route.last_seen = time.monotonic()
        key = "front_responses_relayed" if route.conn is None else "front_stream_responses_relayed"
        self.counters[key] += 1
        route.relay.send(rest, route.worker.addr)

    def _unavailable(self) -> Rejection:
        return Rejection(503, "Service Unavailable", (("Retry-After", str(self.retry_after_s)),))

    def _reject_busy(self, msg: SipScan, addr: Addr, conn: StreamConn | None = None) -> None:
        self.counters["front_rejected_busy"] += 1
        if msg.method != "ACK":
            extra = (("Retry-After", str(self.retry_after_s)),)
            self._reply(msg, 503, "Service Unavailable", addr, extra, conn=conn)

    def _reply(
        self,
        msg: SipScan,
        code: int,
        reason: str,
        addr: Addr,
        extra: Sequence[tuple[str, str]] = (),
        *,
        conn: StreamConn | None = None,
    ) -> None:
        response = stateless_response(msg, code, reason, addr, extra=extra, server=self.server)
        if conn is not None:
            conn.send(response)
        else:
            self._reply_raw(response, addr)

    def send_raw(self, data: bytes, addr: Addr) -> None:
        """Send a datagram from the front's own port (the registration's requests)."""
        self._reply_raw(data, addr)

    def _reply_raw(self, data: bytes, addr: Addr) -> None:
        if self.transport is None:
            return
        try:
            self.transport.sendto(data, addr)
        except OSError:
            self.counters["front_send_errors"] += 1

    # worker side -----------------------------------------------------------------
    def from_worker(self, route: _Route, data: bytes, src: Addr) -> None:
        """A datagram the worker sent to this Call-ID's relay socket: pass it back."""
        if route.worker.addr is None or tuple(src[:2]) != tuple(route.worker.addr[:2]):
            self.counters["front_relay_foreign"] += 1
            return
        route.last_seen = time.monotonic()
        route.responded = True
        self.counters["front_relayed_to_clients"] += 1
        data = neutral_response(data)
        code = invite_status(data)
        if code == 486:
            # pjsua's own answer when it has no call slot left: a trunk or proxy retries
            # another node on 503, not on 486 (the front's count should prevent it).
            data = busy_as_unavailable(data, self.retry_after_s)
            code = 503
            self.counters["front_busy_rewritten"] += 1
        if route.conn is None:
            self._reply_raw(self._towards_client(route, data), route.client)
        elif not route.conn.send(self._towards_client(route, data)):
            self.counters["front_stream_lost"] += 1
        if route.expires_at is None and (route.holds_slot or not route.answered):
            if code >= 300:
                self._release(route)
            elif code >= 100 and not route.holds_slot:  # answered late after a silence
                route.holds_slot = True
                route.worker.load += 1
            if 200 <= code < 300:
                route.answered = True

    def stream_conns_in_use(self) -> set[StreamConn]:
        """The TCP and TLS connections that routes (calls, transactions) still need."""
        return {r.conn for r in self.routes.values() if r.conn is not None}

    def _towards_client(self, route: _Route, data: bytes) -> bytes:
        """What the worker sent as the caller gets it: a request (its BYE) without the
        front's Route values and with the front's Via on top, so that the caller's response
        comes back through the front; a response unchanged."""
        if data.startswith(b"SIP/2.0 ") or route.relay is None:
            return data
        msg = scan(data)
        if msg.is_response:
            return data
        conn = route.conn
        own = conn.local if conn is not None else route.own
        kept = drop_routes(data, msg, {route.relay.local, own})
        if kept is not data:
            data, msg = kept, scan(kept)
        if conn is not None:
            via = conn.via(own_branch(msg))
        else:
            via = b"SIP/2.0/UDP " + own + b";branch=" + own_branch(msg) + b";rport"
        return insert_headers(data, msg, [b"Via: " + via + b"\r\n"])

    # node hooks ------------------------------------------------------------------
    def call_started(self, call_id: str) -> None:
        """The call's media is up in its worker: keep the route for the call's lifetime."""
        route = self.routes.get(call_id)
        if route is not None:
            route.started = route.answered = True
            route.expires_at = None

    def call_finished(self, call_id: str) -> None:
        """The call ended in its worker: its route lets go of its slot (the worker's
        ``ending`` count keeps it taken while pjsua still holds it); the relay lingers for
        retransmits."""
        route = self.routes.get(call_id)
        if route is not None:
            route.started = False
            self._release(route)

    def call_unacked(self, call_id: str) -> None:
        """The caller never ACKed the call's 200 OK: counted against its source."""
        route = self.routes.get(call_id)
        if route is None:
            return
        self.counters["front_unacked"] += 1
        self.guard.unacked(str(route.client[0]), time.monotonic())

    def worker_down(self, worker: WorkerSlot) -> None:
        """The worker died: forget its routes (its calls are gone) and free its slots."""
        for route in [r for r in self.routes.values() if r.worker is worker]:
            self._drop(route)
        worker.load = worker.ending = 0

    def _confirm(self, route: _Route) -> None:
        """The route's call no longer counts among its source's unconfirmed ones."""
        source, route.unconfirmed = route.unconfirmed, None
        if source is not None:
            left = self._unconfirmed.get(source, 1) - 1
            if left > 0:
                self._unconfirmed[source] = left
            else:
                self._unconfirmed.pop(source, None)

    def _unhold(self, route: _Route) -> None:
        if route.holds_slot:
            route.holds_slot = False
            route.worker.load = max(0, route.worker.load - 1)

    def _release(self, route: _Route) -> None:
        self._unhold(route)
        self._confirm(route)
        route.expires_at = time.monotonic() + self.linger_s

    def _drop(self, route: _Route) -> None:
        self._unhold(route)
        self._confirm(route)
        if route.relay is not None:
            route.relay.close()
            route.relay = None
        if self.routes.get(route.call_id) is route:
            del self.routes[route.call_id]

    def sweep(self, now: float) -> None:
        """Close relays whose call or transaction is over, and quiet routes with no call.

        An INVITE the worker never answered stops holding its slot after
        ``SILENT_INVITE_S``: junk INVITEs must not fill the node for a whole transaction time.
        """
        self.guard.sweep(now)
        quiet_limit = self.idle_s + self.ringing_s
        for route in list(self.routes.values()):
            if route.holds_slot and not route.responded and now - route.invite_at > SILENT_INVITE_S:
                self._unhold(route)
            if route.expires_at is not None:
                if now >= route.expires_at:
                    self._drop(route)
            elif not route.started and now - route.last_seen > quiet_limit:
                self._drop(route)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_S)
            self.sweep(time.monotonic())
