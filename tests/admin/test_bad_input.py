"""Bad input is a 4xx that says why, never a 500, and no error echoes what was sent.

Found by a security test: times at the datetime limits in ``/calls?since=`` and
``/summary?until=`` were 500s (OverflowError), as were ``NaN``, ``Infinity`` and ``1e999``
in any JSON body, the unauthenticated login's included; a 500 carried none of the security
headers; a 422 echoed the request body back, a submitted password included (5 MB in, 5 MB
out).
"""

from __future__ import annotations

import logging
import socket
import sqlite3
from pathlib import Path
from urllib.parse import quote

import httpx
import psycopg
import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.errors import DB_RETRY_AFTER_S, db_unavailable
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


async def test_a_database_that_cannot_be_reached_is_a_503_to_try_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found when a test's connection to a loaded PostgreSQL timed out: the request was a
    500 "internal error", as if the server were broken. A database that refuses or times
    out is an outage to wait out: 503 with ``Retry-After``, every header, a warning logged
    (nothing the client sent, nor the server's address, in the answer)."""
    with socket.socket() as held:  # a loopback port bound, never listening: refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        engine = make_engine(f"postgresql+psycopg://postgres@127.0.0.1:{port}/none")
        app = create_app(engine, AdminSettings())
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        with caplog.at_level(logging.WARNING):
            async with httpx.AsyncClient(transport=transport, base_url="https://t") as c:
                login = await c.post("/api/v1/auth/login", json={"name": "a", "password": "pw"})
                calls = await c.get("/api/v1/calls", headers=bearer("sb_not_a_token"))
        await engine.dispose()
    for r in (login, calls):
        assert r.status_code == 503, r.text
        assert r.json() == {
            "detail": [
                {"loc": [], "msg": "database unavailable: try again later", "type": "unavailable"}
            ]
        }
        assert r.headers["retry-after"] == str(DB_RETRY_AFTER_S)
        assert str(port) not in r.text
        _headers_present(r)
    said = [(rec.levelno, rec.getMessage()) for rec in caplog.records if rec.name == "admin.errors"]
    assert [level for level, _ in said] == [logging.WARNING, logging.WARNING], said
    assert "/api/v1/auth/login" in said[0][1] and str(port) in said[0][1]


def test_only_an_outage_is_unavailable_not_a_fault() -> None:
    """What counts as "try again later": refused, timed out, a full pool, a shutting-down or
    overloaded server, a locked SQLite file; a missing table or a bad query is a fault (500)."""

    def wrapped(orig: Exception) -> OperationalError:
        return OperationalError("SELECT 1", {}, orig)

    def pg(state: str | None) -> Exception:
        err = psycopg.OperationalError("x")
        err.sqlstate = state  # type: ignore[misc]
        return err

    def lite(code: int, words: str) -> Exception:
        err = sqlite3.OperationalError(words)
        err.sqlite_errorcode = code  # type: ignore[attr-defined]
        return err

    assert db_unavailable(PoolTimeout("QueuePool limit reached"))
    assert db_unavailable(wrapped(psycopg.errors.ConnectionTimeout("connection timeout expired")))
    assert db_unavailable(wrapped(pg(None)))  # refused: no SQLSTATE
    assert db_unavailable(wrapped(pg("53300")))  # too many connections
    assert db_unavailable(wrapped(pg("57P03")))  # cannot connect now (starting up)
    assert db_unavailable(wrapped(pg("08006")))  # connection failure
    assert db_unavailable(wrapped(lite(5, "database is locked")))
    assert db_unavailable(wrapped(lite(517, "database is locked")))  # SQLITE_BUSY_SNAPSHOT
    assert not db_unavailable(wrapped(lite(1, "no such table: admin_users")))
    assert not db_unavailable(wrapped(pg("42P01")))  # undefined table
    assert not db_unavailable(ValueError("not a database error"))


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
