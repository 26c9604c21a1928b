"""The API served by a real ``switchboard run``: a SIP call appears live, then in the log."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from bot.calllog.store import make_engine
from telephony.dialer import dial
from testkit.botproc import run_bot
from testkit.voices import speak
from tests.admin.conftest import add_token, bearer

pytestmark = [pytest.mark.sip, pytest.mark.models]

QUESTION = "Where is my order?"  # the default profile's order_status intent


async def test_a_call_is_live_in_the_nodes_api_then_in_its_log(pg_url: str) -> None:
    engine = make_engine(pg_url)
    try:
        token = await add_token(engine, "vic", "viewer")
    finally:
        await engine.dispose()
    auth = bearer(token)
    with run_bot(env={"SWITCHBOARD_DATABASE_URL": pg_url}) as bot:
        async with httpx.AsyncClient(base_url=bot.admin_url, headers=auth, timeout=10) as api:
            assert (await api.get("/api/v1/calls/live")).json() == []
            call = asyncio.create_task(
                dial(bot.uri, script=[(3.0, speak(QUESTION))], record_seconds=12)
            )
            live: list[dict[str, object]] = []
            for _ in range(100):
                live = (await api.get("/api/v1/calls/live")).json()
                if live or call.done():
                    break
                await asyncio.sleep(0.1)
            assert len(live) == 1, live
            assert "sip:dialer@" in str(live[0]["caller"])
            result = await call
            assert result.sip_final_status == 200
            for _ in range(100):  # the call's end reaches the node a moment after the BYE
                if (await api.get("/api/v1/calls/live")).json() == []:
                    break
                await asyncio.sleep(0.1)
            assert (await api.get("/api/v1/calls/live")).json() == []
            for _ in range(50):  # and the database after the writer's batch window
                calls = (await api.get("/api/v1/calls")).json()
                if calls["total"] == 1 and calls["items"][0]["ended_at"]:
                    break
                await asyncio.sleep(0.1)
            assert calls["total"] == 1 and calls["items"][0]["id"] == live[0]["id"]
            detail = (await api.get(f"/api/v1/calls/{live[0]['id']}")).json()
            turns = detail["turns_detail"]
            assert turns, detail
            assert "order" in " ".join(t["transcript"] or "" for t in turns).lower()
            answered = next(t for t in turns if t["voice_to_voice_ms"] is not None)
            ms = answered["stage_ms"]
            assert ms["speech_end"] == 0.0
            assert 0 < ms["eot_decided"] <= ms["transcript_ready"] <= ms["first_audio_out"]
            summary = (await api.get("/api/v1/summary")).json()
            assert summary["calls"] == 1 and summary["live_calls"] == 0
