"""Bad input is a 4xx that says why, never a 500, and no error echoes what was sent.

Found by a security test: times at the datetime limits in ``/calls?since=`` and
``/summary?until=`` were 500s (OverflowError), as were ``NaN``, ``Infinity`` and ``1e999``
in any JSON body, the unauthenticated login's included; a 500 carried none of the security
headers; a 422 echoed the request body back, a submitted password included (5 MB in, 5 MB
out).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.http import SECURITY_HEADERS
from admin.settings import AdminSettings
from bot.calllog.store import make_engine
from bot.config.store import seed
from tests.admin.conftest import add_token, bearer
from tests.admin.test_config import PROFILE

EDGES = [
    "0001-01-01T00:00:00",
    "0001-01-01T00:00:00+01:00",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59",
    "9999-12-31T23:59:59-01:00",
]
NOT_JSON = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" + "0" * 400]


def _headers_present(r: httpx.Response) -> None:
    for key, value in SECURITY_HEADERS.items():
        assert r.headers.get(key) == value, (r.status_code, key)


async def test_times_at_the_datetime_limits_are_422(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    for at in EDGES:
        for path in (
            f"/api/v1/calls?since={quote(at)}",
            f"/api/v1/calls?until={quote(at)}",
            f"/api/v1/summary?until={quote(at)}",
            f"/api/v1/summary?since={quote(at)}",
            f"/api/v1/summary/latency?until={quote(at)}",
        ):
            r = await client.get(path, headers=auth)
            assert r.status_code == 422, (path, r.status_code, r.text)
            assert "1900-01-01" in r.text, r.text
            _headers_present(r)
    r = await client.get("/api/v1/summary?since=2026-01-01T00:00:00Z", headers=auth)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("bad", NOT_JSON)
async def test_numbers_that_are_not_json_are_422_in_every_body(
    client: httpx.AsyncClient, admin_engine: AsyncEngine, bad: str
) -> None:
    await seed(admin_engine, PROFILE, "profile:test.toml")
    auth = {
        **bearer(await add_token(admin_engine, "root", "admin")),
        "content-type": "application/json",
    }
    bodies = [
        ("POST", "/api/v1/auth/login", f'{{"name": "root", "password": {bad}}}', {}),
        ("POST", "/api/v1/auth/login", f'{{"name": {bad}, "password": "x"}}', {}),
        ("POST", "/api/v1/users", f'{{"name": "x", "password": {bad}, "role": "admin"}}', auth),
        ("PATCH", "/api/v1/config/settings", f'{{"transfer_timeout_s": {bad}}}', auth),
        ("PATCH", "/api/v1/config/settings", f'{{"llm": {{"temperature": {bad}}}}}', auth),
        ("POST", "/api/v1/tokens", f'{{"name": "t", "role": [{bad}]}}', auth),
        ("POST", "/api/v1/config/try", f'{{"text": {bad}}}', auth),
    ]
    for method, path, body, headers in bodies:
        h = {"content-type": "application/json", **headers}
        r = await client.request(method, path, content=body, headers=h)
        assert r.status_code == 422, (method, path, body[:60], r.status_code, r.text[:200])
        assert "not valid JSON" in r.json()["detail"][0]["msg"], r.text
        _headers_present(r)
    # Nothing of it reached the database: the configuration is still version 1.
    r = await client.get("/api/v1/config/settings", headers=auth)
    assert r.json()["config_version"] == 1


async def test_json_nested_too_deeply_is_422(client: httpx.AsyncClient) -> None:
    """Python's parser recurses into each array: 100,000 of them were a RecursionError."""
    for body in ("[" * 100_000, "[" * 50_000 + "]" * 50_000):
        r = await client.post(
            "/api/v1/auth/login", content=body, headers={"content-type": "application/json"}
        )
        assert r.status_code == 422, r.text[:200]
        assert "nested too deeply" in r.json()["detail"][0]["msg"]
        _headers_present(r)


async def test_a_422_never_echoes_the_body(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    auth = bearer(await add_token(admin_engine, "root", "admin"))
    secret = "hunter2-pw"  # too short: refused
    r = await client.post(
        "/api/v1/users", json={"name": "bob", "password": secret, "role": "viewer"}, headers=auth
    )
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "password"]
    assert "at least 12" in r.json()["detail"][0]["msg"]
    assert secret not in r.text
    r = await client.post("/api/v1/auth/login", json={"name": "bob", "password": 7})
    assert r.status_code == 422
    assert "input" not in r.json()["detail"][0]

    # Large, but under the body limit: refused, and the answer stays small.
    big = "p" * 200_000
    r = await client.post("/api/v1/auth/login", json={"name": "bob", "password": big})
    assert r.status_code == 422
    assert len(r.content) < 1000, len(r.content)
    # A field's name is cut too (an unknown key of 100 kB).
    r = await client.patch("/api/v1/users/bob", json={"k" * 100_000: 1}, headers=auth)
    assert r.status_code in (404, 422)
    assert len(r.content) < 1000, len(r.content)


async def test_a_body_over_the_limit_is_413_naming_it(client: httpx.AsyncClient) -> None:
    huge = "p" * 5_000_000
    r = await client.post("/api/v1/auth/login", json={"name": "bob", "password": huge})
    assert r.status_code == 413
    assert "262144 bytes" in r.json()["detail"][0]["msg"]
    assert len(r.content) < 1000
    _headers_present(r)

    async def chunks():  # no Content-Length: counted as it arrives
        for _ in range(50):
            yield b"x" * 100_000

    r = await client.post(
        "/api/v1/auth/login", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413


async def test_a_server_error_is_json_with_the_security_headers(tmp_path: Path) -> None:
    """A database without the admin tables (never migrated): the query fails, the client
    gets a 500 that says nothing of it, with every header."""
    engine = make_engine(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    app = create_app(engine, AdminSettings())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as c:
        r = await c.post("/api/v1/auth/login", json={"name": "ada", "password": "whatever pw"})
    await engine.dispose()
    assert r.status_code == 500
    assert r.json() == {"detail": [{"loc": [], "msg": "internal error", "type": "internal"}]}
    assert r.headers["cache-control"] == "no-store"
    _headers_present(r)


async def test_a_body_that_is_not_utf8_is_a_422_like_any_malformed_json(
    client: httpx.AsyncClient,
) -> None:
    """Found by the fuzz test once every answer had to be one the document lists: bytes
    that are not UTF-8 got FastAPI's own 400 ("There was an error parsing the body")."""
    r = await client.post(
        "/api/v1/auth/login",
        content=b"7[Q\xd0\xb7\xff\xfe",
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == [
        {
            "loc": ["body"],
            "msg": "not valid JSON: not UTF-8 text",
            "type": "json_invalid",
        }
    ]
    _headers_present(r)
