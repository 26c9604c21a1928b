"""A SIP caller made of one UDP socket, for what sipp and the dialer will not do on purpose:
never ACK a 200 OK, never answer a BYE, send a request byte for byte."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import socket
import time
from dataclasses import dataclass, field

SDP = (
    "v=0\r\no=- 1 1 IN IP4 {ip}\r\ns=-\r\nc=IN IP4 {ip}\r\nt=0 0\r\n"
    "m=audio {rtp} RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
)


def header(head: str, name: str) -> str | None:
    """The first value of header ``name`` in a message's header section."""
    m = re.search(rf"(?im)^{name}[ \t]*:[ \t]*(.*?)\r?$", head)
    return m.group(1) if m else None


def route_set(head: str) -> list[str]:
    """A UAC's route set from a 2xx: its Record-Route values, last first (RFC 3261 12.1.2)."""
    values: list[str] = []
    for m in re.finditer(r"(?im)^record-route[ \t]*:[ \t]*(.*?)\r?$", head):
        values += [v.strip() for v in m.group(1).split(",") if v.strip()]
    return values[::-1]


def hostport(uri: str) -> tuple[str, int]:
    """Host and port of a SIP URI (5060 if none)."""
    m = re.search(r"sips?:(?:[^@;>]*@)?([^:;>]+)(?::(\d+))?", uri)
    assert m is not None, uri
    return m.group(1), int(m.group(2) or 5060)


@dataclass
class Received:
    at: float
    src: tuple[str, int]
    head: str  # start line and headers
    body: str = ""

    @property
    def first(self) -> str:
        return self.head.split("\r\n", 1)[0]

    @property
    def call_id(self) -> str:
        return header(self.head, "call-id") or header(self.head, "i") or ""


