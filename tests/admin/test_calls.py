"""The call log through the API: filters, pages, one call in full, live calls, the summary."""

from __future__ import annotations

from datetime import timedelta

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.admin.conftest import T0, add_call, add_token, bearer


async def test_calls_filter_and_paginate(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    token = await add_token(admin_engine, "vic", "viewer")
    auth = bearer(token)
    ids = []
    for i in range(5):
        ids.append(
            await add_call(
                admin_engine,
                caller=f"sip:+4930111{i}@pbx",
                at=T0 + timedelta(minutes=10 * i),
                end_reason="200 OK" if i % 2 == 0 else "transferred",
                turns=[("semantic", 180.0), ("llm", 900.0)] if i < 3 else [("knowledge", 400.0)],
            )
        )
    page = (await client.get("/api/v1/calls?limit=2", headers=auth)).json()
    assert (page["total"], page["limit"], page["offset"]) == (5, 2, 0)
    assert [c["id"] for c in page["items"]] == [str(ids[4]), str(ids[3])]  # newest first
    page2 = (await client.get("/api/v1/calls?limit=2&offset=4", headers=auth)).json()
    assert [c["id"] for c in page2["items"]] == [str(ids[0])]

    async def found(**params: str) -> set[str]:
        r = await client.get("/api/v1/calls", params=params, headers=auth)
        assert r.status_code == 200, r.text
        return {c["id"] for c in r.json()["items"]}

    assert await found(end_reason="transferred") == {str(ids[1]), str(ids[3])}
    assert await found(route="knowledge") == {str(ids[3]), str(ids[4])}
    assert await found(caller="301112") == {str(ids[2])}
    window = {
        "since": (T0 + timedelta(minutes=15)).isoformat(),
        "until": (T0 + timedelta(minutes=35)).isoformat(),
    }
    assert await found(**window) == {str(ids[2]), str(ids[3])}
    # An offset is honoured: 10:25+01:00 is 09:25 UTC.
    assert await found(since="2026-11-20T10:25:00+01:00") == {str(ids[3]), str(ids[4])}


async def test_call_detail_has_turns_stage_times_events_and_transcript(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    call_id = await add_call(
        admin_engine,
        caller="sip:+49301234@pbx",
        at=T0,
        end_reason="bot_hangup",
        turns=[("exact", 150.0), ("llm", None)],
    )
    r = await client.get(f"/api/v1/calls/{call_id}", headers=auth)
    assert r.status_code == 200, r.text
    call = r.json()
    assert (call["end_reason"], call["turns"]) == ("bot_hangup", 2)
    first, second = call["turns_detail"]
    assert first["stage_ms"] == {
        "speech_end": 0.0,
        "eot_decided": 300.0,
        "transcript_ready": 450.0,
        "route_decided": 460.0,
        "first_audio_out": 150.0,
        "response_done": 3000.0,
    }
    assert first["voice_to_voice_ms"] == 150.0 and second["voice_to_voice_ms"] is None
    assert first["stages"]["speech_end"].startswith("2026-11-20T09:00:10")
    assert call["events"] == [{"at": call["events"][0]["at"], "kind": "dtmf", "detail": "1"}]
    assert [(line["speaker"], line["text"]) for line in call["transcript"]] == [
        ("caller", "question 1"),
        ("bot", "answer 1"),
        ("caller", "question 2"),
        ("bot", "answer 2"),
    ]
    missing = await client.get("/api/v1/calls/00000000-0000-0000-0000-000000000000", headers=auth)
    assert missing.status_code == 404
    assert (await client.get("/api/v1/calls/not-a-uuid", headers=auth)).status_code == 422


async def test_live_calls_without_a_node_are_the_open_calls(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    open_id = await add_call(admin_engine, caller="sip:a@x", at=T0, end_reason=None, turns=[])
    await add_call(admin_engine, caller="sip:b@x", at=T0, end_reason="200 OK", turns=[])
    live = (await client.get("/api/v1/calls/live", headers=auth)).json()
    assert [c["id"] for c in live] == [str(open_id)]


async def test_summary_percentiles_cache_rate_and_calls_per_hour(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    # 20 semantic turns at 100..290 ms, 10 llm turns at 1000..1900 ms.
    for i in range(10):
        await add_call(
            admin_engine,
            caller=f"sip:{i}@x",
            at=T0 + timedelta(minutes=7 * i),
            end_reason="200 OK",
            turns=[
                ("semantic", 100.0 + 20 * i),
                ("semantic", 110.0 + 20 * i),
                ("llm", 1000.0 + 100 * i),
            ],
        )
    r = await client.get(
        "/api/v1/summary",
        params={"since": T0.isoformat(), "until": (T0 + timedelta(hours=2)).isoformat()},
        headers=auth,
    )
    assert r.status_code == 200, r.text
    s = r.json()
    assert (s["calls"], s["turns"]) == (10, 30)
    assert s["cache_hit_rate"] == round(20 / 30, 4)
    by_route = {row["route"]: row for row in s["voice_to_voice"]}
    assert by_route["llm"]["turns"] == 10
    assert by_route["llm"]["p50_ms"] == 1450.0
    assert by_route["llm"]["p95_ms"] == 1855.0
    assert by_route["semantic"]["p50_ms"] == 195.0
    # 09:00..09:56 and 10:03 (i = 9: 63 minutes)
    assert [(h["hour"][11:16], h["calls"]) for h in s["calls_per_hour"]] == [
        ("09:00", 9),
        ("10:00", 1),
    ]
    assert s["live_calls"] is None
    r = await client.get(
        f"/api/v1/summary?since={T0.isoformat()}&until={T0.isoformat()}", headers=auth
    )
    assert r.status_code == 422


async def test_text_no_database_can_store_is_refused_not_a_server_error(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    r = await client.get("/api/v1/calls", params={"caller": "a\x00b"}, headers=auth)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["query", "caller"]


async def test_latency_over_time_per_route_in_buckets(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    # Hour 09: semantic 100, 200, 300; llm 1000. Hour 10: semantic 500.
    await add_call(admin_engine, caller="a", at=T0, end_reason="x", turns=[("semantic", 100.0)])
    await add_call(
        admin_engine,
        caller="b",
        at=T0 + timedelta(minutes=20),
        end_reason="x",
        turns=[("semantic", 200.0), ("semantic", 300.0), ("llm", 1000.0)],
    )
    await add_call(
        admin_engine,
        caller="c",
        at=T0 + timedelta(minutes=65),
        end_reason="x",
        turns=[("semantic", 500.0), ("none", None)],
    )
    window = {"since": T0.isoformat(), "until": (T0 + timedelta(hours=3)).isoformat()}
    r = await client.get("/api/v1/summary/latency", params=window, headers=auth)
    assert r.status_code == 200, r.text
    points = [
        (p["start"][11:16], p["route"], p["turns"], p["p50_ms"], p["p95_ms"])
        for p in r.json()["points"]
    ]
    assert points == [
        ("09:00", "llm", 1, 1000.0, 1000.0),
        ("09:00", "semantic", 3, 200.0, 290.0),
        ("10:00", "semantic", 1, 500.0, 500.0),
    ]
    r = await client.get(
        "/api/v1/summary/latency", params={**window, "bucket_minutes": 0}, headers=auth
    )
    assert r.status_code == 422
