"""Telling "the database refused us" (credentials, no such database) from "it is away".

An outage passes: the call log spools and catches up. A refusal does not pass by waiting:
the node stops at start with one line saying what the database said, instead of spooling
for ever under a warning that it is "unreachable".
"""

from __future__ import annotations

import re

from sqlalchemy.engine import make_url

# PostgreSQL SQLSTATEs of a refused login or an unknown database.
_AUTH_STATES = {"28P01": "refused the login", "28000": "refused the login"}
_DB_STATES = {"3D000": "has no such database"}
_AUTH_TEXT = re.compile(
    r"password authentication failed|authentication failed|role \"[^\"]*\" does not exist"
    r"|no password supplied|no pg_hba\.conf entry",
    re.I,
)
_DB_TEXT = re.compile(r"database \"[^\"]*\" does not exist", re.I)


class DatabaseRefused(RuntimeError):
    """The call-log database answered but will not let this node in; the message says why."""


def refusal(exc: BaseException) -> str | None:
    """What the database refused (its own words), or ``None`` when it is merely away."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        for err in (cur, getattr(cur, "orig", None)):
            if err is None:
                continue
            state = getattr(err, "sqlstate", None)
            text = " ".join(str(err).split())
            detail = _server_words(text)
            if state in _AUTH_STATES or _AUTH_TEXT.search(text):
                return f"refused the login: {detail}"
            if state in _DB_STATES or _DB_TEXT.search(text):
                return f"has no such database: {detail}"
        cur = cur.__cause__ or cur.__context__
    return None


def _server_words(text: str) -> str:
    """The server's message without the driver's preamble (``connection failed: ...``)."""
    m = re.search(r"FATAL:\s*(.*?)(?:\s*\(Background on this error.*)?$", text)
    return (m.group(1) if m else text)[:300]


def refused_error(url: str, why: str) -> DatabaseRefused:
    shown = make_url(url).render_as_string(hide_password=True)
    return DatabaseRefused(
        f"the call-log database at {shown} {why} (check SWITCHBOARD_DATABASE_URL)"
    )
