"""Suggested examples through the API: editors ask the node for them, nothing is written;
accepting one is the intent's PATCH, a new audited version. The node is a fake at the
API's boundary here (``FakeNode``); the node's own side is tested with its models in
``tests/node/test_admin_port.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.node_port import SuggestionRead, SuggestionsRead
from admin.settings import AdminSettings
from bot.config.store import seed
from tests.admin.conftest import add_token, bearer, error_text
from tests.admin.fake_node import FakeNode
from tests.admin.test_config import PROFILE

OFFERED = SuggestionsRead(
    intent="opening_hours",
    offered=[
        SuggestionRead(text="what time do you close today", score=0.61, answered=False),
        SuggestionRead(text="are you open on saturday", score=0.83, answered=True),
    ],
    dropped={"another intent": 2},
)


@pytest.fixture
def node() -> FakeNode:
    return FakeNode(suggestions={"opening_hours": OFFERED})


@pytest.fixture
async def api(admin_engine: AsyncEngine, node: FakeNode) -> AsyncIterator[httpx.AsyncClient]:
    await seed(admin_engine, PROFILE, "profile:test.toml")
    app = create_app(admin_engine, AdminSettings(), node=node)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as c:
        yield c


SUGGEST = "/api/v1/config/intents/opening_hours/suggestions"


async def test_an_editor_gets_the_nodes_suggestions_and_nothing_is_written(
    api: httpx.AsyncClient, admin_engine: AsyncEngine, node: FakeNode
) -> None:
    editor = bearer(await add_token(admin_engine, "ed", "editor"))
    r = await api.post(SUGGEST, headers=editor)
    assert r.status_code == 200, r.text
    assert r.json() == OFFERED.model_dump()
    assert node.asked == ["opening_hours"]
    versions = (await api.get("/api/v1/config/versions", headers=editor)).json()
    assert versions["total"] == 1
    admin = bearer(await add_token(admin_engine, "root", "admin"))
    audit = (await api.get("/api/v1/audit", headers=admin)).json()["items"]
    assert [e["action"] for e in audit if e["action"].startswith("intent.")] == []


async def test_a_viewer_may_not_ask_for_suggestions(
    api: httpx.AsyncClient, admin_engine: AsyncEngine, node: FakeNode
) -> None:
    viewer = bearer(await add_token(admin_engine, "vic", "viewer"))
    assert (await api.post(SUGGEST, headers=viewer)).status_code == 403
    assert (await api.post(SUGGEST)).status_code == 401
    assert node.asked == []


async def test_an_unknown_intent_is_404_and_the_node_is_not_asked(
    api: httpx.AsyncClient, admin_engine: AsyncEngine, node: FakeNode
) -> None:
    editor = bearer(await add_token(admin_engine, "ed", "editor"))
    r = await api.post("/api/v1/config/intents/parking/suggestions", headers=editor)
    assert r.status_code == 404
    assert error_text(r) == "no intent 'parking'"
    assert node.asked == []


async def test_a_node_that_cannot_write_them_says_why_in_a_503(
    api: httpx.AsyncClient, admin_engine: AsyncEngine, node: FakeNode
) -> None:
    node.suggestions.clear()
    editor = bearer(await add_token(admin_engine, "ed", "editor"))
    r = await api.post(SUGGEST, headers=editor)
    assert r.status_code == 503
    assert error_text(r) == "the node does not run intent 'opening_hours' yet"


async def test_without_a_node_suggestions_are_503(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    await seed(admin_engine, PROFILE, "profile:test.toml")
    editor = bearer(await add_token(admin_engine, "ed", "editor"))
    r = await client.post(SUGGEST, headers=editor)
    assert r.status_code == 503
    assert "switchboard run" in error_text(r)


async def test_accepting_a_suggestion_is_one_audited_version(
    api: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    editor = bearer(await add_token(admin_engine, "ed", "editor"))
    (line, _) = (await api.post(SUGGEST, headers=editor)).json()["offered"]
    intent = (await api.get("/api/v1/config/intents/opening_hours", headers=editor)).json()
    r = await api.patch(
        "/api/v1/config/intents/opening_hours",
        json={"examples": [*intent["examples"], line["text"]]},
        headers=editor,
    )
    assert r.status_code == 200, r.text
    assert r.json()["config_version"] == 2
    assert r.json()["examples"][-1] == "what time do you close today"
    admin = bearer(await add_token(admin_engine, "root", "admin"))
    (entry,) = [
        e
        for e in (await api.get("/api/v1/audit", headers=admin)).json()["items"]
        if e["action"] == "intent.update"
    ]
    assert (entry["target"], entry["actor"]) == ("intent:opening_hours", "token:ed-ci (ed)")
    assert "what time do you close today" not in entry["before"]["examples"]
    assert "what time do you close today" in entry["after"]["examples"]
