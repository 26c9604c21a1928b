"""Admin API fixtures: the app on a fresh database of each backend, users, and call rows."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from playwright.async_api import expect
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.accounts import create_token, create_user
from admin.app import create_app
from admin.db import AdminDb
from admin.security import Role
from admin.settings import AdminSettings
from bot.calllog.migrate import upgrade_async
from bot.calllog.models import Call, CallEvent, TurnRow
from bot.calllog.store import make_engine
from bot.recording import CallRecorder, recording_path
from tests.calllog.conftest import pg_database, pg_url  # noqa: F401 - a fixture

PASSWORD = "correct horse battery"
#: Seconds the tests' engines wait for a new PostgreSQL connection (the product's: 3).
PATIENT_CONNECT_S = 30

# The console's assertions wait up to 15 s, not Playwright's 5: beside three other test
# processes on a slow 2-core machine, the console's first render after ``goto`` took over
# 5 s (the Live page was still showing). A passing check returns as soon as it holds.
expect.set_options(timeout=15_000)


@pytest.fixture(params=["sqlite", "postgresql"])
def admin_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database on each backend (PostgreSQL: the suite's own server)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'admin.db'}"
    else:
        with pg_database(request.getfixturevalue("postgres_server")) as url:
            yield url


@pytest.fixture
async def admin_engine(admin_db_url: str) -> AsyncIterator[AsyncEngine]:
    await upgrade_async(admin_db_url)
    # What these tests check is each answer and the rows, not how fast a connection comes:
    # with every test group running at once, a connection to the suite's server once took
    # over the product's 3 s, and one of 21 requests sent at once failed.
    engine = make_engine(admin_db_url, connect_timeout_s=PATIENT_CONNECT_S)
    yield engine
    await engine.dispose()


@pytest.fixture
def admin_settings() -> AdminSettings:
    return AdminSettings(login_max_failures=3, login_window_s=60)


@pytest.fixture
async def client(
    admin_engine: AsyncEngine, admin_settings: AdminSettings
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app over ASGI, on https (the session cookie is ``Secure``)."""
    app = create_app(admin_engine, admin_settings)
    transport = httpx.ASGITransport(app=app, client=("10.0.0.7", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as c:
        yield c


async def add_user(engine: AsyncEngine, name: str, role: Role) -> None:
    async with AdminDb(engine).sessions() as session:
        await create_user(session, name, PASSWORD, role, actor="test")
        await session.commit()


async def add_token(engine: AsyncEngine, user: str, role: Role) -> str:
    """A new user of ``role`` and an API token of theirs; returns the token."""
    await add_user(engine, user, role)
    async with AdminDb(engine).sessions() as session:
        from admin.accounts import find_user  # noqa: PLC0415

        owner = await find_user(session, user)
        assert owner is not None
        _, secret = await create_token(session, owner, f"{user}-ci", role, actor="test")
        await session.commit()
    return secret


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


async def add_call(
    engine: AsyncEngine,
    *,
    caller: str,
    at: datetime,
    end_reason: str | None,
    turns: list[tuple[str, float | None]],
) -> uuid.UUID:
    """A call answered at ``at`` with one turn per (route, voice-to-voice ms)."""
    call_id = uuid.uuid4()
    async with AdminDb(engine).sessions() as session:
        session.add(
            Call(
                id=call_id,
                sip_call_id=f"sip-{call_id.hex[:8]}",
                caller=caller,
                callee="sip:bot@127.0.0.1",
                node="node-a:5060",
                config_version="1",
                arrived_at=at,
                answered_at=at,
                ended_at=at + timedelta(seconds=60) if end_reason else None,
                end_reason=end_reason,
            )
        )
        await session.flush()
        for seq, (route, v2v) in enumerate(turns, start=1):
            spoke = at + timedelta(seconds=10 * seq)
            session.add(
                TurnRow(
                    id=uuid.uuid4(),
                    call_id=call_id,
                    seq=seq,
                    transcript=f"question {seq}",
                    answer=f"answer {seq}",
                    route=route,
                    intent=None,
                    intent_score=None,
                    barged_in=False,
                    error=None,
                    speech_end_at=spoke,
                    eot_decided_at=spoke + timedelta(milliseconds=300),
                    transcript_ready_at=spoke + timedelta(milliseconds=450),
                    route_decided_at=spoke + timedelta(milliseconds=460),
                    first_token_at=None,
                    first_audio_out_at=(
                        spoke + timedelta(milliseconds=v2v) if v2v is not None else None
                    ),
                    response_done_at=spoke + timedelta(seconds=3),
                    finished_at=spoke + timedelta(seconds=3),
                    model_ms={"asr": 120.0},
                    purged_at=None,
                )
            )
        session.add(
            CallEvent(
                id=uuid.uuid4(),
                call_id=call_id,
                at=at + timedelta(seconds=5),
                kind="dtmf",
                detail="1",
                purged_at=None,
            )
        )
        await session.commit()
    return call_id


async def link_recording(
    engine: AsyncEngine, call_id: uuid.UUID, folder: Path, *, seconds: int
) -> Path:
    """A real recording of ``seconds`` (the recorder's own WAV, 8 kHz: the caller at 1000,
    the bot at -2000) in ``folder``, linked to the call as a node links it."""
    path = recording_path(folder, f"sip-{call_id.hex[:8]}").resolve()
    rec = CallRecorder(path, 8000)
    for _ in range(seconds * 50):
        rec.bot((-2000).to_bytes(2, "little", signed=True) * 160)
        rec.caller((1000).to_bytes(2, "little", signed=True) * 160)
    rec.close()
    await set_recording_path(engine, call_id, path)
    return path


async def set_recording_path(engine: AsyncEngine, call_id: uuid.UUID, path: Path | str) -> None:
    async with AdminDb(engine).sessions() as session:
        await session.execute(
            update(Call).where(Call.id == call_id).values(recording_path=str(path))
        )
        await session.commit()


def error_text(r: httpx.Response) -> str:
    """An error response's reasons, one a line (``{"detail": [{"loc", "msg", "type"}]}``)."""
    detail = r.json()["detail"]
    assert isinstance(detail, list), detail
    return "\n".join(item["msg"] for item in detail)
