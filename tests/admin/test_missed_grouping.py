"""Missed questions grouped by meaning with the node's sentence embedder (a fake at the
API's boundary here; the threshold is checked on MiniLM in tests/node/test_admin_port.py),
and the turns that count as missed besides the fallback: a confirmation question the caller
said no to, and a request put through to a person."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.settings import AdminSettings
from bot.config.store import seed
from bot.profile import BotProfile
from tests.admin.conftest import add_token, bearer
from tests.admin.fake_node import FakeNode
from tests.admin.test_config import PROFILE
from tests.admin.test_missed_questions import MIN, add_turns

WITH_TRANSFER = BotProfile.model_validate(
    {
        **PROFILE.model_dump(),
        "intents": [
            *PROFILE.model_dump()["intents"],
            {
                "name": "talk_to_person",
                "examples": ["Can I talk to a person?"],
                "answer": "Putting you through.",
                "action": "transfer",
                "transfer_to": "sip:desk@example.com",
            },
        ],
    }
)

#: The fake embedder's topics: texts with one of these words get that topic's direction.
TOPICS = ("gift", "invoice|bill", "park")


def embed(texts: list[str]) -> list[list[float]]:
    out = []
    for n, text in enumerate(texts):
        v = [0.0] * 16
        hit = next(
            (i for i, t in enumerate(TOPICS) if any(w in text.lower() for w in t.split("|"))),
            None,
        )
        v[hit if hit is not None else len(TOPICS) + n % 12] = 1.0
        out.append(v)
    return out


async def _client(engine: AsyncEngine, node: FakeNode | None) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(engine, AdminSettings(), node=node)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as c:
        yield c


@pytest.fixture
async def said(admin_engine: AsyncEngine) -> dict[str, str]:
    await seed(admin_engine, WITH_TRANSFER, "profile:test.toml")
    await add_turns(
        admin_engine,
        [
            ("Do you sell gift cards?", "fallback", None, 30 * MIN),
            ("Do you sell gift cards", "fallback", None, 25 * MIN),
            ("Can I buy a gift card here", "fallback", None, 20 * MIN),
            ("Can I pay by invoice?", "fallback", None, 15 * MIN),
            ("Could you send me a bill instead", "fallback", None, 14 * MIN),
            ("Can I park at the shop?", "confirm", "opening_hours", 10 * MIN),
            ("No, not that", "fallback", None, 9 * MIN),  # declines the question before
            ("Is it open now", "confirm", "opening_hours", 8 * MIN),
            ("yes", "confirmed", "opening_hours", 7 * MIN),
            ("My warranty claim was ignored, get me someone", "semantic", "talk_to_person", MIN),
            ("When are you open?", "semantic", "opening_hours", MIN),  # answered
        ],
    )
    return bearer(await add_token(admin_engine, "vic", "viewer"))


async def test_with_the_nodes_embedder_questions_are_grouped_by_meaning(
    admin_engine: AsyncEngine, said: dict[str, str]
) -> None:
    async for client in _client(admin_engine, FakeNode(embedder=embed)):
        got = (await client.get("/api/v1/missed-questions", headers=said)).json()
    assert got["grouped_by"] == "meaning"
    rows = [(q["text"], q["count"], q["variants"]) for q in got["items"]]
    assert rows[:2] == [
        ("Do you sell gift cards", 3, ["Can I buy a gift card here"]),
        ("Could you send me a bill instead", 2, ["Can I pay by invoice?"]),
    ]
    assert got["total"] == 5
    gift = got["items"][0]
    assert gift["routes"] == {"fallback": 3}
    assert [q["calls"] for q in got["items"][:2]] == [1, 1]  # one caller asked them all


async def test_groups_merged_by_meaning_count_a_call_once(
    admin_engine: AsyncEngine, said: dict[str, str]
) -> None:
    """Merged groups take the union of their calls, not the sum: a caller who asked in
    both wordings is one call affected; the merged group ranks by it."""
    # Two more callers about invoices and bills: three calls, three turns.
    await add_turns(admin_engine, [("Can I pay by invoice?", "fallback", None, 12 * MIN)])
    await add_turns(admin_engine, [("Can I pay by invoice", "fallback", None, 11 * MIN)])
    # One more about gift cards, in both wordings: two calls, five turns.
    await add_turns(
        admin_engine,
        [
            ("Do you sell gift cards?", "fallback", None, 13 * MIN),
            ("Can I buy a gift card here", "fallback", None, 12 * MIN),
        ],
    )
    async for client in _client(admin_engine, FakeNode(embedder=embed)):
        got = (await client.get("/api/v1/missed-questions", headers=said)).json()
    assert got["grouped_by"] == "meaning"
    rows = [(q["text"], q["calls"], q["count"], q["variants"]) for q in got["items"][:2]]
    assert rows == [
        ("Can I pay by invoice", 3, 4, ["Could you send me a bill instead"]),
        ("Do you sell gift cards?", 2, 5, ["Can I buy a gift card here"]),
    ]


async def test_without_an_embedder_the_words_group_them(
    admin_engine: AsyncEngine, said: dict[str, str]
) -> None:
    for node in (None, FakeNode()):
        async for client in _client(admin_engine, node):
            got = (await client.get("/api/v1/missed-questions", headers=said)).json()
        assert got["grouped_by"] == "words"
        assert got["total"] == 7
        assert (got["items"][0]["text"], got["items"][0]["count"]) == ("Do you sell gift cards", 2)
        assert all(q["variants"] == [] for q in got["items"])


async def test_a_declined_question_and_a_transfer_are_missed_and_a_no_is_not(
    admin_engine: AsyncEngine, said: dict[str, str]
) -> None:
    async for client in _client(admin_engine, None):
        items = (await client.get("/api/v1/missed-questions", headers=said)).json()["items"]
    by_text = {q["text"]: q for q in items}
    assert by_text["Can I park at the shop?"]["routes"] == {"declined": 1}
    assert by_text["Can I park at the shop?"]["nearest"] == "opening_hours"
    # Asked to confirm and said yes: still a question the intents were not sure of.
    assert by_text["Is it open now"]["routes"] == {"confirm": 1}
    person = by_text["My warranty claim was ignored, get me someone"]
    assert (person["routes"], person["nearest"]) == ({"transfer": 1}, None)
    # The caller's replies to the questions are no questions of their own.
    assert "No, not that" not in by_text and "yes" not in by_text
    assert "When are you open?" not in by_text


async def test_an_embedder_that_fails_leaves_the_word_groups(
    admin_engine: AsyncEngine, said: dict[str, str]
) -> None:
    def broken(texts: list[str]) -> list[list[float]]:
        raise TimeoutError("embedder: timed out after 2s")

    async for client in _client(admin_engine, FakeNode(embedder=broken)):
        r = await client.get("/api/v1/missed-questions", headers=said)
    assert r.status_code == 200 and r.json()["grouped_by"] == "words"
