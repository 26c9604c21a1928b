"""SIP over TCP and TLS at the node's front (RFC 3261 18.3, RFC 5626 3.5.1 keep-alives).

A connection's bytes are cut into messages by their Content-Length (``next_frame``); each
message then goes through the same front as a datagram does (``SipFront``: flood guard,
checks, peers, routing by Call-ID to a worker), with the connection to answer on. The
workers keep speaking UDP. Unlike a UDP caller, a caller on a connection needs every
request and response of its dialog on that connection, so for those calls the front stays
on the route in both directions, as a record-routing proxy would (RFC 3261 16.6, the
double Record-Route of RFC 5658):

- A dialog-creating INVITE gets two Record-Route values on top: the call's relay socket
  (``<sip:relay;lr>``, what the worker sees first and sends its in-dialog requests to, and
  builds its UDP Contact from) and the front's address on this connection's transport
  (``<sip:front;transport=tcp;lr>``, what the caller sees first). The worker copies both
  into its 2xx, so the caller's ACK, BYE and re-INVITEs come to the front's connection.
- A request arriving with Route values naming the front (those two) loses them.
- A request from the worker (its BYE) gets the front's own Via on top before it goes to the
  caller's connection; the caller's response to it comes back on the connection, loses that
  Via and goes to the worker.
- Responses from the worker go to the connection unchanged (the caller's Via is on top).

A connection that breaks a message's framing (no Content-Length, a header section or body
over ``max_message_bytes``) gets a 400 (or 413) where it can be answered and is closed; a
well-framed message that is malformed gets its 400 like a datagram, and the connection goes
on serving its other calls. Connections are bounded in number (node-wide and per source)
and closed after ``idle_s`` without a message; a CRLFCRLF ping gets a CRLF pong.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from telephony.floodguard import FloodGuard
from telephony.sipmsg import SipScan, first_comma, scan

log = logging.getLogger(__name__)

Proto = Literal["TCP", "TLS"]
#: Branch prefix of the Via the front puts on the worker's requests to a stream caller.
BRANCH_PREFIX = b"z9hG4bK-sbf-"
PING = b"\r\n\r\n"
TLS_HANDSHAKE_S = 10.0
PONG = b"\r\n"


class StreamFront(Protocol):
    """What connections need of the node's SIP front (``telephony.sip_dispatch.SipFront``):
    its counters and flood guard, and where each framed message goes."""

    counters: dict[str, int]
    guard: FloodGuard

    def stream_received(self, data: bytes, conn: StreamConn) -> None: ...

    def reply_on(self, conn: StreamConn, msg: SipScan, code: int, reason: str) -> None: ...

    def stream_conns_in_use(self) -> set[StreamConn]: ...


STREAM_KEYS = (
    "front_stream_connections",  # accepted
    "front_stream_refused",  # over a bound (node-wide, per source) or a banned source
    "front_stream_messages",
    "front_stream_framing_errors",  # connection closed: its framing was lost
    "front_stream_idle_closed",
    "front_stream_lost",  # a message for a caller whose connection has gone
    "front_stream_responses_relayed",  # a stream caller's response to a worker's request
)

_CONTENT_LENGTH = re.compile(rb"\A\s*(\d{1,9})\s*\Z")


class StreamSettings(BaseModel):
    """SIP over TCP and TLS (``SWITCHBOARD_SIP__STREAM__<FIELD>``); UDP is always on."""

    model_config = ConfigDict(extra="forbid")

    #: Listen for SIP over TCP on the node's SIP port as well.
    tcp: bool = False
    #: Listen for SIP over TLS on ``tls_port`` (needs ``tls_cert_file`` and ``tls_key_file``).
    tls: bool = False
    tls_port: int = Field(5061, ge=0, le=65535)
    #: PEM certificate chain and private key the node presents.
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    #: Connections open at once (node-wide, and from one source address).
    max_connections: int = Field(1024, ge=1)
    max_per_source: int = Field(64, ge=1)
    #: A connection with no message (nor ping) this long is closed.
    idle_s: float = Field(300.0, gt=0.0)
    #: Largest message (header section plus body) taken from a connection.
    max_message_bytes: int = Field(65_536, ge=1024, le=1_048_576)

    @model_validator(mode="after")
    def _tls_needs_files(self) -> StreamSettings:
        if self.tls and (self.tls_cert_file is None or self.tls_key_file is None):
            raise ValueError("stream: tls needs tls_cert_file and tls_key_file")
        return self

    def server_context(self) -> ssl.SSLContext:
        """The TLS server context (TLS 1.2 or later) with the configured certificate."""
        if self.tls_cert_file is None or self.tls_key_file is None:
            raise ValueError("stream: tls needs tls_cert_file and tls_key_file")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(str(self.tls_cert_file), str(self.tls_key_file))
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(
                f"stream: cannot load the TLS certificate {self.tls_cert_file} with the key "
                f"{self.tls_key_file}: {exc.strerror or exc}"
            ) from exc
        return ctx


# --------------------------------------------------------------------------- framing


@dataclass(frozen=True, slots=True)
class Frame:
    """What ``next_frame`` found at the start of a connection's buffer."""

    kind: Literal["need", "ping", "message", "error"]
    #: Bytes of the buffer this frame used (0 for "need" and "error").
    used: int = 0
    message: bytes = b""
    #: For "error": the status to answer with (0: none) and its reason.
    code: int = 0
    reason: str = ""


