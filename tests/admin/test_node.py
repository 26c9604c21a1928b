"""The API served by a real ``switchboard run``: a SIP call appears live, then in the log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from bot.calllog.store import make_engine
from telephony.dialer import dial
from testkit.botproc import run_bot
from testkit.voices import speak
from tests.admin.conftest import add_token, bearer
from tests.support.services import RedisServer

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
            exported = (await api.get("/metrics")).text
            assert "switchboard_sip_calls_total 1.0" in exported
            assert f'switchboard_turns_total{{route="{answered["route"]}"}}' in exported
            assert "switchboard_voice_to_voice_seconds_bucket" in exported


PROFILE_TOML = """
name = "Test Shop"
greeting = "Hello, this is the test shop."
apology = "Sorry, could you say that again?"
system_prompt = "You are the phone assistant of a test shop. Answer in one short sentence."

[[intents]]
name = "order_status"
examples = ["Where is my order?", "Where's my package?", "Has my order shipped?",
            "When will my parcel arrive?", "I want to track my order."]
answer = "You can track your order with the link in your confirmation email."
"""
NEW_ANSWER = "Your parcel left our warehouse this morning."


async def test_a_change_through_one_nodes_api_reaches_another_node_without_a_restart(
    pg_url: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    profile = tmp_path / "shop.toml"
    profile.write_text(PROFILE_TOML)
    engine = make_engine(pg_url)
    try:
        token = await add_token(engine, "ed", "editor")
    finally:
        await engine.dispose()
    env = {
        "SWITCHBOARD_DATABASE_URL": pg_url,
        "SWITCHBOARD_REDIS_URL": redis_server.url(),
        "SWITCHBOARD_INTENT_CACHE__SIGNING_KEY": "test-signing-key-of-the-suite",
        "SWITCHBOARD_ADMIN__CONFIG_POLL_S": "0.5",
    }
    with run_bot(env=env, profile=profile) as node_a, run_bot(env=env, profile=profile) as node_b:
        async with httpx.AsyncClient(
            base_url=node_a.admin_url, headers=bearer(token), timeout=30
        ) as api:
            before = (await api.post("/api/v1/config/try", json={"text": QUESTION})).json()
            assert before["intent"] == "order_status", before
            matching = (await api.get("/api/v1/config/matching")).json()
            # The defaults, fitted at load to this one intent and the background lines.
            assert matching["threshold"] >= 0.45 and matching["confirm_threshold"] == 0.35
            assert matching["background_lines"] > 100, matching
            assert {w["intent"] for w in matching["warnings"]} <= {"order_status"}
            assert before["answer"].startswith("You can track your order")
            r = await api.patch("/api/v1/config/intents/order_status", json={"answer": NEW_ANSWER})
            assert r.status_code == 200, r.text
            assert r.json()["config_version"] == 2
            for _ in range(100):
                if any("configuration version 2" in line for line in node_b.lines):
                    break
                await asyncio.sleep(0.1)
            assert any("configuration version 2" in line for line in node_b.lines)

            result = await dial(node_b.uri, script=[(3.0, speak(QUESTION))], record_seconds=10)
            assert result.sip_final_status == 200
            for _ in range(50):
                calls = (await api.get("/api/v1/calls")).json()["items"]
                if calls and calls[0]["ended_at"]:
                    break
                await asyncio.sleep(0.1)
            assert len(calls) == 1 and calls[0]["config_version"] == "2", calls
            detail = (await api.get(f"/api/v1/calls/{calls[0]['id']}")).json()
            answered = [t for t in detail["turns_detail"] if t["intent"] == "order_status"]
            assert answered, detail["turns_detail"]
            assert answered[0]["answer"] == NEW_ANSWER
            assert answered[0]["route"] in {"exact", "semantic"}
            after = (await api.post("/api/v1/config/try", json={"text": QUESTION})).json()
            assert after["answer"] == NEW_ANSWER
