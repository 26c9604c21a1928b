"""What every response carries, and what every request body must be, before a route sees it.

Two pure ASGI middlewares, so that they also cover the responses they make themselves and
the ones FastAPI's error handlers make: the security headers on every response, and a
request body bounded in size (413 naming the limit) and strict JSON (422: ``NaN``,
``Infinity``, numbers beyond the float range and integers beyond 64 bits are not JSON, and
Python's parser would otherwise let them through to the routes, the database and the
error responses).
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The console loads nothing from elsewhere, and no other site may frame it.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
_RAW_HEADERS = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
_NO_STORE = (b"cache-control", b"no-store")
_INT_LIMIT = 2**63


class SecurityHeaders:
    """Adds the security headers (and ``Cache-Control: no-store`` under /api/) to every
    response that does not set them itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = str(scope.get("path", "")).startswith("/api/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = add_headers(list(message.get("headers", [])), api=api)
            await send(message)

        await self.app(scope, receive, with_headers)


def add_headers(headers: list[tuple[bytes, bytes]], *, api: bool) -> list[tuple[bytes, bytes]]:
    """``headers`` with each security header it lacks."""
    present = {k.lower() for k, _ in headers}
    extra = [(k, v) for k, v in _RAW_HEADERS if k not in present]
    if api and _NO_STORE[0] not in present:
        extra.append(_NO_STORE)
    return headers + extra


class NotStrictJson(ValueError):
    """A body that Python's parser reads but JSON does not allow."""


def _constant(name: str) -> Any:
    raise NotStrictJson(f"{name} is not a JSON number (NaN and Infinity are not JSON)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotStrictJson("a number beyond the float range")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > 19 or abs(int(text)) >= _INT_LIMIT:
        raise NotStrictJson("an integer beyond 64 bits")
    return int(text)


def strict_json_problem(body: bytes) -> str | None:
    """Why ``body`` is refused as JSON, or None (it parses, or is left to FastAPI: malformed
    JSON gets FastAPI's own 422 at its position)."""
    try:
        json.loads(body, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except NotStrictJson as exc:
        return str(exc)
    except UnicodeDecodeError:
        # FastAPI's own answer to it was a 400 of a shape and status of its own.
        return "not UTF-8 text"
    except ValueError:
        return None
    except RecursionError:
        return "nested too deeply"
    return None


def _is_json(scope: Scope) -> bool:
    for key, value in scope.get("headers", []):
        if key == b"content-type":
            kind = bytes(value).split(b";", 1)[0].strip().lower()
            return kind == b"application/json" or kind.endswith(b"+json")
    return False


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", []):
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _json_error(send: Send, status: int, detail: Any) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyGuard:
    """Reads a request's body up to ``max_bytes`` (413 beyond, naming the limit), refuses
    JSON that is not strict JSON (422 with the reason), and hands the body on unchanged."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        too_large = [
            {
                "loc": ["body"],
                "msg": f"the request body is limited to {self.max_bytes} bytes",
                "type": "too_large",
            }
        ]
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _json_error(send, 413, too_large)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _json_error(send, 413, too_large)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if body and _is_json(scope):
            problem = strict_json_problem(body)
            if problem is not None:
                detail = [
                    {
                        "loc": ["body"],
                        "msg": f"not valid JSON: {problem}",
                        "type": "json_invalid",
                    }
                ]
                await _json_error(send, 422, detail)
                return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
