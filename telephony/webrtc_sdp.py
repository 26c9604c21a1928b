"""A browser's SDP offer checked before aiortc reads it (``check_offer``).

aiortc's own parser trusts what it reads: an ``m=audio`` port that is not a number, a
video-only offer or hundreds of ``m=`` lines ended in an ``AssertionError`` inside it (a
500), and an offer with no DTLS fingerprint, or no direction, was answered and could never
connect. Here the offer is read first, line by line, against what a browser's test call
needs, and refused with ``SdpError``, whose text names the line and what is wrong (never
the offending text itself), or passed on as the same lines ended by CRLF.

What a test call takes: at most ``MAX_SDP_CHARS`` characters in ``MAX_LINES`` lines of
``MAX_LINE_CHARS``; ``v=0`` first, then ``o=``, ``s=``, ``t=``; exactly one media section,
``m=audio`` on a DTLS-SRTP transport (``UDP/TLS/RTP/SAVPF``) offering a codec aiortc
decodes (opus, G722, PCMU, PCMA) by ``a=rtpmap``, with ``a=mid``, ``a=rtcp-mux``, a
direction that sends audio (``sendrecv`` or ``sendonly``), ICE credentials (``a=ice-ufrag``,
``a=ice-pwd``), a DTLS fingerprint of sha-256, sha-384 or sha-512 and ``a=setup`` (each in
the media section or the session's), and at most ``MAX_CANDIDATES`` candidates. Every
attribute aiortc parses is checked for the form its parser assumes; others are passed on
untouched, as aiortc ignores them.

Line ends: a bare LF is taken as a line end (RFC 8866 section 5: a parser should accept
records ended by a single newline) and the lines go on to aiortc ended by CRLF; a CR that
does not end a line, or any other control character, is refused.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from dataclasses import dataclass, field

MAX_SDP_CHARS = 20_000
MAX_LINES = 300
MAX_LINE_CHARS = 1_000
#: Media sections (``m=`` lines) a test call takes: its one audio stream.
MAX_MEDIA = 1
MAX_CANDIDATES = 32

#: Transports of DTLS-SRTP media (RFC 5764, RFC 8829); the first is what browsers offer.
DTLS_SRTP_PROFILES = ("UDP/TLS/RTP/SAVPF", "UDP/TLS/RTP/SAVP", "RTP/SAVPF")
#: Audio codecs aiortc decodes, by encoding name (lower case) and clock rate.
CODECS = {"opus": 48000, "g722": 8000, "pcmu": 8000, "pcma": 8000}
#: DTLS fingerprint algorithms aiortc checks, and their digest's length in bytes.
FINGERPRINTS = {"sha-256": 32, "sha-384": 48, "sha-512": 64}
SETUP_ROLES = ("actpass", "active", "passive")
DIRECTIONS = ("sendrecv", "sendonly", "recvonly", "inactive")
#: RTP payload types 72-76 are RTCP's packet types (RFC 5761 section 4).
_RTCP_CONFLICT = range(72, 77)
#: fmtp parameters aiortc reads as integers.
_FMTP_INTS = frozenset(
    ("apt", "max-fr", "max-fs", "maxplaybackrate", "minptime", "stereo", "useinbandfec")
)

_LINE = re.compile(r"([a-z])=(.*)", re.S)
_TOKEN = re.compile(r"[!#$%&'*+\-.0-9A-Z^_`a-z{|}~]+")  # RFC 8866's token
_ICE_CHARS = re.compile(r"[A-Za-z0-9+/]+")  # RFC 8839 ice-char
_FINGERPRINT_HEX = re.compile(r"[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2})*")
_DIGITS = re.compile(r"[0-9]{1,10}")


class SdpError(Exception):
    """The offer cannot be answered; the text says where and why, for the operator."""


@dataclass
class _Section:
    """The session, or one media section: its attributes by name, with line numbers."""

    start: int  # line number (1-based) of its first line
    attrs: list[tuple[int, str, str | None]] = field(default_factory=list)

    def first(self, name: str) -> tuple[int, str | None] | None:
        for n, key, value in self.attrs:
            if key == name:
                return n, value
        return None

    def all(self, name: str) -> list[tuple[int, str | None]]:
        return [(n, value) for n, key, value in self.attrs if key == name]


def _int(text: str, low: int, high: int) -> int | None:
    """``text`` as a decimal integer in ``low..high``, else None."""
    if not _DIGITS.fullmatch(text):
        return None
    value = int(text)
    return value if low <= value <= high else None


def _lines(text: str) -> list[str]:
    """The offer's lines: CRLF or a bare LF ends one; nothing else may be a control."""
    if len(text) > MAX_SDP_CHARS:
        raise SdpError(f"the offer has {len(text)} characters, more than {MAX_SDP_CHARS}")
    body = text.replace("\r\n", "\n")
    if body.endswith("\n"):
        body = body[:-1]
    lines = body.split("\n")
    if len(lines) > MAX_LINES:
        raise SdpError(f"the offer has {len(lines)} lines, more than {MAX_LINES}")
    for n, line in enumerate(lines, 1):
        if len(line) > MAX_LINE_CHARS:
            raise SdpError(f"line {n} has {len(line)} characters, more than {MAX_LINE_CHARS}")
        for ch in line:
            if ch == "\r":
                raise SdpError(f"line {n}: a CR that does not end the line (lines end in CRLF)")
            if not ch.isprintable():  # controls, tabs, every space but " ", unassigned
                raise SdpError(f"line {n}: a character that is not printable (U+{ord(ch):04X})")
    return lines


