"""The API's one error handler: every error is JSON, none echoes what was sent, none is a
bare 500 without the security headers.

FastAPI's own 422 carries each field's ``input``: a submitted password, or megabytes of a
refused body, came back in the response. Here a 422 names the field, the reason and the
type, never the value; every text in an error is cut to ``MAX_ERROR_TEXT`` characters (a
reason quoting an example of 5 MB is cut, and so is a path or key it names). An exception
nothing handled is answered 500 ``internal error`` (the server logs its traceback); a node
that cannot do what was asked (``NodeUnavailable``) is a 503 with its reason, and so is a
database that cannot be reached or answer in time (a refused or timed-out connection, a pool
with no free connection, a locked SQLite file): ``database unavailable``, ``Retry-After: 5``,
logged as a warning. Nothing was written: the request's transaction never committed.

Every error has one shape, ``ErrorResponse``: ``{"detail": [{"loc", "msg", "type"}]}``, a
422's field errors and a 404's "no user 'ada'" alike (``loc`` empty when no one field is at
fault). A 405 names in ``Allow`` every method the path takes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from pydantic import BaseModel
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.routing import Match, Route

from admin.http import SECURITY_HEADERS
from admin.node_port import NodeUnavailable

MAX_ERROR_TEXT = 300
#: Seconds a client is told to wait before trying again when the database is unavailable.
DB_RETRY_AFTER_S = 5

log = logging.getLogger(__name__)


#: ``type`` of an error that names no field, by status.
ERROR_TYPES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid",
    429: "rate_limited",
    500: "internal",
    503: "unavailable",
}

#: What each status means here (the OpenAPI document's descriptions).
ERROR_MEANINGS = {
    401: "Not logged in, or the API token is unknown or revoked (`WWW-Authenticate: Bearer`)",
    403: "The role is too low for this, or a change made with the session cookie lacks its "
    "`X-CSRF-Token`",
    404: "Not found",
    405: "The path does not take this method (`Allow` lists the ones it takes)",
    409: "In conflict with the current state (taken name, a change at the same moment, the "
    "last admin): read again",
    413: "The request body is larger than `max_body_bytes`",
    422: "A field is missing, malformed or beyond its limits: `loc` names it, `msg` says why",
    429: "Too many attempts: try again after `Retry-After` seconds",
    500: "An unexpected failure (the server's log has it)",
    503: "Needs what this server does not have (a node's models, a free call, its database): "
    "`msg` says what; `Retry-After` when trying again later may work",
}


class ErrorItem(BaseModel):
    """One thing wrong with a request."""

    #: Where: ``["body", "name"]``, ``["query", "since"]``; empty when no one field is.
    loc: list[str | int]
    #: Why, in words (never the value that was sent).
    msg: str
    #: A stable kind: ``missing``, ``string_too_long``, ``not_found``, ``conflict``...
    type: str


class ErrorResponse(BaseModel):
    """Every error the API answers (4xx and 5xx): one item a problem."""

    detail: list[ErrorItem]


def error(
    code: int,
    msg: str,
    *,
    loc: Iterable[str | int] = (),
    type: str | None = None,
    headers: dict[str, str] | None = None,
) -> HTTPException:
    """An HTTP error in the one shape: ``{"detail": [{"loc", "msg", "type"}]}``."""
    item = {"loc": list(loc), "msg": msg, "type": type or ERROR_TYPES.get(code, "error")}
    return HTTPException(code, detail=[item], headers=headers)  # type: ignore[arg-type]


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route: each status with ``ErrorResponse`` and its meaning."""
    return {
        code: {"model": ErrorResponse, "description": ERROR_MEANINGS.get(code, "Error")}
        for code in codes
    }


def _items(code: int, detail: Any) -> list[dict[str, Any]]:
    """``detail`` in the one shape: a sentence becomes one item naming no field."""
    if isinstance(detail, list) and all(isinstance(d, dict) for d in detail):
        return field_errors(detail)
    return [{"loc": [], "msg": short(str(detail)), "type": ERROR_TYPES.get(code, "error")}]


def allowed_methods(request: Request) -> list[str]:
    """Every method of every route whose path matches the request's (Starlette's own 405
    names only the first such route's)."""
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.router.routes):
        if isinstance(route.original_route, Route) and route.methods:
            matched, _ = route.matches(request.scope)
            if matched is not Match.NONE:
                methods |= route.methods
    return sorted(methods)


def short(value: Any) -> Any:
    """``value`` with every string in it cut to ``MAX_ERROR_TEXT`` characters."""
    if isinstance(value, str):
        return value if len(value) <= MAX_ERROR_TEXT else value[:MAX_ERROR_TEXT] + "..."
    if isinstance(value, dict):
        return {short(str(k)): short(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [short(v) for v in value]
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return short(str(value))


def field_errors(errors: Any) -> list[dict[str, Any]]:
    """Pydantic's errors as ``{loc, msg, type}``: no ``input``, no ``ctx``, no URL."""
    return [
        {
            "loc": short(list(err.get("loc", ()))),
            "msg": short(str(err.get("msg", ""))),
            "type": short(str(err.get("type", ""))),
        }
        for err in errors
    ]


async def _validation(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": field_errors(exc.errors())}, status_code=422)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code in (204, 304):
        return JSONResponse(None, status_code=exc.status_code, headers=exc.headers)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        methods = allowed_methods(request)
        if methods:
            headers["Allow"] = ", ".join(methods)
    return JSONResponse(
        {"detail": _items(exc.status_code, exc.detail)},
        status_code=exc.status_code,
        headers=headers or None,
    )


async def _node_unavailable(_request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": _items(503, str(exc))}, status_code=503)


#: PostgreSQL's error classes that say "not now" rather than "wrong": connection exception,
#: insufficient resources (too many connections), operator intervention (shutting down).
_PG_NOT_NOW = ("08", "53", "57")
#: SQLite's busy and locked (primary result codes): another writer holds the file.
_SQLITE_NOT_NOW = (5, 6)


def db_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot serve now (trying again later may work),
    rather than that something is wrong with the database or the query (a missing table)."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, OperationalError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in _SQLITE_NOT_NOW
    # psycopg: a failure on the client's side (refused, timed out) has no SQLSTATE.
    state = getattr(orig, "sqlstate", None)
    return state is None or str(state)[:2] in _PG_NOT_NOW


async def _db_unavailable(request: Request, exc: Exception) -> JSONResponse:
    if not db_unavailable(exc):
        raise exc  # a fault, not an outage: the 500 below, its traceback logged
    # The driver's words name the host and port: the log has them, the client does not.
    log.warning("database unavailable for %s %s: %s", request.method, request.url.path, exc)
    return JSONResponse(
        {"detail": _items(503, "database unavailable: try again later")},
        status_code=503,
        headers={"Retry-After": str(DB_RETRY_AFTER_S)},
    )


async def _unhandled(request: Request, _exc: Exception) -> JSONResponse:
    # ServerErrorMiddleware, outside every other middleware, sends this one (so the security
    # headers are added here), then raises the exception again for the server to log.
    headers = dict(SECURITY_HEADERS)
    if request.url.path.startswith("/api/"):
        headers["Cache-Control"] = "no-store"
    return JSONResponse({"detail": _items(500, "internal error")}, status_code=500, headers=headers)


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(NodeUnavailable, _node_unavailable)
    app.add_exception_handler(OperationalError, _db_unavailable)
    app.add_exception_handler(PoolTimeout, _db_unavailable)
    app.add_exception_handler(Exception, _unhandled)
