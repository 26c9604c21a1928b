"""Outcomes through the API: six calls with known endings, stored through the call log's
writer, and every figure of the summary, the comparison and the CSV exports checked."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.api.outcomes import _Call, _not_sure
from bot.calllog.outcomes import TurnFacts
from tests.admin.conftest import add_token, bearer
from tests.calllog.helpers import open_log
from tests.calllog.known_calls import KNOWN, T0, report

VERSION = "0" * 64  # what the call log's tests run with
RANGE = {"since": T0.isoformat(), "until": "2026-11-22T00:00:00+00:00"}


@pytest.fixture
async def known(admin_db_url: str, admin_engine: AsyncEngine, tmp_path: Path) -> None:
    log = await open_log(admin_db_url, tmp_path / "spool")
    try:
        for call in KNOWN:
            report(log, call)
        await log.writer.flush()
    finally:
        await log.close()


def rates(calls: int, **outcomes: int) -> dict[str, object]:
    figures: dict[str, object] = {"calls": calls}
    for o in ("resolved", "transferred", "abandoned", "refused", "failed"):
        figures[o] = outcomes.get(o, 0)
    for name, key in (
        ("containment_rate", "resolved"),
        ("transfer_rate", "transferred"),
        ("abandonment_rate", "abandoned"),
    ):
        figures[name] = round(outcomes.get(key, 0) / calls, 4)
    return figures


@pytest.mark.usefixtures("known")
async def test_the_summary_matches_the_known_calls(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    r = await client.get("/api/v1/outcomes/summary", params=RANGE, headers=auth)
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["totals"] == rates(6, resolved=1, transferred=2, abandoned=3)
    day1 = rates(5, resolved=1, transferred=2, abandoned=2)
    day2 = rates(1, abandoned=1)
    assert s["by_day"] == [{"day": "2026-11-20", **day1}, {"day": "2026-11-21", **day2}]
    assert s["by_hour"] == [
        {"hour": 9, **rates(4, resolved=1, transferred=2, abandoned=1)},
        {"hour": 10, **rates(2, abandoned=2)},
    ]
    assert s["transfers_by_reason"] == {"asked": 1, "declined": 1}
    assert s["abandoned_by_place"] == {"not_sure": 1, "queue": 1, "silence": 1}
    assert s["refused_by_reason"] == {} and s["failed_by_reason"] == {}
    assert s["average_call_s"] == pytest.approx(sum(c.length_s for c in KNOWN) / 6, abs=0.01)
    # The first answered turn's end of speech to first audio: 300, 500 and 900 ms on the
    # three calls with an answer (numpy's linear percentile: 500 + 0.9 * 400 at P95).
    assert s["first_answer_calls"] == 3
    assert (s["first_answer_p50_ms"], s["first_answer_p95_ms"]) == (500.0, 860.0)
    # "Not sure" once, about gift cards; the "No" that declined a question is no topic.
    assert s["not_sure_topics"] == [
        {
            "text": "Do you sell gift cards?",
            "normalized": "do you sell gift cards",
            "calls": 1,
            "count": 1,
        }
    ]
    # The post-call question, answered yes on the one call that ended with a goodbye.
    assert s["post_call"] == {"asked": 1, "yes": 1, "no": 0, "none": 0, "yes_rate": 1.0}
    entries = {e.pop("name"): e for e in s["entries"]}
    assert entries == {
        "order_status": {
            "asked": 2,
            "answered": 1,
            "confirmed_no": 1,
            "followed_by_transfer": 0,
            "followed_by_hangup": 0,
        },
        "talk_to_person": {
            "asked": 2,
            "answered": 2,
            "confirmed_no": 0,
            "followed_by_transfer": 2,
            "followed_by_hangup": 0,
        },
        "goodbye": {
            "asked": 1,
            "answered": 1,
            "confirmed_no": 0,
            "followed_by_transfer": 0,
            "followed_by_hangup": 0,
        },
    }
    # Two versions side by side: the calls' own, and one no call ran.
    r = await client.get(
        "/api/v1/outcomes/compare", params=RANGE | {"a": VERSION, "b": "7"}, headers=auth
    )
    assert r.status_code == 200, r.text
    both = r.json()
    assert both["a"]["totals"] == s["totals"] and both["a"]["config_version"] == VERSION
    assert both["b"]["totals"]["calls"] == 0 and both["b"]["by_day"] == []
    assert both["b"]["totals"]["containment_rate"] is None


@pytest.mark.usefixtures("known")
async def test_calls_and_turns_as_csv(client: httpx.AsyncClient, admin_engine: AsyncEngine) -> None:
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    r = await client.get("/api/v1/outcomes/calls.csv", params=RANGE, headers=auth)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    got = {row["sip_call_id"]: (row["outcome"], row["outcome_reason"]) for row in rows}
    assert got == {c.sip_call_id: c.outcome for c in KNOWN}
    answers = {row["sip_call_id"]: row["post_call_answer"] for row in rows}
    assert answers == {c.sip_call_id: "yes" if c.minute == 0 else "" for c in KNOWN}
    first = {row["sip_call_id"]: row["first_answer_ms"] for row in rows}
    assert first == {
        "answered-then-goodbye": "300.0",
        "transfer-request": "500.0",
        "no-then-put-through": "900.0",
        "hangup-after-not-sure": "",
        "hangup-in-queue": "",
        "silence-until-the-timer": "",
    }
    lengths = {row["sip_call_id"]: float(row["length_s"]) for row in rows}
    for c in KNOWN:
        assert lengths[c.sip_call_id] == pytest.approx(c.length_s, abs=0.01)
    r = await client.get(
        "/api/v1/outcomes/calls.csv", params=RANGE | {"outcome": "transferred"}, headers=auth
    )
    assert {row["sip_call_id"] for row in csv.DictReader(io.StringIO(r.text))} == {
        "transfer-request",
        "no-then-put-through",
    }
    # A call's page: its outcome and why, and each turn's.
    one = next(row for row in rows if row["sip_call_id"] == "no-then-put-through")
    detail = (await client.get(f"/api/v1/calls/{one['id']}", headers=auth)).json()
    assert (detail["outcome"], detail["outcome_reason"]) == ("transferred", "declined")
    assert detail["post_call_answer"] is None  # not asked on this call
    assert [t["outcome"] for t in detail["turns_detail"]] == [
        "confirmed_no",
        "declined",
        "answered",
    ]
    r = await client.get(
        "/api/v1/outcomes/turns.csv", params=RANGE | {"route": "confirm"}, headers=auth
    )
    assert r.status_code == 200, r.text
    turns = list(csv.DictReader(io.StringIO(r.text)))
    assert [(t["seq"], t["route"], t["outcome"]) for t in turns] == [
        ("1", "confirm", "confirmed_no"),
        ("2", "fallback", "declined"),
        ("3", "confirmed", "answered"),
    ]


async def test_bad_ranges_are_refused_with_the_reason(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    backwards = {"since": "2026-11-21T00:00:00Z", "until": "2026-11-20T00:00:00Z"}
    too_long = {"since": "2024-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}
    for path in ("summary", "calls.csv", "turns.csv"):
        r = await client.get(f"/api/v1/outcomes/{path}", params=backwards, headers=auth)
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["msg"] == "since must be before until"
    r = await client.get("/api/v1/outcomes/summary", params=too_long, headers=auth)
    assert r.status_code == 422 and "longer than 366 days" in r.json()["detail"][0]["msg"]
    r = await client.get("/api/v1/outcomes/compare", params={"a": "1"}, headers=auth)
    assert r.status_code == 422
    assert (await client.get("/api/v1/outcomes/summary")).status_code == 401


@pytest.mark.usefixtures("known")
async def test_a_not_sure_topic_opens_its_missed_questions(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    """The summary's "not sure" words, given to Missed questions (as the page's link does),
    give that group alone; other missed words are left out."""
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    s = (await client.get("/api/v1/outcomes/summary", params=RANGE, headers=auth)).json()
    topic = s["not_sure_topics"][0]["normalized"]
    every = (await client.get("/api/v1/missed-questions?days=365", headers=auth)).json()
    assert every["total"] > 1, every  # the declined question of another call is missed too
    r = await client.get(
        "/api/v1/missed-questions", params={"days": 365, "words": topic}, headers=auth
    )
    assert r.status_code == 200, r.text
    page = r.json()
    assert [(q["normalized"], q["count"], q["routes"]) for q in page["items"]] == [
        (topic, 1, {"fallback": 1})
    ]
    assert page["total"] == 1
    # Words as said (case, punctuation) find the same group.
    r = await client.get(
        "/api/v1/missed-questions",
        params={"days": 365, "words": "Do you sell GIFT cards?"},
        headers=auth,
    )
    assert r.json()["total"] == 1


def _not_sure_call(at: datetime, *said: str) -> _Call:
    """An abandoned call whose turns were each "not sure" about ``said``."""
    turns = [TurnFacts(seq=n, route="fallback", transcript=t) for n, t in enumerate(said, 1)]
    return _Call(
        id=uuid.uuid4(),
        answered_at=at,
        ended_at=at + timedelta(minutes=1),
        end_reason="BYE",
        outcome="abandoned",
        reason="not_sure",
        turns=turns,
        turn_outcomes=["declined"] * len(said),
        first_answer_ms=None,
        finished=[at + timedelta(seconds=n) for n in range(len(said))],
        post_call_answer=None,
    )


def test_not_sure_topics_rank_by_calls_then_turns() -> None:
    """As Missed questions ranks them: one caller asking three times is one call, behind
    a question two callers asked once each."""
    at = datetime(2026, 11, 20, 9, tzinfo=UTC)
    sundays = "Do you deliver on Sundays?"
    calls = [
        _not_sure_call(at + timedelta(hours=2), sundays, "do you deliver on sundays", sundays),
        _not_sure_call(at, "Can I pay by invoice?"),
        _not_sure_call(at + timedelta(minutes=5), "Can I pay by invoice?"),
        _not_sure_call(at + timedelta(hours=1), "Is there parking?", "Is there parking?"),
    ]
    topics = [(t.normalized, t.calls, t.count) for t in _not_sure(calls)]
    assert topics == [
        ("can i pay by invoice", 2, 2),
        ("do you deliver on sundays", 1, 3),
        ("is there parking", 1, 2),
    ]
