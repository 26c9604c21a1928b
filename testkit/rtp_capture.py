"""Packets on the loopback wire: a raw-socket capture, and the SIP, RTP and G.711 in them.

``Capture`` reads every IPv4 UDP datagram on an interface (``lo`` by default) with an
``AF_PACKET`` socket in a background thread and keeps the ones whose source or destination
port passes its filter, each stamped by the kernel when it crossed the interface (converted
to ``time.monotonic()`` seconds). Opening the socket needs root (or ``CAP_NET_RAW``); without
it ``Capture.start`` raises ``PermissionError``.

The parsers (``parse_frame``, ``parse_rtp``, ``parse_sip``) and the G.711 decoders are pure
functions of bytes.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Addr = tuple[str, int]

ETH_P_IP = 0x0800
ETH_HEADER = 14
IPPROTO_UDP = 17
PACKET_OUTGOING = 4  # sll_pkttype of a frame this host sent (loopback shows it twice)
MAX_FRAME = 65536 + ETH_HEADER
#: Kernel receive timestamps as a struct timespec (Linux; the socket module lacks the name
#: before Python 3.14). The control message has the same number.
SO_TIMESTAMPNS: int = getattr(socket, "SO_TIMESTAMPNS", 35)
SO_RCVBUFFORCE: int = getattr(socket, "SO_RCVBUFFORCE", 33)  # Linux

#: RTP payload types with a fixed meaning (RFC 3551).
PT_PCMU = 0
PT_PCMA = 8
PT_G722 = 9


# --------------------------------------------------------------------------- packets


@dataclass(frozen=True, slots=True)
class Packet:
    """One UDP datagram seen on the wire."""

    t: float  # time.monotonic() seconds
    src: Addr
    dst: Addr
    payload: bytes


class PortFilter:
    """Keeps a datagram when its source or destination port is in one of ``ports``."""

    def __init__(self, ports: Iterable[int | range]) -> None:
        self.singles: set[int] = set()
        self.ranges: list[range] = []
        for p in ports:
            if isinstance(p, range):
                self.ranges.append(p)
            else:
                self.singles.add(p)

    def add(self, port: int | range) -> None:
        """Also keep ``port`` (safe to call while a capture runs)."""
        if isinstance(port, range):
            self.ranges = [*self.ranges, port]
        else:
            self.singles = self.singles | {port}

    def _has(self, port: int) -> bool:
        return port in self.singles or any(port in r for r in self.ranges)

    def __call__(self, sport: int, dport: int) -> bool:
        return self._has(sport) or self._has(dport)


def parse_frame(frame: bytes, link_header: int = ETH_HEADER) -> tuple[Addr, Addr, bytes] | None:
    """(source, destination, UDP payload) of an Ethernet-framed IPv4 UDP datagram, else None.

    Fragments are skipped (loopback's MTU of 64 KiB never fragments a SIP or RTP datagram).
    """
    if link_header and (
        len(frame) < link_header or frame[link_header - 2 : link_header] != b"\x08\x00"
    ):
        return None
    ip = memoryview(frame)[link_header:]
    if len(ip) < 20 or ip[0] >> 4 != 4:
        return None
    ihl = (ip[0] & 0x0F) * 4
    total = int.from_bytes(ip[2:4], "big")
    flags_frag = int.from_bytes(ip[6:8], "big")
    if ip[9] != IPPROTO_UDP or flags_frag & 0x3FFF or ihl < 20 or len(ip) < ihl + 8:
        return None
    src_ip = socket.inet_ntoa(bytes(ip[12:16]))
    dst_ip = socket.inet_ntoa(bytes(ip[16:20]))
    sport, dport, ulen = struct.unpack_from("!HHH", ip, ihl)
    end = min(len(ip), total if total else len(ip), ihl + ulen)
    return (src_ip, sport), (dst_ip, dport), bytes(ip[ihl + 8 : end])


class Capture:
    """Background capture of UDP datagrams on ``interface`` that pass ``ports``.

    Use as a context manager, or ``start()`` / ``stop()``; ``packets()`` is a snapshot in
    arrival order.
    """

    def __init__(self, ports: PortFilter | Iterable[int | range], interface: str = "lo") -> None:
        self.filter = ports if isinstance(ports, PortFilter) else PortFilter(ports)
        self.interface = interface
        self._packets: list[Packet] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        #: time.time() - time.monotonic() when the capture started.
        self.wall_offset = 0.0
        #: Frames this host sent, skipped (loopback delivers each datagram as it is received).
        self.skipped_outgoing = 0

    def start(self) -> None:
        """Open the raw socket (``PermissionError`` without root) and start reading."""
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
        try:
            sock.bind((self.interface, ETH_P_IP))
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            try:  # root may exceed rmem_max; a burst of calls must not overflow it
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
            except OSError:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
            sock.settimeout(0.2)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self.wall_offset = _wall_offset()
        self._thread = threading.Thread(target=self._run, name="rtp-capture", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop reading (what arrived until now is kept)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> Capture:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def packets(self) -> list[Packet]:
        with self._lock:
            return list(self._packets)

    def to_wall(self, t: float) -> float:
        """A capture time as ``time.time()`` seconds."""
        return t + self.wall_offset

    def to_monotonic(self, wall: float) -> float:
        """A ``time.time()`` instant on the capture's clock."""
        return wall - self.wall_offset

    def _run(self) -> None:
        sock = self._sock
        assert sock is not None
        ancsize = socket.CMSG_SPACE(16)
        keep = self.filter
        while not self._stop.is_set():
            try:
                frame, anc, _flags, addr = sock.recvmsg(MAX_FRAME, ancsize)
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                raise
            now = time.monotonic()
            if addr[2] == PACKET_OUTGOING:
                self.skipped_outgoing += 1
                continue
            parsed = parse_frame(frame)
            if parsed is None:
                continue
            src, dst, payload = parsed
            if not keep(src[1], dst[1]):
                continue
            t = now
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", data[:16])
                    t = sec + nsec / 1e9 - self.wall_offset
            with self._lock:
                self._packets.append(Packet(t, src, dst, payload))


def _wall_offset() -> float:
    """time.time() - time.monotonic(), from the closest of a few paired readings."""
    best: tuple[float, float] | None = None
    for _ in range(5):
        a = time.monotonic()
        wall = time.time()
        b = time.monotonic()
        if best is None or b - a < best[0]:
            best = (b - a, wall - (a + b) / 2)
    assert best is not None
    return best[1]


# --------------------------------------------------------------------------- RTP


@dataclass(frozen=True, slots=True)
class Rtp:
    """An RTP packet's header fields and payload (RFC 3550)."""

    payload_type: int
    marker: bool
    seq: int
    timestamp: int
    ssrc: int
    payload: bytes


def parse_rtp(data: bytes) -> Rtp | None:
    """The RTP packet in a datagram; None for RTCP, STUN, SIP or anything else."""
    if len(data) < 12 or data[0] >> 6 != 2:
        return None
    if 192 <= data[1] <= 223:  # RTCP packet types 192-223 share the port (RFC 5761)
        return None
    cc = data[0] & 0x0F
    start = 12 + 4 * cc
    if data[0] & 0x10:  # header extension: 16-bit profile, 16-bit length in words
        if len(data) < start + 4:
            return None
        start += 4 + 4 * int.from_bytes(data[start + 2 : start + 4], "big")
    end = len(data)
    if data[0] & 0x20:  # padding: the last byte says how much
        end -= data[-1]
    if start > end:
        return None
    seq, ts, ssrc = struct.unpack_from("!HII", data, 2)
    return Rtp(
        payload_type=data[1] & 0x7F,
        marker=bool(data[1] & 0x80),
        seq=seq,
        timestamp=ts,
        ssrc=ssrc,
        payload=bytes(data[start:end]),
    )


# --------------------------------------------------------------------------- SIP


@dataclass(frozen=True, slots=True)
class SipMessage:
    """What the benchmark needs of a SIP datagram."""

    method: str | None  # request method, None for a response
    status: int | None  # response status code, None for a request
    call_id: str | None
    cseq: int | None
    cseq_method: str | None
    from_uri: str | None
    to_uri: str | None
    #: (c= address, m=audio port) of the SDP body, when there is one.
    audio: Addr | None

    @property
    def is_response(self) -> bool:
        return self.status is not None


_REQUEST = re.compile(rb"([A-Z]+) \S+ SIP/2\.0\Z")
_STATUS = re.compile(rb"SIP/2\.0 (\d{3})(?: |\Z)")
_HEADER_NAMES = {
    b"call-id": "call-id",
    b"i": "call-id",
    b"cseq": "cseq",
    b"from": "from",
    b"f": "from",
    b"to": "to",
    b"t": "to",
}
_ANGLE_URI = re.compile(r"<([^>]*)>")


def _uri(value: str) -> str:
    """The URI of a From/To value: inside <...>, else the value up to its parameters."""
    m = _ANGLE_URI.search(value)
    if m is not None:
        return m.group(1)
    return value.split(";", 1)[0].strip()


def parse_sdp_audio(body: str) -> Addr | None:
    """(connection address, port) of the first ``m=audio`` section of an SDP body."""
    address: str | None = None
    port: int | None = None
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("m="):
            if port is not None:  # the audio section is over
                break
            parts = line[2:].split()
            if parts and parts[0] == "audio" and len(parts) > 1 and parts[1].isdigit():
                port = int(parts[1])
        elif line.startswith("c=") and (port is not None or address is None):
            parts = line[2:].split()
            if len(parts) >= 3:
                address = parts[2].split("/", 1)[0]  # media-level c= overrides the session's
    if address is None or port is None:
        return None
    return address, port


def parse_sip(data: bytes) -> SipMessage | None:
    """The SIP message in a datagram (a request or a response), else None."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = data.partition(b"\n\n")
    lines = head.replace(b"\r\n", b"\n").split(b"\n")
    if not lines:
        return None
    start = lines[0].strip()
    method: str | None = None
    status: int | None = None
    if m := _STATUS.match(start):
        status = int(m.group(1))
    elif m := _REQUEST.match(start):
        method = m.group(1).decode()
    else:
        return None
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t") or b":" not in line:
            continue  # folded continuation lines carry nothing this parser needs
        name, _, value = line.partition(b":")
        key = _HEADER_NAMES.get(name.strip().lower())
        if key is not None and key not in fields:
            fields[key] = value.strip().decode("latin-1")
    cseq: int | None = None
    cseq_method: str | None = None
    if "cseq" in fields:
        parts = fields["cseq"].split()
        if len(parts) == 2 and parts[0].isdigit():
            cseq, cseq_method = int(parts[0]), parts[1].upper()
    audio = parse_sdp_audio(body.decode("latin-1")) if body.strip() else None
    return SipMessage(
        method=method,
        status=status,
        call_id=fields.get("call-id"),
        cseq=cseq,
        cseq_method=cseq_method,
        from_uri=_uri(fields["from"]) if "from" in fields else None,
        to_uri=_uri(fields["to"]) if "to" in fields else None,
        audio=audio,
    )


# --------------------------------------------------------------------------- G.711


def _ulaw_table() -> npt.NDArray[np.int16]:
    """ITU-T G.711 mu-law code -> linear 16-bit sample."""
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return np.where(u & 0x80, -magnitude, magnitude).astype(np.int16)


def _alaw_table() -> npt.NDArray[np.int16]:
    """ITU-T G.711 A-law code -> linear 16-bit sample."""
    a = np.arange(256, dtype=np.int32) ^ 0x55
    exponent = (a >> 4) & 0x07
    mantissa = a & 0x0F
    magnitude = np.where(
        exponent == 0,
        (mantissa << 4) + 8,
        ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0),
    )
    return np.where(a & 0x80, magnitude, -magnitude).astype(np.int16)


ULAW_TABLE = _ulaw_table()
ALAW_TABLE = _alaw_table()


def decode_pcmu(payload: bytes) -> npt.NDArray[np.int16]:
    """G.711 mu-law bytes to int16 samples."""
    return ULAW_TABLE[np.frombuffer(payload, dtype=np.uint8)]


def decode_pcma(payload: bytes) -> npt.NDArray[np.int16]:
    """G.711 A-law bytes to int16 samples."""
    return ALAW_TABLE[np.frombuffer(payload, dtype=np.uint8)]


def decode(rtp: Rtp) -> npt.NDArray[np.int16] | None:
    """The samples of a PCMU or PCMA packet; None for any other payload type."""
    if rtp.payload_type == PT_PCMU:
        return decode_pcmu(rtp.payload)
    if rtp.payload_type == PT_PCMA:
        return decode_pcma(rtp.payload)
    return None