def next_frame(buf: bytes | bytearray, max_bytes: int) -> Frame:
    """Cut the first message (or keep-alive) off a stream's buffer (RFC 3261 18.3).

    Leading CRLFs between messages are skipped; a CRLFCRLF there is an RFC 5626 ping.
    A message needs a Content-Length on a stream: without one its end cannot be known.
    """
    skip = 0
    while skip < len(buf) and buf[skip : skip + 1] in (b"\r", b"\n"):
        if buf[skip : skip + 4] == PING:
            return Frame("ping", used=skip + 4)
        skip += 1
    if skip == len(buf):
        # A lone CRLF may be the start of a ping: wait for more, unless it is all there is
        # and cannot become one (kept bounded by the caller's buffer limit).
        return Frame("need") if skip < 4 else Frame("ping", used=skip)
    end = bytes(buf[skip : skip + max_bytes + 4]).find(b"\r\n\r\n")
    if end < 0:
        if len(buf) - skip > max_bytes:
            return Frame("error", code=513, reason="Message Too Large")
        return Frame("need")
    head_end = skip + end + 4
    head = bytes(buf[skip:head_end])
    msg = scan(head)
    lengths = msg.all("content-length")
    if not lengths:
        return Frame("error", code=400, reason="Missing Content-Length")
    values = {h.value for h in lengths}
    m = _CONTENT_LENGTH.match(lengths[0].value)
    if m is None or len(values) > 1:
        return Frame("error", code=400, reason="Bad Content-Length")
    total = head_end + int(m.group(1))
    if total - skip > max_bytes:
        return Frame("error", code=513, reason="Message Too Large")
    if len(buf) < total:
        return Frame("need")
    return Frame("message", used=total, message=bytes(buf[skip:total]))


# --------------------------------------------------------------------------- rewriting


def _header_line(name: bytes, value: bytes) -> bytes:
    return name + b": " + value + b"\r\n"


def insert_headers(data: bytes, msg: SipScan, lines: list[bytes]) -> bytes:
    """``data`` with header ``lines`` (each ending CRLF) put first, after the start line."""
    at = msg.head_start
    return data[:at] + b"".join(lines) + data[at:]


def _values(data: bytes, start: int, end: int) -> list[bytes]:
    out = []
    while start < end:
        cut = first_comma(data, start, end)
        value = data[start:cut].strip()
        if value:
            out.append(value)
        start = cut + 1
    return out


def _line_span(data: bytes, value_start: int, value_end: int) -> tuple[int, int]:
    """The whole header line holding a value: from its name to after its line end."""
    begin = data.rfind(b"\n", 0, value_start) + 1
    after = value_end
    if data.startswith(b"\r\n", after):
        after += 2
    elif data.startswith(b"\n", after):
        after += 1
    return begin, after