def _name(kind: str) -> str:
    """A media kind as a reason may name it (a known word, never what was sent)."""
    known = ("audio", "video", "application", "text", "message", "image")
    return f"m={kind}" if kind in known else "an m= line of an unknown kind"


def check_offer(text: str) -> str:
    """The offer's SDP as aiortc is given it (each line ended by CRLF), or ``SdpError``."""
    lines = _lines(text)
    parsed: list[tuple[int, str, str]] = []
    for n, line in enumerate(lines, 1):
        m = _LINE.fullmatch(line)
        if m is None:
            what = "is empty" if not line else "is not of the form <letter>=<value>"
            raise SdpError(f"line {n} {what}")
        parsed.append((n, m.group(1), m.group(2)))
    if parsed[0][1:] != ("v", "0"):
        raise SdpError("line 1 must be v=0 (an SDP description starts with its version)")
    media_at = [n for n, kind, _ in parsed if kind == "m"]
    if not media_at:
        raise SdpError("no m=audio line: the offer has no media (a test call takes audio)")
    if len(media_at) > MAX_MEDIA:
        kinds = Counter(_name(value.split(" ", 1)[0]) for _, kind, value in parsed if kind == "m")
        listed = ", ".join(f"{k} x{c}" for k, c in sorted(kinds.items()))
        raise SdpError(
            f"the offer has {len(media_at)} media sections ({listed}); a browser test call "
            f"takes {MAX_MEDIA}, m=audio (no video, no data channel)"
        )
    session = _Section(1)
    media = _Section(media_at[0])
    section = session
    m_line = ""
    for n, kind, value in parsed:
        if kind == "m":
            section, m_line = media, value
            continue
        if kind == "c":
            _check_connection(n, value)
        elif kind == "a":
            name, sep, rest = value.partition(":")
            if not _TOKEN.fullmatch(name):
                raise SdpError(f"line {n}: an attribute name must be a token (a=<name>[:<value>])")
            section.attrs.append((n, name, rest if sep else None))
    seen = Counter(kind for n, kind, _v in parsed if n < media_at[0])
    for needed in ("o", "s", "t"):
        if needed not in seen:
            raise SdpError(f"no {needed}= line in the session part (before m=)")
    for n, kind, _v in parsed[1:]:
        if kind == "v":
            raise SdpError(f"line {n}: a second v= line")
    _check_session(session)
    _check_media(media, m_line, session)
    return "\r\n".join(lines) + "\r\n"


def _check_connection(n: int, value: str) -> None:
    parts = value.split(" ")
    if len(parts) != 3 or parts[0] != "IN" or parts[1] not in ("IP4", "IP6"):
        raise SdpError(f"line {n} (c=): must be c=IN IP4 <address> or c=IN IP6 <address>")
    try:
        address = ipaddress.ip_address(parts[2])
    except ValueError:
        raise SdpError(f"line {n} (c=): the address is not an IP address") from None
    if address.version != int(parts[1][2]):
        raise SdpError(f"line {n} (c=): the address is not of the family {parts[1]} names")


