"""Checks of SIP requests that pjsip's liberal parser lets through.

RFC 4475 section 3.1.2 lists messages that must be rejected. pjsip parses several of them
as valid. ``request_defect`` is the worker's last check of an INVITE before it answers;
``check_request`` and the rest are the SIP front's checks of every request before it
makes anything for it (``telephony.sip_dispatch``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from telephony.sipmsg import SipScan

_REQUEST_LINE = re.compile(r"^[A-Za-z0-9.!%*_+`'~-]+ [^ \t]+ SIP/2\.0$")
_CONTENT_LENGTH = re.compile(r"^(?:content-length|l)[ \t]*:[ \t]*(\d+)[ \t]*$", re.I | re.M)
_DATE_LINE = re.compile(r"^date[ \t]*:[ \t]*(.*?)[ \t]*\r?$", re.I | re.M)
#: RFC 3261 25.1's SIP-date: RFC 1123's form, in GMT only (RFC 4475 3.1.2.12, BADDATE).
_SIP_DATE = (
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov"
    r"|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT"
)
_SIP_DATE_RE = re.compile(_SIP_DATE + r"\Z")
_SIP_DATE_B = re.compile(_SIP_DATE.encode() + rb"\Z")


def request_defect(message: str) -> str | None:
    """Why ``message`` (a whole SIP request as received) must get 400, or ``None``."""
    head, sep, body = message.partition("\r\n\r\n")
    if not sep:
        head, sep, body = message.partition("\n\n")
    request_line = head.split("\n", 1)[0].rstrip("\r")
    if not _REQUEST_LINE.match(request_line):
        return "Malformed Request-Line"
    match = _CONTENT_LENGTH.search(head)
    if match and int(match.group(1)) > len(body.encode("utf-8", "surrogateescape")):
        # RFC 4475 3.1.2.2: over UDP a Content-Length past the datagram's end is a 400.
        return "Content-Length larger than message"
    for date in _DATE_LINE.finditer(head):
        if not _SIP_DATE_RE.match(date.group(1)):
            return "malformed Date"
    return None


# --------------------------------------------------------------- the front's request checks

#: Methods this node takes: new calls and their transactions at the front, the rest within
#: a call at the worker's address (a REFER's NOTIFY, re-INVITE, UPDATE, INFO, PRACK).
ALLOW = ("INVITE", "ACK", "CANCEL", "BYE", "OPTIONS", "UPDATE", "INFO", "PRACK", "REFER", "NOTIFY")
#: Methods that only make sense inside a dialog: at the front with no call, 481.
IN_DIALOG_ONLY = frozenset({"BYE", "UPDATE", "INFO", "PRACK", "REFER", "NOTIFY"})
#: Methods SIP defines that this node does not take (it is no registrar, no presence server,
#: takes no instant messages): 405 with Allow. Any other method is unknown: 501.
NOT_ALLOWED = frozenset({"REGISTER", "MESSAGE", "SUBSCRIBE", "PUBLISH"})
#: Option tags pjsip supports (what it puts in Supported): any other in Require gets 420.
SUPPORTED = ("replaces", "100rel", "timer", "norefersub")
SCHEMES = frozenset({"sip", "sips", "tel"})

#: Headers that may appear once only (RFC 3261 7.3.1: only comma-list headers may repeat).
_SINGLE = ("call-id", "cseq", "from", "to", "content-length", "max-forwards", "content-type")
_REQUIRED = ("call-id", "via", "from", "to", "cseq")
_SHOWN = {"call-id": "Call-ID", "cseq": "CSeq"}

_TOKEN_B = rb"[A-Za-z0-9.!%*_+`'~-]+"
_METHOD_LINE = re.compile(rb"(" + _TOKEN_B + rb") ([^ \t\r\n]+) SIP/(\d+\.\d+)\Z")
_VERSION_ANY = re.compile(rb"\S+\s+\S+\s+SIP/(\d+\.\d+)\s*\Z")
_SCHEME = re.compile(rb"([A-Za-z][A-Za-z0-9+.-]*):")
_HEADER_NAME = re.compile(rb"(" + _TOKEN_B + rb")[ \t]*:")
_QUOTED = rb'"(?:[^"\\\r\n]|\\[\x00-\x09\x0b\x0c\x0e-\x7f])*"'
_HOST = rb"(?:[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?\.?|\[[0-9A-Fa-f:.]+\])"
_PARAM = (
    rb"\s*;\s*"
    + _TOKEN_B
    + rb"(?:\s*=\s*(?:"
    + _TOKEN_B
    + rb"|"
    + _HOST
    + rb"|"
    + _QUOTED
    + rb"|[0-9A-Fa-f:.]+"  # received= an IPv6 address, unbracketed (RFC 3261 18.2.1)
    + rb"))?"
)
_VIA_PARM = re.compile(
    rb"\s*SIP\s*/\s*(\d+\.\d+)\s*/\s*" + _TOKEN_B + rb"\s+" + _HOST + rb"(?::\d{1,5})?"
    rb"(?:" + _PARAM + rb")*\s*\Z"
)
# Tokens; bytes past ASCII are let through (phones send unquoted UTF-8 names).
_DISPLAY = re.compile(rb"(?:[A-Za-z0-9.!%*_+`'~\x80-\xff-]+\s*)+\Z")
_CSEQ_VALUE = re.compile(rb"(\d+)\s+(" + _TOKEN_B + rb")\Z")
_DIGITS = re.compile(rb"\d+\Z")
_EXPIRES_PARAM = re.compile(rb";\s*expires\s*=\s*(\d+)", re.I)
_UINT32 = 2**32 - 1
_CSEQ_MAX = 2**31 - 1  # RFC 3261 8.1.1.5: less than 2**31


@dataclass(frozen=True, slots=True)
class Rejection:
    """The answer the front gives a request by itself: a status, a reason, extra headers."""

    code: int
    reason: str
    headers: tuple[tuple[str, str], ...] = ()


def _bad(reason: str) -> Rejection:
    return Rejection(400, f"Bad Request ({reason})")


def split_outside_quotes(value: bytes, sep: int = 0x2C) -> list[bytes]:
    """``value`` cut at each ``sep`` byte (a comma) outside double quotes and angle brackets."""
    if b'"' not in value and b"<" not in value:
        return value.split(bytes((sep,)))
    parts: list[bytes] = []
    quoted = False
    depth = 0
    start = i = 0
    while i < len(value):
        ch = value[i]
        if quoted and ch == 0x5C:  # backslash: the next byte is quoted
            i += 2
            continue
        if ch == 0x22:
            quoted = not quoted
        elif not quoted and ch == 0x3C:
            depth += 1
        elif not quoted and ch == 0x3E:
            depth = max(0, depth - 1)
        elif not quoted and depth == 0 and ch == sep:
            parts.append(value[start:i])
            start = i + 1
        i += 1
    parts.append(value[start:])
    return parts


def address_defect(value: bytes, *, star: bool = False) -> str | None:
    """Why one From, To or Contact value is not a name-addr or addr-spec, or ``None``."""
    value = value.strip()
    if star and value == b"*":
        return None
    quoted = re.sub(_QUOTED, b'""', value)  # each quoted string emptied
    if quoted.replace(b'""', b"").count(b'"'):
        return "unbalanced quotes"
    lt = quoted.find(b"<")
    if lt >= 0:
        gt = quoted.find(b">", lt)
        if gt < 0:
            return "no closing '>'"
        display = quoted[:lt].strip()
        if display not in (b"", b'""') and not _DISPLAY.match(display):
            return "display name is neither a quoted string nor tokens"
        uri = quoted[lt + 1 : gt]
        if not uri or any(c in uri for c in b" \t\r\n"):
            return "whitespace or nothing inside '<>'"
        if not _SCHEME.match(uri):
            return "URI without a scheme"
        return None
    uri = quoted.split(b";", 1)[0].strip()
    if not _SCHEME.match(uri) or any(c in uri for c in b" \t"):
        return "not an address"
    if b"?" in uri or b"," in uri:
        return "'?' or ',' in an address without '<>'"
    return None


def check_request(data: bytes, msg: SipScan) -> Rejection | None:
    """Why the request in ``data`` (scanned as ``msg``) gets a 400 or 505 here, or ``None``.

    The checks follow RFC 3261's grammar where RFC 4475 section 3.1.2 shows that pjsip lets
    an invalid message through (or drops one it could answer): the request line, the
    headers a request must carry and may carry once, CSeq, Content-Length, Max-Forwards,
    Expires, Via, and the addresses in From, To and Contact.
    """
    line = _METHOD_LINE.match(msg.start_line)
    if line is None:
        version = _VERSION_ANY.match(msg.start_line)
        if (
            version is not None
            and version.group(1) != b"2.0"
            and not msg.start_line.endswith((b" ", b"\t"))
        ):
            return Rejection(505, "Version Not Supported")
        return _bad("malformed Request-Line")
    if line.group(3) != b"2.0":
        return Rejection(505, "Version Not Supported")
    uri = line.group(2)
    if uri.startswith(b"<") or _SCHEME.match(uri) is None:
        return _bad("malformed Request-URI")
    for raw in _head_lines(data, msg):
        if raw[:1] in (b" ", b"\t") or not _HEADER_NAME.match(raw):
            return _bad("header line without a name")
    for name in _REQUIRED:
        if msg.get(name) is None:
            return _bad(f"Missing {_SHOWN.get(name, name.title())}")
    for name in _SINGLE:
        if len(msg.all(name)) > 1:
            return _bad(f"more than one {_SHOWN.get(name, name.title())}")
    cseq_h = msg.get("cseq")
    assert cseq_h is not None
    cseq = _CSEQ_VALUE.match(re.sub(rb"\s+", b" ", cseq_h.value))
    if cseq is None or int(cseq.group(1)) > _CSEQ_MAX:
        return _bad("malformed CSeq")
    if cseq.group(2) != line.group(1):
        return _bad("CSeq method does not match the request")
    length = msg.get("content-length")
    if length is not None:
        if not _DIGITS.match(length.value):
            return _bad("malformed Content-Length")
        body = len(data) - msg.body_start if msg.body_start >= 0 else 0
        if int(length.value) > body:
            return _bad("Content-Length larger than message")
    forwards = msg.get("max-forwards")
    if forwards is not None and (not _DIGITS.match(forwards.value) or int(forwards.value) > 255):
        return _bad("malformed Max-Forwards")
    for expires in msg.all("expires"):
        if not _DIGITS.match(expires.value) or int(expires.value) > _UINT32:
            return _bad("malformed Expires")
    for via in msg.all("via"):
        for parm in split_outside_quotes(via.value):
            m = _VIA_PARM.match(parm)
            if m is None:
                return _bad("malformed Via")
    for name in ("from", "to", "contact"):
        for hdr in msg.all(name):
            values = split_outside_quotes(hdr.value) if name == "contact" else [hdr.value]
            for value in values:
                defect = address_defect(value, star=name == "contact")
                if defect is not None:
                    return _bad(f"{name.title()}: {defect}")
                if name == "contact":
                    for exp in _EXPIRES_PARAM.finditer(value):
                        if int(exp.group(1)) > _UINT32:
                            return _bad("malformed Contact expires")
    if uri[:4].lower() in (b"sip:", b"sips") and b"?" in uri.rsplit(b"@", 1)[-1]:
        return _bad("headers in the Request-URI")
    for date in msg.all("date"):
        # RFC 4475 3.1.2.12 (BADDATE) allows ignoring a bad Date, or a 400: the node
        # never reads the header, but a request that breaks the grammar gets its 400.
        if not _SIP_DATE_B.match(date.value.strip()):
            return _bad("malformed Date")
    return None


def _head_lines(data: bytes, msg: SipScan) -> list[bytes]:
    """The header section's lines, continuation lines joined to the line they continue."""
    lines: list[bytes] = []
    for raw in re.split(rb"\r?\n", data[msg.head_start : msg.head_end]):
        if raw[:1] in (b" ", b"\t") and lines:
            lines[-1] += b" " + raw.strip()
        elif raw:
            lines.append(raw)
    return lines