def drop_routes(data: bytes, msg: SipScan, ours: set[bytes]) -> bytes:
    """``data`` without the Route values whose URI's host:port is in ``ours``.

    Route lines are rewritten only when one of their values is ours; the others keep
    their order (RFC 3261 16.4: a proxy removes the Route values naming it).
    """
    routes = msg.all("route")
    if not routes:
        return data
    keep: list[bytes] = []
    dropped = False
    for h in routes:
        for value in _values(data, h.value_start, h.value_end):
            if route_target(value) in ours:
                dropped = True
            else:
                keep.append(value)
    if not dropped:
        return data
    out = data
    for h in reversed(routes):  # from the end: earlier offsets stay valid
        begin, after = _line_span(out, h.value_start, h.value_end)
        out = out[:begin] + out[after:]
    if keep:
        out = insert_headers(out, scan(out), [_header_line(b"Route", b", ".join(keep))])
    return out


_URI_HOSTPORT = re.compile(rb"<?\s*sips?:(?:[^@;>]*@)?(\[[^\]]+\]|[^:;>]+)(?::(\d+))?", re.I)


def route_target(value: bytes) -> bytes:
    """``host:port`` of a Route/Record-Route value's URI, lower-case (b"" if none)."""
    m = _URI_HOSTPORT.search(value)
    if m is None:
        return b""
    host = m.group(1).strip().lower()
    return host + b":" + (m.group(2) or b"5060")


def pop_own_via(data: bytes, msg: SipScan) -> bytes | None:
    """``data`` without its top via-parm if it is the front's own, else None."""
    via = msg.get("via")
    if via is None:
        return None
    cut = first_comma(data, via.value_start, via.value_end)
    if BRANCH_PREFIX not in data[via.value_start : cut]:
        return None
    if cut < via.value_end:  # more via-parms on the same line: drop the first and its comma
        rest = cut + 1
        while rest < via.value_end and data[rest] in b" \t\r\n":
            rest += 1
        return data[: via.value_start] + b" " + data[rest:]
    begin, after = _line_span(data, via.value_start, via.value_end)
    return data[:begin] + data[after:]


def own_branch(msg: SipScan) -> bytes:
    """A branch for the front's Via, stable for retransmissions of the same request."""
    via = msg.get("via")
    seed = via.value if via is not None else b""
    cseq = msg.get("cseq")
    seed += cseq.value if cseq is not None else b""
    return BRANCH_PREFIX + hashlib.blake2s(seed, digest_size=8).hexdigest().encode()


def creates_dialog(msg: SipScan) -> bool:
    """An INVITE with no To tag: the request whose route the dialog keeps."""
    if msg.method != "INVITE":
        return False
    to = msg.get("to")
    return to is not None and re.search(rb";\s*tag\s*=", to.value, re.I) is None


# --------------------------------------------------------------------------- connections


def _host_port(addr: Any) -> bytes:
    host = str(addr[0])
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{addr[1]}".encode()


class StreamConn(asyncio.Protocol):
    """One TCP or TLS connection to the front."""

    def __init__(self, listener: StreamListener) -> None:
        self.listener = listener
        self.front = listener.front
        self.proto: Proto = listener.proto
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[Any, ...] = ("", 0)
        #: The front's own ``host:port`` on this connection (its Via and Record-Route).
        self.local = b""
        self._buf = bytearray()
        self.last_seen = time.monotonic()

    @property
    def open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    @property
    def record_route(self) -> bytes:
        """The Record-Route (and Route) value naming the front on this connection."""
        return b"<sip:" + self.local + b";transport=" + self.proto.lower().encode() + b";lr>"

    def via(self, branch: bytes) -> bytes:
        return b"SIP/2.0/" + self.proto.encode() + b" " + self.local + b";branch=" + branch

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peer = tuple(transport.get_extra_info("peername") or ("", 0))
        self.local = _host_port(transport.get_extra_info("sockname") or ("", 0))
        if not self.listener.admit(self):
            transport.abort()
            self.transport = None

    def data_received(self, data: bytes) -> None:
        self.last_seen = time.monotonic()
        self._buf += data
        limit = self.listener.settings.max_message_bytes
        while self.open and self._buf:
            frame = next_frame(self._buf, limit)
            if frame.kind == "need":
                return
            if frame.kind == "error":
                self._framing_error(frame)
                return
            del self._buf[: frame.used]
            if frame.kind == "ping":
                self.send(PONG)
                continue
            self.front.counters["front_stream_messages"] += 1
            self.front.stream_received(frame.message, self)

    def _framing_error(self, frame: Frame) -> None:
        self.front.counters["front_stream_framing_errors"] += 1
        head = bytes(self._buf[: self.listener.settings.max_message_bytes])
        msg = scan(head)
        if frame.code and msg.method and msg.method != "ACK" and msg.get("via") is not None:
            self.front.reply_on(self, msg, frame.code, frame.reason)
        log.info("SIP %s from %s: %s; connection closed", self.proto, self.peer, frame.reason)
        self._buf.clear()
        if self.transport is not None:
            self.transport.close()

    def send(self, data: bytes) -> bool:
        if not self.open:
            return False
        assert self.transport is not None
        self.transport.write(data)
        return True

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.listener.forget(self)