def _check_session(session: _Section) -> None:
    for n, name, value in session.attrs:
        _check_transport_attr(n, name, value)
        if name == "msid-semantic" and not (value or "").split():
            raise SdpError(f"line {n} (a=msid-semantic): must name its semantics (WMS)")


def _check_transport_attr(n: int, name: str, value: str | None) -> None:
    """ICE and DTLS attributes, at the session's level or a media section's."""
    if name in ("ice-ufrag", "ice-pwd"):
        low = 4 if name == "ice-ufrag" else 22
        if value is None or not _ICE_CHARS.fullmatch(value) or not low <= len(value) <= 256:
            raise SdpError(
                f"line {n} (a={name}): must be {low} to 256 letters, digits, + or / (RFC 8839)"
            )
    elif name == "fingerprint":
        parts = (value or "").split(" ")
        if len(parts) != 2 or not _TOKEN.fullmatch(parts[0]):
            raise SdpError(f"line {n} (a=fingerprint): must be <algorithm> <hex:hex:...>")
        algorithm, digest = parts[0].lower(), parts[1]
        if not _FINGERPRINT_HEX.fullmatch(digest):
            raise SdpError(f"line {n} (a=fingerprint): the digest is not hex bytes split by ':'")
        size = FINGERPRINTS.get(algorithm)
        if size is not None and (len(digest) + 1) // 3 != size:
            raise SdpError(
                f"line {n} (a=fingerprint): a {algorithm} digest has {size} bytes, this one "
                f"{(len(digest) + 1) // 3}"
            )
    elif name == "setup" and value not in SETUP_ROLES:
        raise SdpError(f"line {n} (a=setup): must be actpass, active or passive")
    elif name == "group" and not (value or "").strip():
        raise SdpError(f"line {n} (a=group): must name its semantics (a=group:BUNDLE ...)")


def _check_media(media: _Section, m_line: str, session: _Section) -> None:
    n = media.start
    parts = m_line.split(" ")
    kind = parts[0]
    if kind != "audio":
        raise SdpError(
            f"line {n}: {_name(kind)}, and no m=audio line: a browser test call takes one "
            "m=audio line (no video, no data channel)"
        )
    if len(parts) < 4 or "" in parts:
        raise SdpError(
            f"line {n} (m=audio): must be m=audio <port> <transport> <formats...>, one space apart"
        )
    port = _int(parts[1], 0, 65535)
    if port is None:
        raise SdpError(f"line {n} (m=audio): the port is not a number from 0 to 65535")
    if port == 0:
        raise SdpError(f"line {n} (m=audio): port 0 declines the audio stream")
    if parts[2] not in DTLS_SRTP_PROFILES:
        raise SdpError(
            f"line {n} (m=audio): the transport must be DTLS-SRTP ({DTLS_SRTP_PROFILES[0]}): "
            "WebRTC media is encrypted"
        )
    formats: list[int] = []
    for fmt in parts[3:]:
        pt = _int(fmt, 0, 127)
        if pt is None or pt in _RTCP_CONFLICT:
            raise SdpError(
                f"line {n} (m=audio): each format must be an RTP payload type, 0 to 127 "
                "(not 72 to 76)"
            )
        formats.append(pt)
    codecs: dict[int, str] = {}  # payload type -> encoding name, lower case
    candidates = 0
    for ln, name, value in media.attrs:
        _check_transport_attr(ln, name, value)
        if name == "rtpmap":
            pt, codec = _check_rtpmap(ln, value, formats)
            if pt in codecs:
                raise SdpError(f"line {ln} (a=rtpmap): a second a=rtpmap for the same format")
            codecs[pt] = codec
        elif name == "candidate":
            candidates += 1
            if candidates > MAX_CANDIDATES:
                raise SdpError(f"line {ln} (a=candidate): more than {MAX_CANDIDATES} candidates")
            _check_candidate(ln, value)
        elif name == "extmap":
            _check_extmap(ln, value)
        elif name == "rtcp":
            _check_rtcp(ln, value)
        elif name == "ssrc":
            _check_ssrc(ln, value)
        elif name == "ssrc-group":
            _check_ssrc_group(ln, value)
        elif name in ("max-message-size", "sctp-port"):
            if value is None or _int(value, 0, 2**32 - 1) is None:
                raise SdpError(f"line {ln} (a={name}): must be a number")
        elif name == "sctpmap":
            head = (value or "").split(" ", 1)
            if len(head) != 2 or _int(head[0], 0, 65535) is None:
                raise SdpError(f"line {ln} (a=sctpmap): must be <port> <protocol>")
        elif name == "mid":
            if value is None or not _TOKEN.fullmatch(value):
                raise SdpError(f"line {ln} (a=mid): must be a token (a=mid:0)")
        elif name == "msid":
            ids = (value or "-").split(" ")
            if len(ids) > 2 or "" in ids:
                raise SdpError(f"line {ln} (a=msid): must be <stream id> [<track id>]")
        elif name in DIRECTIONS and value is not None:
            raise SdpError(f"line {ln} (a={name}): a direction takes no value")
    for ln, name, value in media.attrs:  # after the rtpmaps, which these refer to
        if name == "fmtp":
            _check_fmtp(ln, value, codecs)
        elif name == "rtcp-fb":
            _check_rtcp_fb(ln, value)
    if not any(CODECS.get(name) is not None for name in codecs.values()):
        raise SdpError(
            f"line {n} (m=audio): no codec this node decodes (opus/48000, G722/8000, "
            "PCMU/8000 or PCMA/8000 by a=rtpmap)"
        )
    _check_negotiation(media, session)


