"""Missed questions: callers' turns the bot did not answer from its configuration (the
honest fallback, or only a confirmation question), grouped by their words, the most calls
affected first (then the most turns); an editor adds one as an example through the
configuration API, and it drops out."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.db import AdminDb
from bot.calllog.models import TurnRow
from bot.config.store import seed
from tests.admin.conftest import add_call, add_token, bearer
from tests.admin.test_config import PROFILE

Said = tuple[str | None, str, str | None, timedelta]


async def add_turns(engine: AsyncEngine, said: list[Said], *, purged: bool = False) -> None:
    """One call whose turns are ``(transcript, route, intent, age)``, ``age`` before now."""
    now = datetime.now(UTC)
    call_id = await add_call(
        engine, caller="sip:1@x", at=now - timedelta(days=60), end_reason="200 OK", turns=[]
    )
    async with AdminDb(engine).sessions() as session:
        for seq, (text, route, intent, age) in enumerate(said, start=1):
            session.add(
                TurnRow(
                    id=uuid.uuid4(),
                    call_id=call_id,
                    seq=seq,
                    transcript=text,
                    answer="I am not sure about that.",
                    route=route,
                    intent=intent,
                    intent_score=0.5 if intent else None,
                    barged_in=False,
                    error=None,
                    finished_at=now - age,
                    model_ms={},
                    purged_at=now if purged else None,
                )
            )
        await session.commit()


MIN = timedelta(minutes=1)


@pytest.fixture
async def viewer(admin_engine: AsyncEngine) -> dict[str, str]:
    await seed(admin_engine, PROFILE, "profile:test.toml")
    await add_turns(
        admin_engine,
        [
            ("Do you sell gift cards?", "fallback", None, 30 * MIN),
            ("um, do you sell GIFT cards", "confirm", "returns", 20 * MIN),
            ("Do you sell gift cards", "fallback", None, 10 * MIN),
            ("Can I pay by invoice?", "fallback", None, 5 * MIN),
            ("Can I park at the shop?", "confirm", "opening_hours", 50 * MIN),
            ("When are you open?", "semantic", "opening_hours", 1 * MIN),  # answered
            ("What are your hours", "fallback", None, 2 * MIN),  # an example already
            ("Do you repair bikes?", "fallback", None, timedelta(days=40)),  # too old
            (None, "fallback", None, 3 * MIN),  # nothing heard
            ("   ", "fallback", None, 3 * MIN),
        ],
    )
    await add_turns(admin_engine, [("My card number is 4111", "fallback", None, MIN)], purged=True)
    return bearer(await add_token(admin_engine, "vic", "viewer"))


async def test_missed_questions_are_grouped_most_frequent_first(
    client: httpx.AsyncClient, viewer: dict[str, str]
) -> None:
    r = await client.get("/api/v1/missed-questions", headers=viewer)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["total"] == 3
    first, *rest = got["items"]
    # The newest wording stands for its group; each route counted.
    assert (first["text"], first["normalized"], first["calls"], first["count"]) == (
        "Do you sell gift cards",
        "do you sell gift cards",
        1,
        3,
    )
    assert first["routes"] == {"fallback": 2, "confirm": 1}
    assert first["nearest"] == "returns"
    last_seen = datetime.fromisoformat(first["last_seen"])
    assert timedelta(minutes=9) < datetime.now(UTC) - last_seen < timedelta(minutes=11)
    # Ties: the most recent first.
    assert [(q["text"], q["count"], q["nearest"]) for q in rest] == [
        ("Can I pay by invoice?", 1, None),
        ("Can I park at the shop?", 1, "opening_hours"),
    ]
    # Further back, the old one is there too; a page at a time.
    older = (await client.get("/api/v1/missed-questions?days=60", headers=viewer)).json()
    assert older["total"] == 4 and older["items"][-1]["text"] == "Do you repair bikes?"
    paged = (await client.get("/api/v1/missed-questions?limit=1&offset=1", headers=viewer)).json()
    assert (paged["total"], paged["limit"], paged["offset"]) == (3, 1, 1)
    assert [q["text"] for q in paged["items"]] == ["Can I pay by invoice?"]


async def test_the_most_calls_affected_rank_first_not_the_most_turns(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    """One caller asks the same thing three times; two others ask another thing once each:
    the other thing affected two calls, and an editor fixes it first."""
    await seed(admin_engine, PROFILE, "profile:test.toml")
    await add_turns(
        admin_engine,
        [
            ("Do you deliver on Sundays?", "fallback", None, 3 * MIN),
            ("do you deliver on sundays", "fallback", None, 2 * MIN),
            ("Do you deliver on Sundays", "confirm", "opening_hours", 1 * MIN),
        ],
    )
    await add_turns(admin_engine, [("Can I pay by invoice?", "fallback", None, 30 * MIN)])
    await add_turns(admin_engine, [("can I pay by invoice", "fallback", None, 20 * MIN)])
    auth = bearer(await add_token(admin_engine, "vic", "viewer"))
    got = (await client.get("/api/v1/missed-questions", headers=auth)).json()
    assert [(q["normalized"], q["calls"], q["count"]) for q in got["items"]] == [
        ("can i pay by invoice", 2, 2),
        ("do you deliver on sundays", 1, 3),
    ]
    # Equal calls: the most turns first, then the most recent.
    await add_turns(admin_engine, [("Do you deliver on Sundays?", "fallback", None, 40 * MIN)])
    await add_turns(admin_engine, [("Is there parking?", "fallback", None, 50 * MIN)])
    await add_turns(admin_engine, [("Is there parking?", "fallback", None, 45 * MIN)])
    got = (await client.get("/api/v1/missed-questions", headers=auth)).json()
    assert [(q["normalized"], q["calls"], q["count"]) for q in got["items"]] == [
        ("do you deliver on sundays", 2, 4),
        ("can i pay by invoice", 2, 2),
        ("is there parking", 2, 2),
    ]


@pytest.mark.parametrize(
    "query", ["days=0", "days=366", "limit=0", "limit=201", "offset=-1", "days=x"]
)
async def test_missed_questions_bounds(
    client: httpx.AsyncClient, viewer: dict[str, str], query: str
) -> None:
    r = await client.get(f"/api/v1/missed-questions?{query}", headers=viewer)
    assert r.status_code == 422, r.text


async def test_missed_questions_need_a_login(client: httpx.AsyncClient) -> None:
    assert (await client.get("/api/v1/missed-questions")).status_code == 401


async def test_a_question_added_as_an_example_is_a_new_audited_version_and_drops_out(
    client: httpx.AsyncClient, admin_engine: AsyncEngine, viewer: dict[str, str]
) -> None:
    editor = bearer(await add_token(admin_engine, "ed", "editor"))
    admin = bearer(await add_token(admin_engine, "ada", "admin"))
    missed = (await client.get("/api/v1/missed-questions", headers=editor)).json()["items"]
    words = missed[1]["text"]
    assert words == "Can I pay by invoice?"
    # As the console does: the intent's examples as they are, and the caller's words.
    intent = (await client.get("/api/v1/config/intents/opening_hours", headers=editor)).json()
    r = await client.patch(
        "/api/v1/config/intents/opening_hours",
        json={"examples": [*intent["examples"], words]},
        headers=editor,
    )
    assert r.status_code == 200, r.text
    assert r.json()["config_version"] == intent["config_version"] + 1
    entry = await client.get("/api/v1/audit?limit=1", headers=admin)
    (audit,) = entry.json()["items"]
    assert (audit["action"], audit["target"], audit["actor"]) == (
        "intent.update",
        "intent:opening_hours",
        "token:ed-ci (ed)",
    )
    assert words in audit["after"]["examples"] and words not in audit["before"]["examples"]
    # A knowledge entry's question works the same way.
    r = await client.patch(
        "/api/v1/config/knowledge/returns",
        json={"questions": ["How do I return something?", missed[0]["text"]]},
        headers=editor,
    )
    assert r.status_code == 200, r.text
    left = (await client.get("/api/v1/missed-questions", headers=viewer)).json()
    assert [q["text"] for q in left["items"]] == ["Can I park at the shop?"]