class StreamListener:
    """The front's TCP or TLS listening socket and its connections."""

    def __init__(self, front: StreamFront, settings: StreamSettings, proto: Proto) -> None:
        self.front = front
        self.settings = settings
        self.proto = proto
        self.port = 0
        self.conns: set[StreamConn] = set()
        self._per_source: dict[Any, int] = {}
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._full_logged = -1e9

    async def start(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        ctx = self.settings.server_context() if self.proto == "TLS" else None
        self._server = await loop.create_server(
            lambda: StreamConn(self),
            host or None,
            port,
            ssl=ctx,
            # A TLS connection is judged (bounds, bans) once its handshake is done: a peer
            # that stalls it holds a socket this long at most.
            ssl_handshake_timeout=TLS_HANDSHAKE_S if ctx is not None else None,
            reuse_address=True,
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._sweeper = loop.create_task(self._sweep_forever(), name=f"sip-{self.proto}-idle")

    def admit(self, conn: StreamConn) -> bool:
        """Whether a new connection may stay: bounds, bans, the source's rate."""
        source = conn.peer[0]
        now = time.monotonic()
        full = len(self.conns) >= self.settings.max_connections
        if full or self._per_source.get(source, 0) >= self.settings.max_per_source:
            self.front.counters["front_stream_refused"] += 1
            if now - self._full_logged >= 60.0:
                self._full_logged = now
                log.warning(
                    "SIP %s: connection from %s refused (%s; "
                    "SWITCHBOARD_SIP__STREAM__MAX_CONNECTIONS / MAX_PER_SOURCE)",
                    self.proto,
                    source,
                    "node full" if full else "source at its bound",
                )
            return False
        if not self.front.guard.admit(source, now):
            self.front.counters["front_stream_refused"] += 1
            return False
        self.conns.add(conn)
        self._per_source[source] = self._per_source.get(source, 0) + 1
        self.front.counters["front_stream_connections"] += 1
        return True

    def forget(self, conn: StreamConn) -> None:
        if conn in self.conns:
            self.conns.discard(conn)
            source = conn.peer[0]
            left = self._per_source.get(source, 1) - 1
            if left > 0:
                self._per_source[source] = left
            else:
                self._per_source.pop(source, None)

    def sweep(self, now: float) -> None:
        """Close connections idle past ``idle_s`` that carry no call (a call may go on for
        long without a message: its connection stays for the BYE)."""
        in_use = self.front.stream_conns_in_use()
        for conn in list(self.conns):
            if now - conn.last_seen > self.settings.idle_s and conn not in in_use:
                self.front.counters["front_stream_idle_closed"] += 1
                conn.close()
                self.forget(conn)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(min(5.0, self.settings.idle_s / 2))
            self.sweep(time.monotonic())

    def stop_listening(self) -> None:
        """Take no new connection; the open ones go on (a call's last messages)."""
        if self._server is not None:
            self._server.close()
            self._server = None

    def close(self) -> None:
        """Stop listening and close every connection."""
        self.stop_listening()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self.conns):
            conn.close()