def _check_negotiation(media: _Section, session: _Section) -> None:
    """What the call needs to connect at all, in the media section or the session's."""
    n = media.start

    def either(name: str) -> tuple[int, str | None] | None:
        return media.first(name) or session.first(name)

    mid = media.first("mid")
    if mid is None:
        raise SdpError(f"line {n} (m=audio): no a=mid (the media section's identification)")
    for ln, value in session.all("group"):
        semantics, *items = (value or "").split()
        if semantics == "BUNDLE" and any(item != mid[1] for item in items):
            raise SdpError(f"line {ln} (a=group:BUNDLE): names a mid no m= line has")
    if media.first("rtcp-mux") is None:
        raise SdpError(f"line {n} (m=audio): no a=rtcp-mux: WebRTC sends RTP and RTCP on one port")
    directions = [name for _, name, _ in media.attrs if name in DIRECTIONS]
    if not directions:
        raise SdpError(f"line {n} (m=audio): no direction (a=sendrecv)")
    if len(directions) > 1:
        raise SdpError(f"line {n} (m=audio): more than one direction")
    if directions[0] in ("recvonly", "inactive"):
        raise SdpError(
            f"line {n} (m=audio): a={directions[0]}: the browser sends no audio, and the bot "
            "would hear nothing (a=sendrecv)"
        )
    for name, why in (
        ("ice-ufrag", "ICE could never check the connection"),
        ("ice-pwd", "ICE could never check the connection"),
        ("setup", "DTLS could not choose its roles"),
    ):
        if either(name) is None:
            raise SdpError(f"no a={name} (in m=audio or the session): {why}")
    prints = media.all("fingerprint") + session.all("fingerprint")
    if not any((v or "").split(" ")[0].lower() in FINGERPRINTS for _, v in prints):
        raise SdpError(
            "no a=fingerprint of sha-256, sha-384 or sha-512 (in m=audio or the session): "
            "the DTLS handshake could never be checked, and the call never connects"
        )


def _check_rtpmap(n: int, value: str | None, formats: list[int]) -> tuple[int, str]:
    head = (value or "").split(" ")
    if len(head) != 2:
        raise SdpError(f"line {n} (a=rtpmap): must be <format> <name>/<clock rate>[/<channels>]")
    pt = _int(head[0], 0, 127)
    if pt is None or pt not in formats:
        raise SdpError(f"line {n} (a=rtpmap): its format is not one the m=audio line lists")
    bits = head[1].split("/")
    if (
        len(bits) not in (2, 3)
        or not _TOKEN.fullmatch(bits[0])
        or _int(bits[1], 1, 10**7) is None
        or (len(bits) == 3 and _int(bits[2], 1, 255) is None)
    ):
        raise SdpError(f"line {n} (a=rtpmap): must be <format> <name>/<clock rate>[/<channels>]")
    name = bits[0].lower()
    if CODECS.get(name) not in (None, int(bits[1])):
        return pt, f"{name}/{bits[1]}"  # a clock rate aiortc does not decode it at
    return pt, name


