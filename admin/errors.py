"""The API's one error handler: every error is JSON, none echoes what was sent, none is a
bare 500 without the security headers.

FastAPI's own 422 carries each field's ``input``: a submitted password, or megabytes of a
refused body, came back in the response. Here a 422 names the field, the reason and the
type, never the value; every text in an error is cut to ``MAX_ERROR_TEXT`` characters (a
reason quoting an example of 5 MB is cut, and so is a path or key it names). An exception
nothing handled is answered 500 ``internal error`` (the server logs its traceback); a node
that cannot do what was asked (``NodeUnavailable``) is a 503 with its reason.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from admin.http import SECURITY_HEADERS
from admin.node_port import NodeUnavailable

MAX_ERROR_TEXT = 300


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


async def _http(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code in (204, 304):
        return JSONResponse(None, status_code=exc.status_code, headers=exc.headers)
    return JSONResponse(
        {"detail": short(exc.detail)}, status_code=exc.status_code, headers=exc.headers
    )


async def _node_unavailable(_request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": short(str(exc))}, status_code=503)


async def _unhandled(request: Request, _exc: Exception) -> JSONResponse:
    # ServerErrorMiddleware, outside every other middleware, sends this one (so the security
    # headers are added here), then raises the exception again for the server to log.
    headers = dict(SECURITY_HEADERS)
    if request.url.path.startswith("/api/"):
        headers["Cache-Control"] = "no-store"
    return JSONResponse({"detail": "internal error"}, status_code=500, headers=headers)


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(NodeUnavailable, _node_unavailable)
    app.add_exception_handler(Exception, _unhandled)
