"""What the front makes of requests inside a call, and of the responses it passes back.

- ``dtmf_key``: the key of an in-dialog INFO carrying DTMF, as PBXs and SBCs send it
  (``application/dtmf-relay``: ``Signal=5`` and ``Duration=160`` lines; ``application/dtmf``:
  the key alone), or None.
- ``neutral_response``: a worker's response with nothing in it naming the SIP stack: the
  reason phrase RFC 3261's for its code, the SDP session name ``-``, no ``a=X-nat``.
"""

from __future__ import annotations

import re

from telephony.sipmsg import SipScan, scan

DTMF_TYPES = ("application/dtmf-relay", "application/dtmf")
KEYS = frozenset("0123456789*#ABCD")
DEFAULT_DURATION_MS = 160
MAX_DURATION_MS = 10_000

_SIGNAL = re.compile(r"(?im)^\s*signal\s*=\s*(\S+)\s*$")
_DURATION = re.compile(r"(?im)^\s*duration\s*=\s*(\d{1,6})\s*$")
# RFC 4733's event codes, which some gateways put in Signal= instead of the key itself.
_EVENT_KEYS = "0123456789*#ABCD"


def media_type(msg: SipScan) -> str:
    ctype = msg.get("content-type")
    if ctype is None:
        return ""
    return ctype.value.split(b";", 1)[0].strip().decode("latin-1").lower()


def dtmf_key(msg: SipScan, data: bytes) -> tuple[str, int] | None:
    """(key, duration in ms) of a DTMF INFO, or None if it carries none."""
    kind = media_type(msg)
    if kind not in DTMF_TYPES or msg.body_start < 0:
        return None
    body = data[msg.body_start :].decode("latin-1", "replace")
    duration = DEFAULT_DURATION_MS
    if kind == "application/dtmf":
        signal = body.strip()
    else:
        m = _SIGNAL.search(body)
        if m is None:
            return None
        signal = m.group(1)
        d = _DURATION.search(body)
        if d is not None:
            duration = min(MAX_DURATION_MS, max(1, int(d.group(1))))
    signal = signal.upper()
    if signal.isdigit() and len(signal) == 2 and 10 <= int(signal) <= 15:
        signal = _EVENT_KEYS[int(signal)]
    if len(signal) != 1 or signal not in KEYS:
        return None
    return signal, duration


# RFC 3261 21 (and RFC 3262, 3265, 3329, 4028, 4412, 5360, 6086's codes a stack may send).
REASONS = {
    100: "Trying",
    180: "Ringing",
    181: "Call Is Being Forwarded",
    182: "Queued",
    183: "Session Progress",
    199: "Early Dialog Terminated",
    200: "OK",
    202: "Accepted",
    300: "Multiple Choices",
    301: "Moved Permanently",
    302: "Moved Temporarily",
    380: "Alternative Service",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    407: "Proxy Authentication Required",
    408: "Request Timeout",
    410: "Gone",
    413: "Request Entity Too Large",
    415: "Unsupported Media Type",
    416: "Unsupported URI Scheme",
    420: "Bad Extension",
    421: "Extension Required",
    422: "Session Interval Too Small",
    423: "Interval Too Brief",
    480: "Temporarily Unavailable",
    481: "Call/Transaction Does Not Exist",
    482: "Loop Detected",
    483: "Too Many Hops",
    484: "Address Incomplete",
    485: "Ambiguous",
    486: "Busy Here",
    487: "Request Terminated",
    488: "Not Acceptable Here",
    489: "Bad Event",
    491: "Request Pending",
    493: "Undecipherable",
    500: "Server Internal Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Server Time-out",
    505: "Version Not Supported",
    513: "Message Too Large",
    600: "Busy Everywhere",
    603: "Decline",
    604: "Does Not Exist Anywhere",
    606: "Not Acceptable",
}

_SESSION_NAME = re.compile(rb"(?m)^s=[^\r\n]*")
_X_NAT = re.compile(rb"(?m)^a=X-nat:[^\r\n]*\r?\n")
_CONTENT_LENGTH = re.compile(rb"(?im)^(content-length|l)[ \t]*:[ \t]*\d+")


def neutral_response(data: bytes) -> bytes:
    """``data`` (a response) with a standard reason phrase and a neutral SDP, if any."""
    eol = data.find(b"\r\n")
    if eol < 12 or not data.startswith(b"SIP/2.0 "):
        return data
    code = data[8:11]
    if code.isdigit():
        standard = REASONS.get(int(code))
        if standard is not None and data[12:eol] != standard.encode():
            # Our own phrases that explain a refusal are kept (e.g. "Bad Request (...)").
            phrase = data[12:eol]
            if not phrase.startswith(standard.encode() + b" ("):
                data = data[:12] + standard.encode() + data[eol:]
    msg = scan(data)
    if b"s=pjmedia" not in data and b"X-nat" not in data:
        return data
    if media_type(msg) != "application/sdp" or msg.body_start < 0:
        return data
    head, body = data[: msg.body_start], data[msg.body_start :]
    new_body = _X_NAT.sub(b"", _SESSION_NAME.sub(b"s=-", body, count=1))
    if new_body == body:
        return data
    head = _CONTENT_LENGTH.sub(lambda m: m.group(1) + b": " + str(len(new_body)).encode(), head)
    return head + new_body
