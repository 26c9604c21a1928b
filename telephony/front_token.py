"""The front's stamp on the new calls it hands to a worker: one door into a node.

A worker's SIP port must be reachable by the calls it places itself (the agent legs of a
bridged transfer), so it cannot simply be hidden. Instead the front stamps every new INVITE
it forwards with an HMAC of its Call-ID under a key made at node start, which only the node
and its workers hold (the worker gets it in its environment, never on its command line); a
worker answers a new INVITE only if its stamp checks out (403 otherwise) and drops every
other request outside its dialogs (``telephony.pjsip_c.refuse_strangers``). So bans, peers,
digest and rate limits, which live in the front, apply to every call a node answers.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re

HEADER = "X-Front-Stamp"
#: The worker reads its key from here (hex) and removes it from its environment.
KEY_ENV = "SIP_FRONT_STAMP_KEY"
_LINE = re.compile(r"(?im)^x-front-stamp[ \t]*:[ \t]*([0-9a-f]+)[ \t]*\r?$")


def new_key() -> bytes:
    return os.urandom(32)


def stamp(key: bytes, call_id: str) -> str:
    return hmac.new(key, call_id.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()[
        :32
    ]


def header_line(key: bytes, call_id: str) -> bytes:
    return f"{HEADER}: {stamp(key, call_id)}\r\n".encode()


def stamped(key: bytes, message: str, call_id: str) -> bool:
    """Whether ``message`` (a whole SIP request) carries the front's stamp for ``call_id``.

    Only the header section is searched, and exactly one stamp line must be there."""
    head = message.split("\r\n\r\n", 1)[0]
    found = _LINE.findall(head)
    return len(found) == 1 and hmac.compare_digest(found[0], stamp(key, call_id))
