"""A call's recording through the API: who may fetch it, what is refused and why, the audit."""

from __future__ import annotations

import asyncio
import io
import os
import uuid
import wave
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.settings import AdminSettings
from bot.recording.files import partial_path
from tests.admin.conftest import (
    T0,
    add_call,
    add_token,
    bearer,
    error_text,
    link_recording,
    set_recording_path,
)


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    return tmp_path / "recordings"


@pytest.fixture
async def served(admin_engine: AsyncEngine, recordings: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The app as a node builds it: it may serve what lies in ``recordings``."""
    app = create_app(admin_engine, AdminSettings(), recordings_dir=recordings)
    transport = httpx.ASGITransport(app=app, client=("10.0.0.7", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as c:
        yield c


async def _ended_call(engine: AsyncEngine, minute: int = 0) -> uuid.UUID:
    return await add_call(
        engine,
        caller="sip:+49301@pbx",
        at=T0 + timedelta(minutes=minute),
        end_reason="caller_hangup",
        turns=[],
    )


async def _recorded_call(engine: AsyncEngine, recordings: Path) -> uuid.UUID:
    """An ended call with a second of recording."""
    call_id = await _ended_call(engine)
    await link_recording(engine, call_id, recordings, seconds=1)
    return call_id


async def test_an_editor_fetches_the_recording_and_the_fetch_is_audited(
    served: httpx.AsyncClient, admin_engine: AsyncEngine, recordings: Path
) -> None:
    editor = bearer(await add_token(admin_engine, "eve", "editor"))
    admin = bearer(await add_token(admin_engine, "ada", "admin"))
    call_id = await _ended_call(admin_engine)
    path = await link_recording(admin_engine, call_id, recordings, seconds=1)
    data = path.read_bytes()

    listed = (await served.get("/api/v1/calls", headers=editor)).json()["items"]
    assert [c["recorded"] for c in listed] == [True]
    r = await served.get(f"/api/v1/calls/{call_id}/recording", headers=editor)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav"
    assert f"call-{call_id}.wav" in r.headers["content-disposition"]
    assert r.content == data
    with wave.open(io.BytesIO(r.content)) as w:
        assert (w.getnchannels(), w.getframerate(), w.getnframes()) == (2, 8000, 8000)
        first = w.readframes(1)
    # Caller on the left, bot on the right.
    assert first == (1000).to_bytes(2, "little", signed=True) + (-2000).to_bytes(
        2, "little", signed=True
    )
    # A player asks for a part of the file.
    part = await served.get(
        f"/api/v1/calls/{call_id}/recording", headers={**editor, "Range": "bytes=0-43"}
    )
    assert part.status_code == 206 and part.content == data[:44]

    audit = (await served.get("/api/v1/audit", headers=admin)).json()["items"]
    fetched = [e for e in audit if e["action"] == "recording.fetch"]
    assert len(fetched) == 2
    assert {e["actor"] for e in fetched} == {"token:eve-ci (eve)"}
    assert {e["target"] for e in fetched} == {f"call:{call_id}"}


async def test_a_viewer_may_not_hear_it(
    served: httpx.AsyncClient, admin_engine: AsyncEngine, recordings: Path
) -> None:
    viewer = bearer(await add_token(admin_engine, "vic", "viewer"))
    call_id = await _recorded_call(admin_engine, recordings)
    r = await served.get(f"/api/v1/calls/{call_id}/recording", headers=viewer)
    assert r.status_code == 403
    assert "editor" in error_text(r)
    # The call itself is still theirs to read, and says it was recorded.
    assert (await served.get(f"/api/v1/calls/{call_id}", headers=viewer)).json()["recorded"]


async def test_refusals_say_why(
    served: httpx.AsyncClient, admin_engine: AsyncEngine, recordings: Path, tmp_path: Path
) -> None:
    editor = bearer(await add_token(admin_engine, "eve", "editor"))

    async def refused(call_id: uuid.UUID) -> tuple[int, str]:
        r = await served.get(f"/api/v1/calls/{call_id}/recording", headers=editor)
        return r.status_code, error_text(r)

    unknown = uuid.uuid4()
    assert await refused(unknown) == (404, f"no call {unknown}")

    not_recorded = await _ended_call(admin_engine, 1)
    status, detail = await refused(not_recorded)
    assert status == 404 and "has no recording" in detail, detail

    live = await add_call(admin_engine, caller="sip:+49302@pbx", at=T0, end_reason=None, turns=[])
    await link_recording(admin_engine, live, recordings, seconds=1)
    status, detail = await refused(live)
    assert status == 409 and "in progress" in detail, detail

    # Ended, but its recorder has not yet renamed the file to its own name.
    finishing = await _ended_call(admin_engine, 4)
    path = await link_recording(admin_engine, finishing, recordings, seconds=1)
    path.rename(partial_path(path))
    status, detail = await refused(finishing)
    assert status == 409 and "being finished" in detail, detail

    gone = await _ended_call(admin_engine, 2)
    await set_recording_path(admin_engine, gone, recordings / "2026-11-20" / "deleted.wav")
    status, detail = await refused(gone)
    assert status == 404 and "not in this host's recordings folder" in detail, detail

    # A row that points outside the folder (a tampered database) serves nothing.
    elsewhere = await _ended_call(admin_engine, 3)
    outside = await link_recording(admin_engine, elsewhere, tmp_path / "other", seconds=1)
    assert (await refused(elsewhere))[0] == 404
    sneaky = recordings / ".." / outside.relative_to(tmp_path)  # the folder exists (live's)
    assert await asyncio.to_thread(os.path.realpath, sneaky) == str(outside)
    await set_recording_path(admin_engine, elsewhere, str(sneaky))
    assert (await refused(elsewhere))[0] == 404


async def test_an_api_without_a_recordings_folder_serves_none(
    client: httpx.AsyncClient, admin_engine: AsyncEngine, recordings: Path
) -> None:
    editor = bearer(await add_token(admin_engine, "eve", "editor"))
    call_id = await _recorded_call(admin_engine, recordings)
    r = await client.get(f"/api/v1/calls/{call_id}/recording", headers=editor)
    assert r.status_code == 404
