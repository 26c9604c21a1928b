"""The OpenAPI document as the API behaves: every error each operation can answer, in the one
error schema, who may call it, and the configuration's size limits in its request schemas.

FastAPI documents a route's success and, when it has parameters, a 422 of its own schema.
The rest is added here from what the route depends on, so that a new route is documented
by what it is rather than by a list kept beside it:

- a route that needs a login or a token (``admin.deps.principal``): 401, and the two ways
  in (``bearer``: an API token; ``session``: the console's cookie) as its ``security``;
- one that needs more than the viewer role, or changes anything (the cookie's CSRF token):
  403;
- one that takes a body (any method but GET, HEAD and OPTIONS: ``admin.http.BodyGuard``
  reads every body): 413 and 422;
- one that reads or writes the database (``admin.deps.db_session``): 503 when the database
  cannot be reached or answer in time;
- what a route declares itself (``responses=error_responses(404, 409)``).

Every error status's body is ``ErrorResponse`` (``admin.errors``). The configuration's
request bodies carry the limits ``bot.config.limits`` checks (``maxLength``, ``maxItems``,
``maximum``), so that what the schema allows is what the API takes; what no schema can say
(one intent's examples together, the whole profile's size, an example in two intents) is
in the operations' 422.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic.json_schema import models_json_schema

from admin.deps import db_session, principal
from admin.errors import ERROR_MEANINGS, ErrorResponse
from bot.config import limits

_REF = "#/components/schemas/ErrorResponse"
_SENTENCE_LISTS = frozenset({"examples", "negatives", "questions", "keywords"})
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
#: Statuses whose body is not JSON (a byte range beyond a recording: Starlette's own text).
_NOT_JSON = frozenset({"416"})
SECURITY_SCHEMES = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "an API token (`sbt_...`, from `POST /api/v1/tokens`)",
    },
    "session": {
        "type": "apiKey",
        "in": "cookie",
        "name": "sb_session",
        "description": "the console's login (`POST /api/v1/auth/login`); a change made "
        "with it also needs `X-CSRF-Token`",
    },
}


def install(app: FastAPI) -> None:
    """``app.openapi()`` with the additions above (made once, then cached as FastAPI does)."""
    plain: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = plain()
            document(doc, app)
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _calls(dependant: Dependant) -> Iterator[Any]:
    for dep in dependant.dependencies:
        yield dep.call
        yield from _calls(dep)


def _error(code: int) -> dict[str, Any]:
    return {
        "description": ERROR_MEANINGS.get(code, "Error"),
        "content": {"application/json": {"schema": {"$ref": _REF}}},
    }


def document(doc: dict[str, Any], app: FastAPI) -> None:
    """Add to ``doc`` (FastAPI's document of ``app``) what this module's docstring says."""
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    _, defs = models_json_schema(
        [(ErrorResponse, "serialization")], ref_template="#/components/schemas/{model}"
    )
    schemas.update(defs.get("$defs", {}))
    components["securitySchemes"] = SECURITY_SCHEMES
    for route in iter_route_contexts(app.routes):
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        calls = list(_calls(route.dependant))
        signed_in = principal in calls or any(getattr(c, "role", None) for c in calls)
        roles = {getattr(c, "role", None) for c in calls} - {None}
        path = str(route.path_format)
        for method in route.methods or ():
            op = doc["paths"].get(path, {}).get(method.lower())
            if op is None:
                continue
            codes: set[int] = set()
            if signed_in:
                codes.add(401)
                op["security"] = [{"bearer": []}, {"session": []}]
                if roles - {"viewer"} or method not in _SAFE:
                    codes.add(403)
            if method not in _SAFE:
                codes |= {413, 422}
            if db_session in calls:
                codes.add(503)  # the database unavailable
            _errors(op.setdefault("responses", {}), codes)
            if path.startswith("/api/v1/config") and method not in _SAFE:
                body = op.get("requestBody", {}).get("content", {}).get("application/json")
                if body is not None:
                    _limit(body["schema"], (), schemas, set())
    # FastAPI's own 422 schemas, now that no response refers to them.
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)


def _errors(responses: dict[str, Any], codes: set[int]) -> None:
    """``codes`` added to an operation's ``responses``, and every error in the one schema."""
    for code in codes:
        responses.setdefault(str(code), _error(code))
    for status, response in responses.items():
        if status[0] not in "45" or status in _NOT_JSON:
            continue
        response["content"] = {"application/json": {"schema": {"$ref": _REF}}}
        if response.get("description") in (None, "", "Validation Error"):
            response["description"] = ERROR_MEANINGS.get(int(status), "Error")
        if status in ("429", "503"):
            response["headers"] = {
                "Retry-After": {
                    "description": "seconds to wait (where the API knows)",
                    "schema": {"type": "integer"},
                }
            }


def _limit(node: Any, loc: limits.Loc, schemas: dict[str, Any], seen: set[str]) -> None:
    """``bot.config.limits``'s limits on the JSON schema ``node`` of the profile part at
    ``loc`` (a list's items at index 0), into the components it refers to as well."""
    if not isinstance(node, dict):
        return
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        name = ref.rsplit("/", 1)[1]
        key = f"{name}@{loc[-2:] if loc else ()}"
        if key not in seen and name in schemas:
            seen.add(key)
            _limit(schemas[name], loc, schemas, seen)
        return
    for alternatives in ("anyOf", "oneOf", "allOf"):
        for option in node.get(alternatives, []):
            _limit(option, loc, schemas, seen)
    kind = node.get("type")
    if kind == "string" and "enum" not in node and "const" not in node:
        limit, _ = limits.text_limit(loc)
        node["maxLength"] = min(node.get("maxLength", limit), limit)
        if len(loc) >= 2 and loc[-2] in _SENTENCE_LISTS:
            # What a caller says is matched by its words (``bot.intents.match.normalize``:
            # ASCII letters and digits); one without any is refused as empty.
            node.setdefault("pattern", "[A-Za-z0-9]")
    elif kind == "array":
        node["maxItems"] = min(node.get("maxItems", limits.MAX_ITEMS), limits.MAX_ITEMS)
        _limit(node.get("items"), (*loc, 0), schemas, seen)
    elif kind in ("integer", "number"):
        if "exclusiveMaximum" not in node:
            node["maximum"] = min(node.get("maximum", limits.MAX_NUMBER), limits.MAX_NUMBER)
        if "exclusiveMinimum" not in node:
            node["minimum"] = max(node.get("minimum", -limits.MAX_NUMBER), -limits.MAX_NUMBER)
    elif kind == "object" or "properties" in node:
        for field, sub in node.get("properties", {}).items():
            _limit(sub, (*loc, field), schemas, seen)
