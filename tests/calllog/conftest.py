"""Call-log fixtures: a fresh database per test on PostgreSQL and on SQLite, and a TCP proxy."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.calllog.migrate import upgrade_async
from bot.calllog.models import Call, CallEvent, TurnRow
from bot.calllog.store import make_engine
from tests.support.services import PostgresServer


def pg_target(url: str) -> tuple[str, int]:
    """The host and port a PostgreSQL URL points at (what a proxy in front must forward to)."""
    parsed = make_url(url)
    assert parsed.host is not None and parsed.port is not None, url
    return parsed.host, parsed.port


def with_port(url: str, port: int) -> str:
    """``url`` through another port (a proxy's, or one nothing listens on)."""
    return make_url(url).set(port=port).render_as_string(hide_password=False)


@contextlib.contextmanager
def pg_database(server: PostgresServer) -> Iterator[str]:
    """A new, empty database on the suite's PostgreSQL (dropped after); yields its URL."""
    name = f"calllog_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server.url(name)
    finally:
        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database on each backend (PostgreSQL started only when needed)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'calllog.db'}"
    else:
        with pg_database(request.getfixturevalue("postgres_server")) as url:
            yield url


@pytest.fixture
async def db_url(empty_url: str) -> str:
    """The URL of a database migrated to head."""
    await upgrade_async(empty_url)
    return empty_url


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a PostgreSQL database migrated to head."""
    with pg_database(postgres_server) as url:
        from bot.calllog.migrate import upgrade  # noqa: PLC0415

        upgrade(url)
        yield url


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    eng = make_engine(db_url)
    yield eng
    await eng.dispose()


@dataclass
class Counts:
    calls: int
    turns: int
    events: int
    open_calls: int


async def counts(engine: AsyncEngine) -> Counts:
    """Rows in each call-log table."""
    async with engine.connect() as conn:
        calls = (await conn.execute(select(func.count()).select_from(Call))).scalar_one()
        turns = (await conn.execute(select(func.count()).select_from(TurnRow))).scalar_one()
        events = (await conn.execute(select(func.count()).select_from(CallEvent))).scalar_one()
        still_open = (
            await conn.execute(
                select(func.count()).select_from(Call).where(Call.ended_at.is_(None))
            )
        ).scalar_one()
    return Counts(calls, turns, events, still_open)


class TcpProxy:
    """A loopback TCP proxy the test can cut (refuse and drop) and stall (accept, say nothing)."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.stalled = False

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        """Stop listening (connections refused) and drop every open connection."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for w in list(self._links):
            w.transport.abort()
        self._links.clear()

    def stall(self) -> None:
        """Keep accepting, forward nothing; open connections are dropped."""
        self.stalled = True
        for w in list(self._links):
            w.transport.abort()
        self._links.clear()

    def unstall(self) -> None:
        self.stalled = False

    async def restore(self) -> None:
        """Listen again on the same port."""
        await self.start(self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._links.add(writer)
        if self.stalled:
            return  # hold the connection open, forward nothing (dropped on unstall/cut)
        try:
            up_r, up_w = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._links.add(up_w)
        for src, dst in ((reader, up_w), (up_r, writer)):
            task = asyncio.create_task(self._pipe(src, dst))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            dst.transport.abort()
            self._links.discard(dst)

    async def close(self) -> None:
        await self.cut()
        for task in list(self._tasks):
            task.cancel()
