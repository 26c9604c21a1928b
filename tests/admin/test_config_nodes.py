"""A configuration version a node cannot apply: the node keeps running the last version it
applied, and the API says so (``GET /config/nodes``: not applied on that node, and why).

The node's own check runs for real (``Node._apply_config`` through ``ConfigSync``): only
the sentence embedder is a fake, at the model boundary, one that takes longer than its time
limit on a batch with a given word (as a node's embedder did on an oversized version).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import numpy as np
import numpy.typing as npt
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.config.store import seed
from bot.knowledge.index import KnowledgeIndex
from node.app import Node
from node.config_sync import ConfigSync
from node.settings import Settings
from serve import Embedder
from serve.errors import ProviderTimeout
from serve.registry import ModelSet
from tests.admin.conftest import add_token, bearer
from tests.admin.test_config import PROFILE
from tests.serve.fakes import FakeASR, FakeLLM, FakeTTS, FakeVAD

#: A knowledge question with this word takes the embedder past its time limit.
SLOW = "zzslow"


class SlowOnWord(Embedder):
    """Embeds a batch in no time, but one with ``SLOW`` in ``timeout_s`` * 3."""

    def __init__(self) -> None:
        super().__init__(timeout_s=0.2, retries=0, name="slow-on-word")

    def _load(self) -> None:
        self.dim = 3

    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if any(SLOW in t for t in texts):
            time.sleep(0.6)
        return np.array([[len(t), 1.0, 0.5] for t in texts], dtype=np.float32)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def node(
    admin_engine: AsyncEngine, admin_db_url: str, tmp_path: Path, clock: Clock
) -> AsyncIterator[tuple[Node, ConfigSync]]:
    """A node on version 1 with its models loaded (fakes), following the database."""
    settings = Settings(database_url=admin_db_url, node_name="node-a:5060", data_dir=tmp_path)
    n = Node(settings, PROFILE)
    models = ModelSet(
        asr=FakeASR(), llm=FakeLLM(), tts=FakeTTS(), vad=FakeVAD(), embedder=SlowOnWord()
    )
    for model in (models.tts, models.embedder):
        assert model is not None
        await model.load()
    n.models = models
    sync = ConfigSync(
        admin_engine, poll_s=60, apply=n._apply_config, node="node-a:5060", clock=clock
    )
    found = await sync.initial(PROFILE, "profile:test.toml")
    assert found is not None and found.version == 1
    # As the node's start builds them.
    assert models.embedder is not None
    n.intent_cache = await n._start_intent_cache(models, PROFILE)
    n.knowledge = await KnowledgeIndex.build(
        PROFILE.knowledge, models.embedder, PROFILE.knowledge_matching
    )
    try:
        yield n, sync
    finally:
        await sync.stop()
        await n.intent_cache.stop()


async def test_a_version_the_node_refuses_is_shown_not_applied_and_the_last_stays(
    client: httpx.AsyncClient,
    admin_engine: AsyncEngine,
    node: tuple[Node, ConfigSync],
    clock: Clock,
) -> None:
    n, sync = node
    editor = bearer(await add_token(admin_engine, "ed", "editor"))
    nodes = (await client.get("/api/v1/config/nodes", headers=editor)).json()
    assert nodes["config_version"] == 1
    assert [(x["node"], x["state"], x["applied_version"]) for x in nodes["nodes"]] == [
        ("node-a:5060", "current", 1)
    ]
    assert n.intent_cache is not None
    intents_in_use = n.intent_cache.version
    # Version 2: a new intent; version 3: a knowledge question the node's embedder cannot
    # embed in time. The node sees version 3 (the newest), with both.
    r = await client.post(
        "/api/v1/config/intents",
        json={"name": "delivery", "examples": ["Do you deliver?"], "answer": "We do."},
        headers=editor,
    )
    assert r.status_code == 201, r.text
    r = await client.patch(
        "/api/v1/config/knowledge/returns",
        json={"questions": ["How do I return something?", f"Can I send it back {SLOW}?"]},
        headers=editor,
    )
    assert r.status_code == 200, r.text
    with pytest.raises(ProviderTimeout):
        await sync.check()
    # The node runs version 1, all of it: its profile, its knowledge index, and its intents
    # (the new intent is not published either: nothing is swapped in before all is made).
    assert sync.version == 1
    assert n.profile == PROFILE
    assert n.intent_cache.version == intents_in_use
    assert "delivery" not in n.intent_cache.intents
    assert n.knowledge is not None
    assert [e.questions for e in n.knowledge.entries] == [["How do I return something?"]]
    got = (await client.get("/api/v1/config/nodes", headers=editor)).json()
    assert got["config_version"] == 3
    (state,) = got["nodes"]
    assert (state["node"], state["state"]) == ("node-a:5060", "not_applied")
    assert (state["applied_version"], state["failed_version"]) == (1, 3)
    assert "ProviderTimeout" in state["failed_reason"], state
    assert state["failed_at"] is not None
    # Tried again (the cause may pass) after a poll's wait, then twice as long each time;
    # the same failure is not rewritten.
    first_failed_at = state["failed_at"]
    assert await sync.check() is False  # within the wait: not applied again
    clock.now += sync.poll_s
    with pytest.raises(ProviderTimeout):
        await sync.check()
    clock.now += sync.poll_s
    assert await sync.check() is False  # the wait doubled
    clock.now += sync.poll_s
    with pytest.raises(ProviderTimeout):
        await sync.check()
    again = (await client.get("/api/v1/config/nodes", headers=editor)).json()["nodes"][0]
    assert again["failed_at"] == first_failed_at
    # Version 4 puts it right: applied, and the failure is over.
    r = await client.patch(
        "/api/v1/config/knowledge/returns",
        json={"questions": ["How do I return something?", "Can I send it back?"]},
        headers=editor,
    )
    assert r.status_code == 200, r.text
    assert await sync.check() is True
    assert sync.version == 4
    assert "delivery" in n.intent_cache.intents
    assert [e.questions for e in n.knowledge.entries] == [
        ["How do I return something?", "Can I send it back?"]
    ]
    (state,) = (await client.get("/api/v1/config/nodes", headers=editor)).json()["nodes"]
    assert (state["state"], state["applied_version"], state["failed_version"]) == (
        "current",
        4,
        None,
    )
    assert state["failed_reason"] is None


async def test_nodes_need_a_login(client: httpx.AsyncClient) -> None:
    assert (await client.get("/api/v1/config/nodes")).status_code == 401


async def test_transfer_targets_are_settings(
    client: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    await seed(admin_engine, PROFILE, "profile:test.toml")
    editor = bearer(await add_token(admin_engine, "ed", "editor"))
    got = (await client.get("/api/v1/config/settings", headers=editor)).json()
    assert got["transfer_targets"] == []
    targets = [
        {"uri": "sip:desk@pbx.example.com", "mode": "warm", "bridge_on_refer_failure": False},
        {"uri": "tel:+4930123456", "mode": "refer", "bridge_on_refer_failure": True},
    ]
    r = await client.patch(
        "/api/v1/config/settings", json={"transfer_targets": targets}, headers=editor
    )
    assert r.status_code == 200, r.text
    assert r.json()["transfer_targets"] == targets
    assert r.json()["config_version"] == 2
    held = (await client.get("/api/v1/config/versions/2", headers=editor)).json()
    assert held["transfer_targets"] == targets
    refused = [
        [{"uri": "desk@pbx.example.com"}],  # no scheme
        [{"uri": "sip:a b@x"}],  # a space
        [{"uri": "sip:desk@x", "mode": "shout"}],
        [{"uri": "sip:desk@x"}, {"uri": "sip:desk@x"}],  # listed twice
        [{"uri": "sip:desk@x", "mode": "warm", "bridge_on_refer_failure": True}],
        [{"uri": f"sip:{n}@x"} for n in range(51)],  # beyond the bound
    ]
    for body in refused:
        r = await client.patch(
            "/api/v1/config/settings", json={"transfer_targets": body}, headers=editor
        )
        assert r.status_code == 422, (body, r.text)
    assert (await client.get("/api/v1/config/settings", headers=editor)).json()[
        "config_version"
    ] == 2
