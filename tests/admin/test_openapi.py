"""The OpenAPI document against what the API answers: the errors each operation gives, in one
schema; who may call it; the limits it checks; a 405's ``Allow``.

Found by an API review: the document listed none of the 401/403/404/409/413/503 answers the
API gives, nor the date-range and configuration size limits it checks (schemathesis took 12
requests the document allowed for rejected); some 422s carried a sentence instead of the
documented list; a 405's ``Allow`` said ``GET`` on paths that also take POST, PATCH or DELETE.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.errors import ErrorResponse
from admin.server import AdminServer
from admin.settings import AdminSettings
from bot.config import limits
from tests.admin.conftest import add_token, bearer

ERROR = {"$ref": "#/components/schemas/ErrorResponse"}


def _doc(engine: AsyncEngine) -> dict[str, Any]:
    return create_app(engine, AdminSettings()).openapi()


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m.upper(), path, op) for path, ops in doc["paths"].items() for m, op in ops.items()]


async def test_every_operation_documents_its_errors_in_one_schema(
    admin_engine: AsyncEngine,
) -> None:
    doc = _doc(admin_engine)
    operations = _operations(doc)
    assert len(operations) >= 30
    for method, path, op in operations:
        codes = set(op["responses"])
        if path != "/api/v1/auth/login" and not (path == "/metrics" and "security" not in op):
            assert {"401"} <= codes, (method, path, codes)
            assert op["security"] == [{"bearer": []}, {"session": []}], (method, path)
        if method != "GET":
            assert {"413", "422"} <= codes, (method, path, codes)
        if method != "GET" and path != "/api/v1/auth/login":
            assert "403" in codes, (method, path, codes)  # the cookie's CSRF token
        for code, response in op["responses"].items():
            if code.startswith(("4", "5")) and code != "416":
                assert response["content"]["application/json"]["schema"] == ERROR, (path, code)
    by_op = {(m, p): set(op["responses"]) for m, p, op in operations}
    assert {"404", "409"} <= by_op[("PATCH", "/api/v1/users/{name}")]
    assert "409" in by_op[("POST", "/api/v1/users")]
    assert {"401", "429"} <= by_op[("POST", "/api/v1/auth/login")]
    assert "403" in by_op[("GET", "/api/v1/audit")]  # admins only
    assert "403" not in by_op[("GET", "/api/v1/calls")]  # any role may
    assert "404" in by_op[("DELETE", "/api/v1/tokens/{token_id}")]
    assert {"404", "409"} <= by_op[("PATCH", "/api/v1/config/intents/{name}")]
    assert "503" in by_op[("POST", "/api/v1/config/try")]
    assert {"429", "503"} <= by_op[("POST", "/api/v1/webrtc/offer")]
    schemas = doc["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    assert schemas["ErrorResponse"]["properties"]["detail"]["type"] == "array"
    assert set(doc["components"]["securitySchemes"]) == {"bearer", "session"}


async def test_the_limits_the_api_checks_are_in_the_schema(admin_engine: AsyncEngine) -> None:
    schemas = _doc(admin_engine)["components"]["schemas"]
    intent = schemas["IntentCreate"]["properties"]
    assert intent["examples"]["maxItems"] == limits.MAX_ITEMS
    assert intent["examples"]["items"]["maxLength"] == limits.MAX_SENTENCE
    assert intent["answer"]["maxLength"] == limits.MAX_TEXT
    settings = schemas["SettingsUpdate"]["properties"]
    (prompt, _) = settings["system_prompt"]["anyOf"]
    assert prompt["maxLength"] == limits.MAX_PROMPT
    (after, _) = settings["filler_after_ms"]["anyOf"]
    assert after["maximum"] == limits.MAX_NUMBER
    knowledge = schemas["KnowledgeCreate"]["properties"]
    assert knowledge["questions"]["items"]["maxLength"] == limits.MAX_SENTENCE
    doc = _doc(admin_engine)
    since = next(
        p for p in doc["paths"]["/api/v1/calls"]["get"]["parameters"] if p["name"] == "since"
    )
    (time, _) = since["schema"]["anyOf"]
    assert time["format"] == "date-time" and time["pattern"].startswith("^(190[1-9]")


async def test_every_error_has_the_one_shape(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    viewer = bearer(await add_token(admin_engine, "vic", "viewer"))
    admin = bearer(await add_token(admin_engine, "ada", "admin"))
    answers = [
        await client.get("/api/v1/calls"),  # 401
        await client.get("/api/v1/users", headers=viewer),  # 403
        await client.patch("/api/v1/users/nobody", json={"role": "viewer"}, headers=admin),  # 404
        await client.put("/api/v1/users", headers=admin),  # 405
        await client.post(  # 409
            "/api/v1/users",
            json={"name": "ada", "password": "correct horse battery", "role": "viewer"},
            headers=admin,
        ),
        await client.post("/api/v1/auth/login", content=b"x" * 300_000),  # 413
        await client.get("/api/v1/summary?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z"),
        await client.get(  # 422 from the route itself (it was a sentence)
            "/api/v1/summary?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z",
            headers=viewer,
        ),
        await client.get("/api/v1/config/matching", headers=viewer),  # 503: no node
    ]
    codes = [r.status_code for r in answers]
    assert codes == [401, 403, 404, 405, 409, 413, 401, 422, 503], codes
    for r in answers:
        ErrorResponse.model_validate(r.json())
    assert answers[7].json()["detail"] == [
        {"loc": ["query", "since"], "msg": "must be before until", "type": "value_error"}
    ]


async def test_a_405_names_every_method_of_the_path(client: httpx.AsyncClient) -> None:
    for method, path, allowed in (
        ("PUT", "/api/v1/users", "GET, POST"),
        ("DELETE", "/api/v1/users", "GET, POST"),
        ("PUT", "/api/v1/users/ada", "PATCH"),
        ("PUT", "/api/v1/config/intents/greeting", "DELETE, GET, PATCH"),
        ("DELETE", "/api/v1/config/settings", "GET, PATCH"),
        ("PUT", "/api/v1/config/intents", "GET, POST"),
        ("GET", "/api/v1/auth/login", "POST"),
    ):
        r = await client.request(method, path)
        assert r.status_code == 405, (method, path)
        assert r.headers["allow"] == allowed, (method, path, r.headers["allow"])


async def test_the_document_is_built_off_the_event_loop_before_serving(
    admin_engine: AsyncEngine,
) -> None:
    """Inside a node the admin API shares the event loop with every call's pipeline: the
    document's first build (pure Python, 0.5 s here) runs on another thread at start, and its
    first request is answered from it."""
    app = create_app(admin_engine, AdminSettings())
    built_on: list[int] = []
    build = app.openapi

    def recorded() -> dict[str, Any]:
        built_on.append(threading.get_ident())
        return build()

    app.openapi = recorded  # type: ignore[method-assign]
    server = AdminServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        assert app.openapi_schema is not None
        assert built_on and threading.get_ident() not in built_on
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
            r = await client.get("/api/v1/openapi.json")
        assert r.status_code == 200
        assert r.json() == app.openapi_schema
    finally:
        await server.stop()
