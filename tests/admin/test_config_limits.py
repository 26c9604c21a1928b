"""A configuration a node cannot apply is refused at the API, with the limit named.

Found by a security test: an intent with 10,000 examples (or one negative example of 5 MB)
was accepted (201); the node's check timed out embedding it, and every later change was not
used for as long as it stayed. Each version stored 5.26 MB; the audit page returned 11.4 MB.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.config import limits
from bot.config.store import seed
from tests.admin.conftest import add_token, bearer
from tests.admin.test_config import PROFILE

INTENTS = "/api/v1/config/intents"


@pytest.fixture
async def editor(admin_engine: AsyncEngine) -> dict[str, str]:
    await seed(admin_engine, PROFILE, "profile:test.toml")
    return bearer(await add_token(admin_engine, "ed", "editor"))


def _intent(examples: list[str], negatives: list[str] | None = None) -> dict[str, Any]:
    return {
        "name": "big",
        "examples": examples,
        "negatives": negatives or [],
        "answer": "An answer.",
    }


async def _refused(r: httpx.Response, loc: list[Any], words: str) -> None:
    assert r.status_code == 422, (r.status_code, r.text[:300])
    problems = r.json()["detail"]
    assert [p["loc"] for p in problems] == [loc], problems
    assert words in problems[0]["msg"], problems
    assert len(r.content) < 2000


async def test_what_a_node_cannot_apply_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, editor: dict[str, str]
) -> None:
    many = [f"example number {i}" for i in range(10_000)]
    r = await client.post(INTENTS, json=_intent(many), headers=editor)
    await _refused(r, ["profile", "intents", 1, "examples"], "at most 100 items")

    long_one = "where is my parcel " * 20
    r = await client.post(INTENTS, json=_intent(["hello there", long_one]), headers=editor)
    await _refused(r, ["profile", "intents", 1, "examples", 1], "at most 200 characters")

    r = await client.post(
        INTENTS, json=_intent(["hello there"], negatives=["n" * 300]), headers=editor
    )
    await _refused(r, ["profile", "intents", 1, "negatives", 0], "at most 200 characters")

    # Each within its limits, too many characters for one embedding call together.
    sentences = [f"{i:03d} " + "is my order on its way to me yet " * 5 for i in range(40)]
    negatives = [f"{i:03d} " + "what colour is the sky on mars " * 5 for i in range(20)]
    r = await client.post(INTENTS, json=_intent(sentences, negatives), headers=editor)
    await _refused(r, ["profile", "intents", 1], "a node embeds them in one call")

    r = await client.patch(
        "/api/v1/config/settings", json={"greeting": "Hello. " * 200}, headers=editor
    )
    await _refused(r, ["profile", "greeting"], "at most 1000 characters")
    r = await client.patch(
        "/api/v1/config/settings", json={"fillers": ["One moment."] * 101}, headers=editor
    )
    await _refused(r, ["profile", "fillers"], "at most 100 items")
    r = await client.patch(
        "/api/v1/config/settings", json={"filler_after_ms": 2**62}, headers=editor
    )
    await _refused(r, ["profile", "filler_after_ms"], "at most 1000000000 in size")

    questions = [f"{i:03d} " + "how do I send back a parcel " * 6 for i in range(40)]
    r = await client.post(
        "/api/v1/config/knowledge",
        json={"topic": "big", "questions": questions[:40], "answer": "Like this."},
        headers=editor,
    )
    await _refused(r, ["profile", "knowledge"], "a node embeds them in one call")

    # A 5 MB example is stopped by the body limit before anything reads it.
    r = await client.post(INTENTS, json=_intent(["x" * 5_000_000]), headers=editor)
    assert r.status_code == 413
    assert "262144 bytes" in r.text

    # Nothing was written; what is within the limits still is.
    versions = (await client.get("/api/v1/config/versions", headers=editor)).json()
    assert versions["total"] == 1
    fits = _intent([f"example {i}" for i in range(limits.MAX_ITEMS)])
    r = await client.post(INTENTS, json=fits, headers=editor)
    assert r.status_code == 201, r.text[:300]
