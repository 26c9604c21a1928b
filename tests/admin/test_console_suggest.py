"""The console's "Suggest examples" on an intent: the node's suggestions listed with their
score and whether the intent answers them already; Accept adds that one line (a new
configuration version, audited), nothing else is added. In a real headless Chromium at a
laptop and a phone width, the node a fake at the API's boundary (the node's side runs on
its real models in tests/node/test_admin_port.py); screenshots in test-artifacts/console/."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from admin.app import create_app
from admin.node_port import IntentWarningRead, MatchingInUse
from admin.server import AdminServer
from admin.settings import AdminSettings
from bot.config.store import seed
from tests.admin import test_console, test_console_config
from tests.admin.conftest import add_user
from tests.admin.fake_node import FakeNode
from tests.admin.test_config import PROFILE
from tests.admin.test_console import CHROMIUM, VIEWPORTS, _log_in, _shot
from tests.admin.test_suggest_examples import OFFERED

#: What a node reports of the test profile's one intent: thin.
MATCHING = MatchingInUse(
    threshold=0.55,
    confirm_threshold=0.45,
    background_lines=120,
    warnings=[
        IntentWarningRead(
            intent="opening_hours",
            kind="thin",
            message="opening_hours has 2 examples: callers' other wordings may not match",
        )
    ],
)

admin_db_url = test_console.admin_db_url
browser = test_console.browser
api = test_console_config.api
page = test_console_config.page

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


@pytest.fixture
async def console(admin_engine: AsyncEngine, tmp_path: Path) -> AsyncIterator[str]:
    """The app, in a node that suggests OFFERED for opening_hours, on a loopback port."""
    await seed(admin_engine, PROFILE, "profile:test.toml")
    await add_user(admin_engine, "ada", "admin")
    node = FakeNode(suggestions={"opening_hours": OFFERED}, matching=MATCHING)
    app = create_app(admin_engine, AdminSettings(), node=node, recordings_dir=tmp_path)
    server = AdminServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.stop()


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
async def test_suggested_examples_are_accepted_one_by_one(
    page: Page, console: str, api: httpx.AsyncClient, viewport: str
) -> None:
    await page.click("nav a[data-page=intents]")
    row = page.locator("#intents tr:has(td:text-is('opening_hours'))")
    await row.locator("button.suggest-examples").click()
    lines = page.locator("#suggestions li")
    await expect(lines).to_have_count(2)
    await expect(lines.nth(0)).to_contain_text("what time do you close today")
    await expect(lines.nth(0)).to_contain_text("score 0.61 · not yet answered")
    await expect(lines.nth(1)).to_contain_text("score 0.83 · answered")
    await expect(page.locator("#suggest-status")).to_contain_text("Left out: 2 (another intent)")
    width = VIEWPORTS[viewport]["width"]
    assert await page.evaluate("document.documentElement.scrollWidth") <= width
    await _shot(page, f"{viewport}-intent-suggestions")
    # Nothing was written by asking.
    assert (await api.get("/config/settings")).json()["config_version"] == 1

    await lines.nth(0).locator("button.accept").click()
    await expect(lines.nth(0)).to_contain_text("added (configuration version 2)")
    await expect(lines.nth(0).locator("button.accept")).to_have_count(0)
    await expect(lines.nth(1).locator("button.accept")).to_have_count(1)
    held = (await api.get("/config/intents/opening_hours")).json()
    assert held["examples"] == [*PROFILE.intents[0].examples, "what time do you close today"]
    assert held["config_version"] == 2
    (entry,) = (await api.get("/audit", params={"limit": 1})).json()["items"]
    assert (entry["action"], entry["target"], entry["actor"]) == (
        "intent.update",
        "intent:opening_hours",
        "user:ada",
    )
    # Closing redraws the list with the intent's new count of examples.
    await page.locator(".suggest-card button.cancel").click()
    await expect(page.locator(".suggest-card")).to_have_count(0)
    examples = page.locator("#intents tr:has(td:text-is('opening_hours')) td[data-label=Examples]")
    await expect(examples).to_have_text("3")
    assert test_console_config._problems(page) == []


async def test_a_node_without_suggestions_says_why(
    page: Page, console: str, api: httpx.AsyncClient, admin_engine: AsyncEngine
) -> None:
    created = await api.post(
        "/config/intents",
        json={"name": "parking", "examples": ["Where can I park?"], "answer": "Behind us."},
    )
    assert created.status_code == 201, created.text
    await page.click("nav a[data-page=intents]")
    row = page.locator("#intents tr:has(td:text-is('parking'))")
    await row.locator("button.suggest-examples").click()
    await expect(page.locator(".suggest-card .error")).to_have_text(
        "No suggestions: the node does not run intent 'parking' yet"
    )
    assert (await api.get("/config/settings")).json()["config_version"] == 2


async def test_a_viewer_has_no_suggest_button(
    browser: Browser, console: str, admin_engine: AsyncEngine
) -> None:
    await add_user(admin_engine, "vic", "viewer")
    context = await browser.new_context(viewport=VIEWPORTS["laptop"])  # type: ignore[arg-type]
    try:
        viewer = await context.new_page()
        await _log_in(viewer, console, "vic", "viewer")
        await viewer.goto(console + "/console/#/intents")
        await expect(viewer.locator("#intents")).to_contain_text("opening_hours")
        await expect(viewer.locator("button.suggest-examples")).to_have_count(0)
    finally:
        await context.close()