def require_unsupported(msg: SipScan) -> list[str]:
    """Option tags in the request's Require that this node does not support (RFC 3261 8.2.2.3)."""
    tags: list[str] = []
    for hdr in msg.all("require"):
        for tag in hdr.value.split(b","):
            name = tag.strip().decode("latin-1")
            if name and name.lower() not in SUPPORTED and name not in tags:
                tags.append(name)
    return tags


#: What an INVITE's answer may carry, as an Accept header would name it: the SDP answer
#: (or offer) of a 200 OK, and nothing else.
_SDP_ACCEPTED = frozenset({b"application/sdp", b"application/*", b"*/*"})


def accept_rejection(msg: SipScan) -> Rejection | None:
    """406 for an INVITE whose Accept rules out SDP, the only body its answer can have
    (RFC 3261 21.4.7; RFC 4475's SDP01 accepts only ``text/nobodyKnowsThis``). An INVITE
    without Accept takes SDP (RFC 3261 20.1); an empty Accept takes nothing."""
    headers = msg.all("accept")
    if msg.method != "INVITE" or not headers:
        return None
    for hdr in headers:
        for part in hdr.value.split(b","):
            if part.split(b";", 1)[0].strip().lower() in _SDP_ACCEPTED:
                return None
    return Rejection(406, "Not Acceptable", (("Accept", "application/sdp"),))


def method_rejection(method: str) -> Rejection | None:
    """501 for a method SIP does not define, 405 for one this node does not take."""
    if method in NOT_ALLOWED:
        return Rejection(405, "Method Not Allowed", (("Allow", ", ".join(ALLOW)),))
    if method not in ALLOW:
        return Rejection(501, "Not Implemented", (("Allow", ", ".join(ALLOW)),))
    return None


def scheme_rejection(msg: SipScan) -> Rejection | None:
    """416 for a Request-URI whose scheme is not sip, sips or tel (RFC 3261 8.2.2.1)."""
    m = _METHOD_LINE.match(msg.start_line)
    scheme = _SCHEME.match(m.group(2)) if m is not None else None
    if scheme is not None and scheme.group(1).decode("latin-1").lower() not in SCHEMES:
        return Rejection(416, "Unsupported URI Scheme")
    return None