def _check_fmtp(n: int, value: str | None, codecs: dict[int, str]) -> None:
    head = (value or "").split(" ", 1)
    if len(head) != 2:
        raise SdpError(f"line {n} (a=fmtp): must be <format> <parameters>")
    pt = _int(head[0], 0, 127)
    if pt is None or pt not in codecs:
        raise SdpError(f"line {n} (a=fmtp): its format has no a=rtpmap in m=audio")
    for param in head[1].split(";"):
        key, sep, val = param.partition("=")
        if sep and key in _FMTP_INTS and _int(val, 0, 2**31 - 1) is None:
            raise SdpError(f"line {n} (a=fmtp): {key} must be a number")


def _check_rtcp_fb(n: int, value: str | None) -> None:
    bits = (value or "").split(" ")
    if len(bits) < 2 or "" in bits[:2] or (bits[0] != "*" and _int(bits[0], 0, 127) is None):
        raise SdpError(f"line {n} (a=rtcp-fb): must be <format or *> <feedback type>")


def _check_candidate(n: int, value: str | None) -> None:
    bits = (value or "").split(" ")
    wrong = f"line {n} (a=candidate): "
    if len(bits) < 8 or "" in bits:
        raise SdpError(
            wrong + "must be <foundation> <component> <transport> <priority> <address> "
            "<port> typ <type> ..., one space apart"
        )
    if not _ICE_CHARS.fullmatch(bits[0]) or len(bits[0]) > 32:
        raise SdpError(wrong + "the foundation must be 1 to 32 letters, digits, + or /")
    if _int(bits[1], 1, 256) is None:
        raise SdpError(wrong + "the component must be a number from 1 to 256")
    if bits[2].lower() not in ("udp", "tcp"):
        raise SdpError(wrong + "the transport must be udp or tcp")
    if _int(bits[3], 0, 2**32 - 1) is None:
        raise SdpError(wrong + "the priority must be a number")
    if _int(bits[5], 0, 65535) is None:
        raise SdpError(wrong + "the port must be a number from 0 to 65535")
    if bits[6] != "typ" or bits[7] not in ("host", "srflx", "prflx", "relay"):
        raise SdpError(wrong + "must go on with typ host, srflx, prflx or relay")
    for i in range(8, len(bits) - 1, 2):
        if bits[i] == "rport" and _int(bits[i + 1], 0, 65535) is None:
            raise SdpError(wrong + "rport must be a number from 0 to 65535")


def _check_extmap(n: int, value: str | None) -> None:
    bits = (value or "").split(" ")
    ident = bits[0].split("/")
    if (
        len(bits) < 2
        or "" in bits[:2]
        or len(ident) > 2
        or _int(ident[0], 1, 255) is None
        or (len(ident) == 2 and ident[1] not in DIRECTIONS)
    ):
        raise SdpError(f"line {n} (a=extmap): must be <id 1-255>[/<direction>] <uri>")
    if len(bits) > 2:
        raise SdpError(f"line {n} (a=extmap): extension attributes are not taken")


def _check_rtcp(n: int, value: str | None) -> None:
    bits = (value or "").split(" ", 1)
    if _int(bits[0], 0, 65535) is None:
        raise SdpError(f"line {n} (a=rtcp): must be <port> IN IP4 <address>")
    if len(bits) == 1:
        raise SdpError(f"line {n} (a=rtcp): must name the address too (<port> IN IP4 <address>)")
    _check_connection(n, bits[1])


def _check_ssrc(n: int, value: str | None) -> None:
    bits = (value or "").split(" ", 1)
    if _int(bits[0], 0, 2**32 - 1) is None or len(bits) != 2 or ":" not in bits[1]:
        raise SdpError(f"line {n} (a=ssrc): must be <ssrc> <attribute>:<value>")


def _check_ssrc_group(n: int, value: str | None) -> None:
    bits = (value or "").split()
    if not bits or any(_int(b, 0, 2**32 - 1) is None for b in bits[1:]):
        raise SdpError(f"line {n} (a=ssrc-group): must be <semantics> <ssrc> ...")