@dataclass
class RawUA:
    """One socket on ``ip``: sends INVITEs, records everything it gets, and (as told)
    ACKs 2xx answers to the Contact and answers BYEs with 200."""

    ip: str
    ack: bool = True
    answer_bye: bool = True
    got: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((self.ip, 0))
        self.sock.setblocking(False)
        self.port: int = self.sock.getsockname()[1]
        self._task = asyncio.get_running_loop().create_task(self._receive())

    def close(self) -> None:
        self._task.cancel()
        self.sock.close()

    def send(self, data: bytes, dest: tuple[str, int]) -> None:
        self.sock.sendto(data, dest)

    def invite(self, dest: tuple[str, int], call_id: str, extra: str = "") -> None:
        """A new INVITE offering PCMU; ``extra``: more header lines, each ending CRLF."""
        body = SDP.format(ip=self.ip, rtp=random.randrange(20000, 29000, 2))
        self.send(
            (
                f"INVITE sip:bot@{dest[0]}:{dest[1]} SIP/2.0\r\n"
                f"Via: SIP/2.0/UDP {self.ip}:{self.port};branch=z9hG4bK-{call_id};rport\r\n"
                f"From: <sip:raw@{self.ip}>;tag=t-{call_id}\r\nTo: <sip:bot@{dest[0]}>\r\n"
                f"Call-ID: {call_id}\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\n"
                f"Contact: <sip:raw@{self.ip}:{self.port}>\r\n{extra}"
                f"Content-Type: application/sdp\r\nContent-Length: {len(body)}\r\n\r\n{body}"
            ).encode(),
            dest,
        )

    def answer_of(self, call_id: str) -> Received | None:
        """The 2xx answer to the INVITE of ``call_id``, if one came."""
        for r in self.got:
            cseq = header(r.head, "cseq") or ""
            if r.call_id == call_id and r.first.startswith("SIP/2.0 2") and "INVITE" in cseq:
                return r
        return None

    def in_dialog(
        self, call_id: str, method: str, cseq: int, *, content_type: str = "", body: str = ""
    ) -> tuple[str, int]:
        """Send ``method`` inside the call ``call_id`` answered 2xx, along its route set
        (RFC 3261 12.2.1.1); returns where it went."""
        ok = self.answer_of(call_id)
        assert ok is not None, f"no 2xx for {call_id}"
        contact = re.search(r"<(sip:[^>]+)>", header(ok.head, "contact") or "")
        assert contact is not None
        uri = contact.group(1)
        routes = route_set(ok.head)
        dest = hostport(routes[0] if routes else uri)
        lines = [
            f"{method} {uri} SIP/2.0",
            f"Via: SIP/2.0/UDP {self.ip}:{self.port};branch=z9hG4bK-{random.getrandbits(48):x}"
            ";rport",
            f"From: {header(ok.head, 'from')}",
            f"To: {header(ok.head, 'to')}",
            f"Call-ID: {call_id}",
            f"CSeq: {cseq} {method}",
            "Max-Forwards: 70",
            f"Contact: <sip:raw@{self.ip}:{self.port}>",
        ]
        if routes:
            lines.append(f"Route: {', '.join(routes)}")
        if content_type:
            lines.append(f"Content-Type: {content_type}")
        lines.append(f"Content-Length: {len(body.encode())}")
        self.send(("\r\n".join(lines) + "\r\n\r\n" + body).encode(), dest)
        return dest

    def responses(self, call_id: str, method: str) -> list[int]:
        """The statuses of every response to ``method`` requests of ``call_id``."""
        return [
            int(r.first[8:11])
            for r in self.got
            if r.call_id == call_id
            and r.first.startswith("SIP/2.0 ")
            and (header(r.head, "cseq") or "").split()[-1:] == [method]
        ]

    def finals(self, call_id: str) -> list[int]:
        """The distinct final statuses the INVITE of ``call_id`` got, in order."""
        codes: list[int] = []
        for r in self.got:
            cseq = header(r.head, "cseq") or ""
            if r.call_id == call_id and r.first.startswith("SIP/2.0 ") and "INVITE" in cseq:
                code = int(r.first[8:11])
                if code >= 200 and code not in codes:
                    codes.append(code)
        return codes

    def requests(self, method: str, call_id: str | None = None) -> list[Received]:
        return [
            r for r in self.got if r.first.startswith(method + " ") and call_id in (None, r.call_id)
        ]

    async def _receive(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            data, src = await loop.sock_recvfrom(self.sock, 65535)
            head, _, body = data.partition(b"\r\n\r\n")
            r = Received(
                time.monotonic(),
                src,
                head.decode("utf-8", "replace"),
                body.decode("utf-8", "replace"),
            )
            self.got.append(r)
            with contextlib.suppress(OSError):
                self._react(r)

    def _react(self, r: Received) -> None:
        if r.first.startswith("SIP/2.0 2") and "INVITE" in (header(r.head, "cseq") or ""):
            contact = re.search(r"<(sip:[^>]+)>", header(r.head, "contact") or "")
            if self.ack and contact is not None:
                uri = contact.group(1)
                routes = route_set(r.head)
                # RFC 3261 12.2.1.1: to the first Route of the route set, else the Contact.
                host, port = hostport(routes[0] if routes else uri)
                cseq = (header(r.head, "cseq") or "1").split()[0]
                route_line = f"Route: {', '.join(routes)}\r\n" if routes else ""
                self.send(
                    (
                        f"ACK {uri} SIP/2.0\r\n"
                        f"Via: SIP/2.0/UDP {self.ip}:{self.port};"
                        f"branch=z9hG4bK-{random.getrandbits(48):x};rport\r\n"
                        f"From: {header(r.head, 'from')}\r\nTo: {header(r.head, 'to')}\r\n"
                        f"Call-ID: {r.call_id}\r\nCSeq: {cseq} ACK\r\nMax-Forwards: 70\r\n"
                        f"{route_line}Content-Length: 0\r\n\r\n"
                    ).encode(),
                    (host, port),
                )
        elif r.first.startswith("BYE ") and self.answer_bye:
            copied = [
                line
                for line in r.head.split("\r\n")[1:]
                if re.match(r"(?i)(via|from|to|call-id|cseq)[ \t]*:", line)
            ]
            self.send(
                (
                    "SIP/2.0 200 OK\r\n" + "\r\n".join(copied) + "\r\nContent-Length: 0\r\n\r\n"
                ).encode(),
                r.src,
            )
