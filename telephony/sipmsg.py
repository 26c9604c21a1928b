"""A lenient scanner of SIP datagrams: start line and headers, never raises.

The SIP front (``telephony.sip_dispatch``) routes on what this finds, and the request
checks (``telephony.sipcheck``) judge it; neither needs a full SIP parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# RFC 3261 7.3.3 compact header names.
COMPACT = {
    "i": "call-id",
    "v": "via",
    "f": "from",
    "t": "to",
    "l": "content-length",
    "m": "contact",
    "c": "content-type",
    "e": "content-encoding",
    "k": "supported",
    "s": "subject",
}
_TOKEN = re.compile(rb"[A-Za-z0-9.!%*_+`'~-]+\Z")
# One header: name, colon, value with its continuation lines (RFC 3261 7.3.1 folding).
_HEADER = re.compile(rb"^([^:\r\n]*):([^\r\n]*(?:\r?\n[ \t][^\r\n]*)*)", re.M)
_FOLD = re.compile(rb"[ \t]*\r?\n[ \t]+")
_CSEQ = re.compile(rb"\s*(\d+)\s+(\S+)\s*\Z")


@dataclass(slots=True)
class Header:
    """One header: lower-case full name, unfolded value, raw byte span of its value."""

    name: str
    value: bytes
    value_start: int  # first byte after the colon
    value_end: int  # end of the last continuation line (terminator excluded)


@dataclass(slots=True)
class SipScan:
    """What the front learns from one datagram; lenient, never raises."""

    is_response: bool = False
    method: str = ""  # request method token ("" if the start line has none)
    start_line_ok: bool = False
    headers: list[Header] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    start_line: bytes = b""  # the request or status line, without its line end
    head_start: int = 0  # first byte of the first header line
    head_end: int = 0  # where the header section ends (its empty line, or the end)
    body_start: int = -1  # first byte of the body (-1: no empty line, no body)

    def get(self, name: str) -> Header | None:
        for h in self.headers:
            if h.name == name:
                return h
        return None

    def all(self, name: str) -> list[Header]:
        return [h for h in self.headers if h.name == name]

    @property
    def call_id(self) -> str | None:
        h = self.get("call-id")
        if h is None or not h.value:
            return None
        return h.value.decode("latin-1")

    @property
    def cseq(self) -> tuple[int, str] | None:
        h = self.get("cseq")
        m = _CSEQ.match(h.value) if h is not None else None
        if m is None:
            return None
        return int(m.group(1)), m.group(2).decode("latin-1").upper()


def head_end_at(data: bytes, start: int) -> int:
    """Index where the header section ends (the empty line), or ``len(data)``."""
    ends = [i for i in (data.find(b"\r\n\r\n", start), data.find(b"\n\n", start)) if i >= 0]
    return min(ends) if ends else len(data)


def scan(data: bytes) -> SipScan:
    """Find the start line and headers of a SIP datagram (folded lines, compact names)."""
    out = SipScan()
    pos = 0
    while pos < len(data) and data[pos] in b"\r\n":  # RFC 3261 7.5: ignore leading CRLFs
        pos += 1
    end = head_end_at(data, pos)
    if pos >= end:
        out.problems.append("empty datagram")
        return out
    eol = data.find(b"\n", pos, end)
    first = eol + 1 if eol >= 0 else end
    start = data[pos : eol if eol >= 0 else end].rstrip(b"\r")
    out.start_line = start
    out.head_start, out.head_end = first, end
    if end < len(data):
        out.body_start = end + (4 if data.startswith(b"\r\n\r\n", end) else 2)
    if start.startswith(b"SIP/"):
        out.is_response = True
        parts = start.split(None, 2)
        out.start_line_ok = len(parts) >= 2 and len(parts[1]) == 3 and parts[1].isdigit()
    else:
        parts = start.split()
        if parts and _TOKEN.match(parts[0]):
            out.method = parts[0].decode("latin-1")
        out.start_line_ok = bool(
            out.method and len(parts) == 3 and parts[2].upper().startswith(b"SIP/")
        )
    if not out.start_line_ok:
        out.problems.append("bad start line")
    headers = out.headers
    for m in _HEADER.finditer(data, first, end):
        raw_name = m.group(1)
        name = raw_name.strip(b" \t").decode("latin-1").lower()
        if not name or raw_name[:1] in (b" ", b"\t"):
            out.problems.append(f"header line without a name at byte {m.start()}")
            continue
        raw = m.group(2)
        value = _FOLD.sub(b" ", raw).strip() if b"\n" in raw else raw.strip()
        headers.append(Header(COMPACT.get(name, name), value, m.start(2), m.end(2)))
    return out


def first_comma(data: bytes, start: int, end: int) -> int:
    """Index of the first comma outside double quotes in ``data[start:end]``, or ``end``."""
    if data.find(b'"', start, end) < 0:
        comma = data.find(b",", start, end)
        return end if comma < 0 else comma
    quoted = False
    i = start
    while i < end:
        ch = data[i]
        if ch == 0x5C and quoted:  # backslash escape inside a quoted string
            i += 2
            continue
        if ch == 0x22:
            quoted = not quoted
        elif ch == 0x2C and not quoted:
            return i
        i += 1
    return end


def top_via_parm(value: bytes) -> bytes:
    """The first via-parm of a Via value (a header may list several, comma separated)."""
    return value[: first_comma(value, 0, len(value))].strip()
