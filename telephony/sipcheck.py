"""Checks pjsip's liberal parser lets through, applied to INVITEs before we answer them.

RFC 4475 section 3.1.2 lists messages that must be rejected. pjsip parses a few of them
as valid and hands them to the application; for an INVITE we answer those with 400.
"""

from __future__ import annotations

import re

_REQUEST_LINE = re.compile(r"^[A-Za-z0-9.!%*_+`'~-]+ [^ \t]+ SIP/2\.0$")
_CONTENT_LENGTH = re.compile(r"^(?:content-length|l)[ \t]*:[ \t]*(\d+)[ \t]*$", re.I | re.M)


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
    return None
